// One call Node.js does not offer: a unix stream socket bound to a path and
// listening, given back as a bare file descriptor that nobody in this
// process accepts on. The runtime hands such descriptors to a sandbox's envd
// (runc --preserve-fds), so the socket files are made by the host, in a
// directory only the host can reach, and the host never connects to a path
// that a sandbox could have replaced. net.Server cannot do this: it accepts
// on whatever it listens on, and unlinks the path when it is closed.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <node_api.h>

#include "throw_errno.h"

// listenUnix(path, backlog) -> fd. The socket file gets mode 0600; the
// descriptor is close-on-exec (a child gets it only where it is passed on).
static napi_value listen_unix(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) {
    napi_throw_type_error(env, NULL, "listenUnix(path, backlog)");
    return NULL;
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  size_t len;
  if (napi_get_value_string_utf8(env, argv[0], addr.sun_path, sizeof addr.sun_path, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "listenUnix: path must be a string");
    return NULL;
  }
  if (len == 0 || len >= sizeof addr.sun_path - 1) {
    napi_throw_range_error(env, NULL, "listenUnix: path is empty or too long for a unix socket");
    return NULL;
  }
  int32_t backlog;
  if (napi_get_value_int32(env, argv[1], &backlog) != napi_ok) {
    napi_throw_type_error(env, NULL, "listenUnix: backlog must be a number");
    return NULL;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket for", addr.sun_path);
  const char* step = "bind";
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) < 0 || (step = "chmod", chmod(addr.sun_path, 0600) < 0) ||
      (step = "listen on", listen(fd, backlog) < 0)) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, step, addr.sun_path);
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"listenUnix", NULL, listen_unix, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, 1, props) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
