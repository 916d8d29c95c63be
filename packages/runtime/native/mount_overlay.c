// mount(2) of an overlay, which Node.js cannot make: mount(8) did it, and
// starting that process (it also reads the whole mount table) was ~10-20 ms
// of every sandbox start on a small host. And umount(2), for the same
// reason: umount(8) took 20-40 ms of a build's COPY step, most of it the
// fork of a large Node process with its event loop stopped, where the
// system call takes about 1 ms.
//
// The lower layers are named relative to a directory (mounts.ts explains
// why), and a relative path resolves against the calling thread's working
// directory, which threads share with the whole process. So the mount runs
// in a thread of its own that first unshares its filesystem context
// (unshare(CLONE_FS)) and then changes into that directory: the rest of the
// process, Node's own threads included, never sees another working directory.
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <node_api.h>

#include "throw_errno.h"

struct overlay_mount {
  char* dir;
  char* target;
  char* options;
  int err;
  const char* step;
};

static void* mount_in_dir(void* arg) {
  struct overlay_mount* m = arg;
  if (unshare(CLONE_FS) < 0) {
    m->err = errno;
    m->step = "unshare the working directory for";
  } else if (chdir(m->dir) < 0) {
    m->err = errno;
    m->step = "change into the layer links' directory for";
  } else if (mount("overlay", m->target, "overlay", 0, m->options) < 0) {
    m->err = errno;
    m->step = "mount an overlay on";
  }
  return NULL;
}

static char* string_arg(napi_env env, napi_value value) {
  size_t len;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) return NULL;
  char* s = malloc(len + 1);
  if (s != NULL) napi_get_value_string_utf8(env, value, s, len + 1, &len);
  return s;
}

// mountOverlay(dir, target, options): mounts an overlay on `target` with
// mount options `options`, whose relative paths are resolved from `dir`.
static napi_value mount_overlay(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "mountOverlay(dir, target, options)");
    return NULL;
  }
  struct overlay_mount m = {string_arg(env, argv[0]), string_arg(env, argv[1]), string_arg(env, argv[2]), 0, NULL};
  napi_value result = NULL;
  if (m.dir == NULL || m.target == NULL || m.options == NULL) {
    napi_throw_type_error(env, NULL, "mountOverlay: dir, target and options must be strings");
  } else {
    pthread_t thread;
    int err = pthread_create(&thread, NULL, mount_in_dir, &m);
    if (err != 0) {
      throw_errno(env, err, "start a thread to mount an overlay on", m.target);
    } else {
      pthread_join(thread, NULL);
      if (m.err != 0) throw_errno(env, m.err, m.step, m.target);
      else napi_get_undefined(env, &result);
    }
  }
  free(m.dir);
  free(m.target);
  free(m.options);
  return result;
}

struct unmount_work {
  char* target;
  int flags;
  int err;
  napi_async_work work;
  napi_deferred deferred;
};

// In a thread of libuv's pool: an unmount may wait for the filesystem to
// write back what it holds (a disk's ext4), which the event loop must not.
static void unmount_execute(napi_env env, void* data) {
  struct unmount_work* u = data;
  u->err = umount2(u->target, u->flags) < 0 ? errno : 0;
}

static void unmount_complete(napi_env env, napi_status status, void* data) {
  struct unmount_work* u = data;
  if (u->err == 0) {
    napi_value undefined;
    napi_get_undefined(env, &undefined);
    napi_resolve_deferred(env, u->deferred, undefined);
  } else {
    char msg[4352];
    snprintf(msg, sizeof msg, "unmount '%s': %s", u->target, strerror(u->err));
    napi_value code, message, error;
    napi_create_string_utf8(env, uv_err_name(-u->err), NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
    napi_create_error(env, code, message, &error);
    napi_set_named_property(env, error, "code", code);
    napi_reject_deferred(env, u->deferred, error);
  }
  napi_delete_async_work(env, u->work);
  free(u->target);
  free(u);
}

// unmount(target, lazy): a promise of umount2(target, lazy ? MNT_DETACH : 0),
// rejected with an errno error (code EBUSY, EINVAL...).
static napi_value unmount(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  bool lazy = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_bool(env, argv[1], &lazy) != napi_ok) {
    napi_throw_type_error(env, NULL, "unmount(target, lazy)");
    return NULL;
  }
  struct unmount_work* u = calloc(1, sizeof *u);
  if (u == NULL || (u->target = string_arg(env, argv[0])) == NULL) {
    free(u);
    napi_throw_type_error(env, NULL, "unmount: target must be a string");
    return NULL;
  }
  u->flags = lazy ? MNT_DETACH : 0;
  napi_value promise, name;
  napi_create_string_utf8(env, "paddock:unmount", NAPI_AUTO_LENGTH, &name);
  if (napi_create_promise(env, &u->deferred, &promise) != napi_ok ||
      napi_create_async_work(env, NULL, name, unmount_execute, unmount_complete, u, &u->work) != napi_ok ||
      napi_queue_async_work(env, u->work) != napi_ok) {
    free(u->target);
    free(u);
    napi_throw_error(env, NULL, "unmount: could not queue the work");
    return NULL;
  }
  return promise;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mountOverlay", NULL, mount_overlay, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unmount", NULL, unmount, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, 2, props) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
