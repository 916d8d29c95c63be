// Linux system calls envd needs and Node.js does not offer:
//
// - inotify, with the real event kinds (Node's fs.watch folds them into
//   "rename" and "change", which cannot tell a create from a move or a
//   write from a chmod);
// - extended attributes, where uploaded file metadata is kept;
// - waitpid on a given pid, so that envd, as a container's init, can reap
//   orphaned processes without touching the children libuv waits for.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, "envd_native: " #call " failed");   \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

// Throws an Error whose `code` is the errno name (ENOENT, ...), like Node's
// own fs errors, so that callers can branch on it.
static napi_value throw_errno(napi_env env, int err, const char* what, const char* path) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s '%s': %s", what, path ? path : "", strerror(err));
  napi_value code, message, error;
  napi_create_string_utf8(env, uv_err_name(-err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_value errno_value;
  napi_create_int32(env, -err, &errno_value);
  napi_set_named_property(env, error, "errno", errno_value);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

// Reads argument i as a newly allocated C string (caller frees).
static char* get_string(napi_env env, napi_value value) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a string");
    return NULL;
  }
  char* buf = malloc(len + 1);
  if (!buf) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, value, buf, len + 1, &len);
  return buf;
}

// ---------------------------------------------------------------- inotify

typedef struct {
  int fd;
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context async;
  int closed;       // close() ran: fd, poll and references are released
  int poll_closed;  // libuv finished closing the poll handle
  int finalized;    // the JavaScript handle was garbage-collected
} watcher_t;

// The struct is freed once both libuv and the JavaScript handle are done
// with it, whichever comes last.
static void on_poll_closed(uv_handle_t* handle) {
  watcher_t* w = handle->data;
  w->poll_closed = 1;
  if (w->finalized) free(w);
}

static void watcher_close(watcher_t* w) {
  if (w->closed) return;
  w->closed = 1;
  uv_poll_stop(&w->poll);
  close(w->fd);
  napi_delete_reference(w->env, w->callback);
  napi_async_destroy(w->env, w->async);
  uv_close((uv_handle_t*)&w->poll, on_poll_closed);
}

// Drains the inotify descriptor and hands the events to JavaScript as an
// array of {wd, mask, cookie, name}.
static void on_readable(uv_poll_t* handle, int status, int events) {
  (void)events;
  watcher_t* w = handle->data;
  if (w->closed || status < 0) return;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value list;
  napi_create_array(env, &list);
  uint32_t count = 0;
  char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(w->fd, buf, sizeof buf);
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      struct inotify_event* ev = (struct inotify_event*)p;
      napi_value obj, v;
      napi_create_object(env, &obj);
      napi_create_int32(env, ev->wd, &v);
      napi_set_named_property(env, obj, "wd", v);
      napi_create_uint32(env, ev->mask, &v);
      napi_set_named_property(env, obj, "mask", v);
      napi_create_uint32(env, ev->cookie, &v);
      napi_set_named_property(env, obj, "cookie", v);
      napi_create_string_utf8(env, ev->len ? ev->name : "", NAPI_AUTO_LENGTH, &v);
      napi_set_named_property(env, obj, "name", v);
      napi_set_element(env, list, count++, obj);
      p += sizeof(struct inotify_event) + ev->len;
    }
  }
  if (count > 0) {
    napi_value cb, recv, result;
    napi_get_reference_value(env, w->callback, &cb);
    napi_get_global(env, &recv);
    // An exception thrown by the callback stays pending and surfaces as an
    // uncaught exception once control returns to Node.
    napi_make_callback(env, w->async, recv, cb, 1, &list, &result);
  }
  napi_close_handle_scope(env, scope);
}

static void watcher_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  watcher_t* w = data;
  w->finalized = 1;
  if (!w->closed) watcher_close(w);
  else if (w->poll_closed) free(w);
}

// inotifyOpen(callback) -> handle
static napi_value inotify_open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_valuetype t;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, NULL, "inotifyOpen expects a callback");
    return NULL;
  }
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "inotify_init1", NULL);
  watcher_t* w = calloc(1, sizeof *w);
  w->fd = fd;
  w->env = env;
  uv_loop_t* loop;
  CHECK(napi_get_uv_event_loop(env, &loop));
  CHECK(napi_create_reference(env, argv[0], 1, &w->callback));
  napi_value name;
  napi_create_string_utf8(env, "envd:inotify", NAPI_AUTO_LENGTH, &name);
  CHECK(napi_async_init(env, NULL, name, &w->async));
  w->poll.data = w;
  int rc = uv_poll_init(loop, &w->poll, fd);
  if (rc != 0) {
    close(fd);
    napi_delete_reference(env, w->callback);
    napi_async_destroy(env, w->async);
    free(w);
    return throw_errno(env, -rc, "uv_poll_init", NULL);
  }
  w->poll.data = w;
  w->finalized = 1;  // no JavaScript handle yet: free as soon as libuv is done
  rc = uv_poll_start(&w->poll, UV_READABLE, on_readable);
  if (rc != 0) {
    watcher_close(w);
    return throw_errno(env, -rc, "uv_poll_start", NULL);
  }
  w->finalized = 0;
  napi_value handle;
  CHECK(napi_create_external(env, w, watcher_finalize, NULL, &handle));
  return handle;
}

static watcher_t* get_watcher(napi_env env, napi_value v) {
  void* data = NULL;
  if (napi_get_value_external(env, v, &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "expected an inotify handle");
    return NULL;
  }
  watcher_t* w = data;
  if (w->closed) {
    napi_throw_error(env, "EBADF", "inotify handle is closed");
    return NULL;
  }
  return w;
}

// inotifyAddWatch(handle, path, mask) -> wd
static napi_value inotify_add(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  watcher_t* w = get_watcher(env, argv[0]);
  if (!w) return NULL;
  char* path = get_string(env, argv[1]);
  if (!path) return NULL;
  uint32_t mask;
  if (napi_get_value_uint32(env, argv[2], &mask) != napi_ok) {
    free(path);
    napi_throw_type_error(env, NULL, "mask must be a number");
    return NULL;
  }
  int wd = inotify_add_watch(w->fd, path, mask);
  if (wd < 0) {
    napi_value r = throw_errno(env, errno, "inotify_add_watch", path);
    free(path);
    return r;
  }
  free(path);
  napi_value result;
  napi_create_int32(env, wd, &result);
  return result;
}

// inotifyRemoveWatch(handle, wd); a watch the kernel already dropped is fine.
static napi_value inotify_rm(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  watcher_t* w = get_watcher(env, argv[0]);
  if (!w) return NULL;
  int32_t wd;
  CHECK(napi_get_value_int32(env, argv[1], &wd));
  inotify_rm_watch(w->fd, wd);
  return NULL;
}

static napi_value inotify_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void* data = NULL;
  if (napi_get_value_external(env, argv[0], &data) == napi_ok && data) watcher_close(data);
  return NULL;
}

// ---------------------------------------------------------------- xattr

// getXattrs(path, prefix) -> {name-without-prefix: value}. Entries that
// cannot carry attributes (symlinks, some filesystems) give {}.
static napi_value get_xattrs(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char* path = get_string(env, argv[0]);
  if (!path) return NULL;
  char* prefix = get_string(env, argv[1]);
  if (!prefix) {
    free(path);
    return NULL;
  }
  size_t plen = strlen(prefix);
  napi_value out;
  napi_create_object(env, &out);
  char names[64 * 1024];
  ssize_t n = llistxattr(path, names, sizeof names);
  if (n < 0) {
    int err = errno;
    if (err == ENOTSUP || err == ENODATA || err == EPERM) goto done;
    throw_errno(env, err, "llistxattr", path);
    out = NULL;
    goto done;
  }
  for (char* name = names; name < names + n; name += strlen(name) + 1) {
    if (strncmp(name, prefix, plen) != 0) continue;
    char value[4096];
    ssize_t vn = lgetxattr(path, name, value, sizeof value);
    if (vn < 0) continue;
    napi_value v;
    napi_create_string_utf8(env, value, (size_t)vn, &v);
    napi_set_named_property(env, out, name + plen, v);
  }
done:
  free(path);
  free(prefix);
  return out;
}

// setXattr(path, name, value)
static napi_value set_xattr(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char* path = get_string(env, argv[0]);
  char* name = path ? get_string(env, argv[1]) : NULL;
  char* value = name ? get_string(env, argv[2]) : NULL;
  napi_value r = NULL;
  if (value && lsetxattr(path, name, value, strlen(value), 0) < 0) r = throw_errno(env, errno, "lsetxattr", path);
  free(path);
  free(name);
  free(value);
  return r;
}

// removeXattr(path, name); a missing attribute is fine.
static napi_value remove_xattr(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char* path = get_string(env, argv[0]);
  char* name = path ? get_string(env, argv[1]) : NULL;
  napi_value r = NULL;
  if (name && lremovexattr(path, name) < 0 && errno != ENODATA) r = throw_errno(env, errno, "lremovexattr", path);
  free(path);
  free(name);
  return r;
}

// ---------------------------------------------------------------- reaping

// reap(pid) -> true when a zombie with that pid was collected.
static napi_value reap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t pid;
  CHECK(napi_get_value_int32(env, argv[0], &pid));
  int status;
  pid_t r = waitpid(pid, &status, WNOHANG);
  napi_value result;
  napi_get_boolean(env, r == pid, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"inotifyOpen", NULL, inotify_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyAddWatch", NULL, inotify_add, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyRemoveWatch", NULL, inotify_rm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyClose", NULL, inotify_close, NULL, NULL, NULL, napi_enumerable, NULL},
      {"getXattrs", NULL, get_xattrs, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setXattr", NULL, set_xattr, NULL, NULL, NULL, napi_enumerable, NULL},
      {"removeXattr", NULL, remove_xattr, NULL, NULL, NULL, napi_enumerable, NULL},
      {"reap", NULL, reap, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
