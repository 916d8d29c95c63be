// A download's body sent from a file to a socket by the kernel
// (sendfile(2)), driven by the event loop, so that the bytes never enter
// JavaScript; the one fast path envd keeps (src/sendfile.ts says why).
//
// The transfer works on its own duplicates of the two descriptors, so that a
// socket Node closes while it runs can never have its number reused under
// it. JavaScript must keep Node from writing to the socket meanwhile;
// sendfile.ts does that.
//
//   sendFromFile(sockFd, fileFd, offset, length, done) -> handle
//     Sends `length` bytes of the file from `offset` to the socket.
//   done(code, moved, side) is called once, on a later turn of the loop:
//     code is null when every byte went; else 'EOF' (the file ended first:
//     it was cut short) or an errno name; side is 'socket' or 'file'.
//     `moved` counts the bytes sent.
//   cancelTransfer(handle): stops it; `done` is not called afterwards.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#include "file_transfer.h"

// The most one sendfile call is asked for; the socket takes less when full.
#define SEND_BYTES (4 * 1024 * 1024)
// The most a download raises its socket's send buffer to (see raise_send_buffer).
#define SEND_BUFFER_MAX (2 * 1024 * 1024)

typedef struct {
  int sock, file;            // duplicates owned by the transfer; -1 once closed
  loff_t offset;             // the file position of the next byte
  int64_t left;              // bytes still to send
  int64_t moved;
  uv_poll_t poll;             // watches the socket from start to end; level-triggered
  napi_env env;
  napi_ref done;
  napi_async_context async;
  int ended;                 // finished or cancelled: fds and refs released
  int poll_open;             // the poll handle is not yet closed
  int finalized;             // the JavaScript handle was collected
} transfer_t;

static void maybe_free(transfer_t* t) {
  if (t->ended && !t->poll_open && t->finalized) free(t);
}

static void on_poll_closed(uv_handle_t* h) {
  transfer_t* t = h->data;
  t->poll_open = 0;
  maybe_free(t);
}

static void close_fd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void release(transfer_t* t) {
  if (t->ended) return;
  t->ended = 1;
  // uv_poll_stop takes the descriptor out of epoll before it is closed.
  uv_poll_stop(&t->poll);
  close_fd(&t->sock);
  close_fd(&t->file);
  uv_close((uv_handle_t*)&t->poll, on_poll_closed);
}

static void finish(transfer_t* t, const char* code, const char* side) {
  if (t->ended) return;
  napi_env env = t->env;
  napi_ref done_ref = t->done;
  napi_async_context async = t->async;
  int64_t moved = t->moved;
  release(t);
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value cb, recv, args[3], result;
  napi_get_reference_value(env, done_ref, &cb);
  napi_get_global(env, &recv);
  if (code) napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &args[0]);
  else napi_get_null(env, &args[0]);
  napi_create_int64(env, moved, &args[1]);
  if (side) napi_create_string_utf8(env, side, NAPI_AUTO_LENGTH, &args[2]);
  else napi_get_null(env, &args[2]);
  napi_make_callback(env, async, recv, cb, 3, args, &result);
  napi_close_handle_scope(env, scope);
  napi_delete_reference(env, done_ref);
  napi_async_destroy(env, async);
}

// Errors of sendfile that come from the socket's side; any other is the file's.
static int socket_error(int err) {
  return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT || err == ENOBUFS;
}

static void advance_send(transfer_t* t) {
  while (!t->ended) {
    if (t->left == 0) {
      finish(t, NULL, NULL);
      return;
    }
    size_t want = t->left < SEND_BYTES ? (size_t)t->left : SEND_BYTES;
    ssize_t n = sendfile(t->sock, t->file, &t->offset, want);
    if (n > 0) {
      t->left -= n;
      t->moved += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // The socket is full: the poll calls again when it takes more.
    if (n < 0 && errno == EAGAIN) return;
    if (n == 0) {
      finish(t, "EOF", "file");
      return;
    }
    int err = errno;
    finish(t, uv_err_name(-err), socket_error(err) ? "socket" : "file");
    return;
  }
}

static void on_poll(uv_poll_t* h, int status, int events) {
  (void)events;
  transfer_t* t = h->data;
  if (t->ended) return;
  if (status < 0) {
    // An error condition on the socket: the next call names it. If it does
    // not, the poll's own error does.
    int64_t before = t->left;
    advance_send(t);
    if (!t->ended && t->left == before) finish(t, uv_err_name(status), "socket");
    return;
  }
  advance_send(t);
}

static void finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  transfer_t* t = data;
  t->finalized = 1;
  if (!t->ended) {
    // Collected while running: nobody can cancel it any more, so it stops.
    napi_delete_reference(t->env, t->done);
    napi_async_destroy(t->env, t->async);
    release(t);
  }
  maybe_free(t);
}

static napi_value throw_error(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

// A download's socket is a Unix socket to the host's proxy, whose send
// buffer is net.core.wmem_default (208 KiB on most hosts) and does not grow
// by itself as TCP's does. With that, a 1 MiB body went out in five or more
// sendfile calls, each waiting for the proxy to take the one before. Raised
// to hold the body (up to SEND_BUFFER_MAX; the kernel caps it at
// net.core.wmem_max), the file goes out in one or two, and the proxy takes it
// in as few. It is a limit, not memory set aside: the socket holds only what
// is queued. A failure leaves the default, which still works.
static void raise_send_buffer(int sock, int64_t length) {
  int want = length < SEND_BUFFER_MAX ? (int)length : SEND_BUFFER_MAX;
  int have = 0;
  socklen_t len = sizeof have;
  // getsockopt gives the doubled value the kernel keeps (socket(7)).
  if (getsockopt(sock, SOL_SOCKET, SO_SNDBUF, &have, &len) == 0 && have / 2 >= want) return;
  setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

napi_value send_from_file(napi_env env, napi_callback_info info) {
  const char* usage = "sendFromFile(sockFd, fileFd, offset, length, done) takes 5 arguments";
  size_t argc = 5;
  napi_value argv[5];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5) return throw_error(env, NULL, usage);
  int32_t sock_fd, file_fd;
  int64_t offset, length;
  napi_valuetype type;
  if (napi_get_value_int32(env, argv[0], &sock_fd) != napi_ok || napi_get_value_int32(env, argv[1], &file_fd) != napi_ok || sock_fd < 0 || file_fd < 0)
    return throw_error(env, NULL, "sockFd and fileFd must be open descriptors");
  if (napi_get_value_int64(env, argv[2], &offset) != napi_ok || offset < 0) return throw_error(env, NULL, "offset must be 0 or more");
  if (napi_get_value_int64(env, argv[3], &length) != napi_ok || length <= 0) return throw_error(env, NULL, "length must be a positive number of bytes");
  if (napi_typeof(env, argv[4], &type) != napi_ok || type != napi_function) return throw_error(env, NULL, "done must be a function");

  int sock = fcntl(sock_fd, F_DUPFD_CLOEXEC, 0);
  int file = sock < 0 ? -1 : fcntl(file_fd, F_DUPFD_CLOEXEC, 0);
  if (file < 0) {
    int err = errno;
    if (sock >= 0) close(sock);
    return throw_error(env, uv_err_name(-err), strerror(err));
  }
  raise_send_buffer(sock, length);

  transfer_t* t = calloc(1, sizeof *t);
  if (!t) {
    close(sock);
    close(file);
    return throw_error(env, "ENOMEM", "out of memory");
  }
  t->sock = sock;
  t->file = file;
  t->offset = offset;
  t->left = length;
  t->env = env;
  t->poll.data = t;
  uv_loop_t* loop;
  napi_get_uv_event_loop(env, &loop);
  int rc = uv_poll_init(loop, &t->poll, sock);
  // The first send waits for the poll, which reports a ready socket on the
  // next turn of the loop: `done` is never called before this returns.
  if (rc == 0) {
    t->poll_open = 1;
    rc = uv_poll_start(&t->poll, UV_WRITABLE, on_poll);
  }
  napi_value handle;
  if (rc != 0 || napi_create_external(env, t, finalize, NULL, &handle) != napi_ok) {
    const char* code = rc != 0 ? uv_err_name(rc) : "ENOMEM";
    close_fd(&t->sock);
    close_fd(&t->file);
    t->ended = 1;
    t->finalized = 1;
    if (t->poll_open) {
      uv_poll_stop(&t->poll);
      uv_close((uv_handle_t*)&t->poll, on_poll_closed);
    } else {
      free(t);
    }
    return throw_error(env, code, "the file transfer could not start");
  }
  napi_create_reference(env, argv[4], 1, &t->done);
  napi_value name;
  napi_create_string_utf8(env, "paddock:send-from-file", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &t->async);
  return handle;
}

napi_value cancel_transfer(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data)
    return throw_error(env, NULL, "cancelTransfer expects a transfer handle");
  transfer_t* t = data;
  if (!t->ended) {
    napi_delete_reference(env, t->done);
    napi_async_destroy(env, t->async);
    release(t);
  }
  return NULL;
}
