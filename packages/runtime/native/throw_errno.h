// The error a native call throws when a system call fails: an Error whose
// code is the errno's name (ENOENT, like Node's own fs errors) and whose
// message names the step and the path.
#ifndef PADDOCK_THROW_ERRNO_H
#define PADDOCK_THROW_ERRNO_H

#include <stdio.h>
#include <string.h>

#include <node_api.h>
#include <uv.h>

static napi_value throw_errno(napi_env env, int err, const char* what, const char* path) {
  char msg[4352];
  snprintf(msg, sizeof msg, "%s '%s': %s", what, path, strerror(err));
  napi_value code, message, error;
  napi_create_string_utf8(env, uv_err_name(-err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

#endif
