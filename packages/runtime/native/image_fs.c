// Two calls Node.js does not offer, for unpacking image layers into the form
// overlayfs reads: mknod (a whiteout is a character device 0/0; FIFOs in a
// layer stay FIFOs) and lsetxattr (an opaque directory carries
// trusted.overlay.opaque=y). Both act on the path itself, never through a
// symlink at its end; the caller makes sure no directory above it is one.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>

#include <node_api.h>

#include "throw_errno.h"

#define MAX_PATH 4096

static int get_path(napi_env env, napi_value v, char* buf) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, buf, MAX_PATH, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "path must be a string");
    return 0;
  }
  if (len == 0 || len >= MAX_PATH - 1) {
    napi_throw_range_error(env, NULL, "path is empty or too long");
    return 0;
  }
  return 1;
}

// mknod(path, mode, major, minor): mode includes the file type (S_IFCHR, S_IFIFO).
static napi_value do_mknod(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  char path[MAX_PATH];
  uint32_t mode, major_, minor_;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4) {
    napi_throw_type_error(env, NULL, "mknod(path, mode, major, minor)");
    return NULL;
  }
  if (!get_path(env, argv[0], path)) return NULL;
  if (napi_get_value_uint32(env, argv[1], &mode) != napi_ok || napi_get_value_uint32(env, argv[2], &major_) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &minor_) != napi_ok) {
    napi_throw_type_error(env, NULL, "mknod: mode, major and minor must be numbers");
    return NULL;
  }
  if (mknod(path, (mode_t)mode, makedev(major_, minor_)) < 0) return throw_errno(env, errno, "mknod", path);
  return NULL;
}

// lsetxattr(path, name, value)
static napi_value do_lsetxattr(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  char path[MAX_PATH], name[256], value[1024];
  size_t name_len, value_len;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "lsetxattr(path, name, value)");
    return NULL;
  }
  if (!get_path(env, argv[0], path)) return NULL;
  if (napi_get_value_string_utf8(env, argv[1], name, sizeof name, &name_len) != napi_ok ||
      napi_get_value_string_utf8(env, argv[2], value, sizeof value, &value_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "lsetxattr: name and value must be strings");
    return NULL;
  }
  if (lsetxattr(path, name, value, value_len, 0) < 0) return throw_errno(env, errno, "lsetxattr", path);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mknod", NULL, do_mknod, NULL, NULL, NULL, napi_enumerable, NULL},
      {"lsetxattr", NULL, do_lsetxattr, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, 2, props) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
