// Receiving an upload's body straight into its file: splice(2) from the
// socket into a pipe and from the pipe into the file, driven by the event
// loop. The bytes never enter JavaScript. Node's HTTP parser would otherwise
// copy every 64 KiB the socket gives into a fresh buffer, and those copies
// and the garbage they leave cost envd more than the rest of an upload.
//
// The receiver works on its own duplicates of the two descriptors, so that a
// socket Node closes while it runs can never have its number reused under
// it. JavaScript must stop Node from reading the socket meanwhile; files.ts
// does that.
//
//   receiveToFile(sockFd, fileFd, offset, length, done) -> handle
//     Takes exactly `length` bytes from the socket (never more: what follows
//     belongs to whoever reads the socket next) and writes them to the file
//     from `offset`. done(code, written, side) is called once: code is null
//     when every byte arrived and was written; else 'EOF' (the socket ended
//     first) or an errno name, side 'socket' or 'file'. After a failed write
//     the receiver goes on reading the body and drops it, so that the client
//     is still sending into an open socket when it is answered; `done` then
//     names the write's error.
//   cancelReceive(handle): stops it; `done` is not called afterwards.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#include "receive_file.h"

#define PIPE_BYTES (1024 * 1024)

typedef struct {
  int sock, file;            // duplicates owned by the receiver; -1 once closed
  int pipe_r, pipe_w;
  size_t pipe_cap;
  loff_t offset;             // where the next byte goes in the file
  int64_t left;              // bytes still to take from the socket
  size_t in_pipe;            // taken, not yet written (or dropped)
  int64_t written;
  int write_err;             // errno of the first failed write; 0 while writes succeed
  uv_poll_t poll;
  int polling;
  napi_env env;
  napi_ref done;
  napi_async_context async;
  int ended;                 // finished or cancelled: fds and refs released
  int poll_open;             // the poll handle is not yet closed
  int finalized;             // the JavaScript handle was collected
} receiver_t;

static void maybe_free(receiver_t* r) {
  if (r->ended && !r->poll_open && r->finalized) free(r);
}

static void on_poll_closed(uv_handle_t* h) {
  receiver_t* r = h->data;
  r->poll_open = 0;
  maybe_free(r);
}

static void close_fd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void release(receiver_t* r) {
  if (r->ended) return;
  r->ended = 1;
  // uv_poll_stop takes the descriptor out of epoll before it is closed.
  uv_poll_stop(&r->poll);
  close_fd(&r->sock);
  close_fd(&r->file);
  close_fd(&r->pipe_r);
  close_fd(&r->pipe_w);
  uv_close((uv_handle_t*)&r->poll, on_poll_closed);
}

static void finish(receiver_t* r, const char* code, const char* side) {
  if (r->ended) return;
  napi_env env = r->env;
  napi_ref done_ref = r->done;
  napi_async_context async = r->async;
  int64_t written = r->written;
  release(r);
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value cb, recv, args[3], result;
  napi_get_reference_value(env, done_ref, &cb);
  napi_get_global(env, &recv);
  if (code) napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &args[0]);
  else napi_get_null(env, &args[0]);
  napi_create_int64(env, written, &args[1]);
  if (side) napi_create_string_utf8(env, side, NAPI_AUTO_LENGTH, &args[2]);
  else napi_get_null(env, &args[2]);
  napi_make_callback(env, async, recv, cb, 3, args, &result);
  napi_close_handle_scope(env, scope);
  napi_delete_reference(env, done_ref);
  napi_async_destroy(env, async);
}

static void on_poll(uv_poll_t* h, int status, int events);

// Empties the pipe into the file, or drops what it holds once a write failed.
// The pipe is non-blocking but holds what is read from it, and a regular
// file takes what it is given, so neither call waits on the network.
static void drain_pipe(receiver_t* r) {
  static char scratch[64 * 1024];
  while (r->in_pipe > 0) {
    ssize_t n;
    if (r->write_err == 0) {
      n = splice(r->pipe_r, NULL, r->file, &r->offset, r->in_pipe, SPLICE_F_MOVE);
    } else {
      n = read(r->pipe_r, scratch, r->in_pipe < sizeof scratch ? r->in_pipe : sizeof scratch);
    }
    if (n > 0) {
      r->in_pipe -= (size_t)n;
      if (r->write_err == 0) r->written += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (r->write_err != 0) {
      // The pipe cannot be emptied: nothing more can be done with it.
      r->left = 0;
      r->in_pipe = 0;
      return;
    }
    // A file that takes nothing is full.
    r->write_err = n == 0 ? ENOSPC : errno;
  }
}

// Moves what can move now, then waits for the socket to bring more.
static void advance(receiver_t* r) {
  while (!r->ended) {
    drain_pipe(r);
    if (r->left == 0) {
      if (r->write_err != 0) finish(r, uv_err_name(-r->write_err), "file");
      else finish(r, NULL, NULL);
      return;
    }
    size_t want = r->left < (int64_t)r->pipe_cap ? (size_t)r->left : r->pipe_cap;
    ssize_t n = splice(r->sock, NULL, r->pipe_w, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      r->left -= n;
      r->in_pipe += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // The pipe is empty here, so EAGAIN can only mean the socket has nothing yet.
    if (n < 0 && errno == EAGAIN) {
      if (!r->polling) {
        int rc = uv_poll_start(&r->poll, UV_READABLE, on_poll);
        if (rc != 0) {
          finish(r, uv_err_name(rc), "socket");
          return;
        }
        r->polling = 1;
      }
      return;
    }
    finish(r, n == 0 ? "EOF" : uv_err_name(-errno), "socket");
    return;
  }
}

static void on_poll(uv_poll_t* h, int status, int events) {
  (void)events;
  receiver_t* r = h->data;
  if (r->ended) return;
  if (status < 0) {
    // An error condition on the socket: the next splice names it. If it
    // does not, the poll's own error does.
    int64_t before = r->left;
    advance(r);
    if (!r->ended && r->left == before) finish(r, uv_err_name(status), "socket");
    return;
  }
  advance(r);
}

static void finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  receiver_t* r = data;
  r->finalized = 1;
  if (!r->ended) {
    // Collected while running: nobody can cancel it any more, so it stops.
    napi_delete_reference(r->env, r->done);
    napi_async_destroy(r->env, r->async);
    release(r);
  }
  maybe_free(r);
}

static napi_value throw_error(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

napi_value receive_to_file(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5)
    return throw_error(env, NULL, "receiveToFile(sockFd, fileFd, offset, length, done) takes 5 arguments");
  int32_t sock_fd, file_fd;
  int64_t offset, length;
  napi_valuetype t;
  if (napi_get_value_int32(env, argv[0], &sock_fd) != napi_ok || napi_get_value_int32(env, argv[1], &file_fd) != napi_ok || sock_fd < 0 || file_fd < 0)
    return throw_error(env, NULL, "sockFd and fileFd must be open descriptors");
  if (napi_get_value_int64(env, argv[2], &offset) != napi_ok || offset < 0) return throw_error(env, NULL, "offset must be 0 or more");
  if (napi_get_value_int64(env, argv[3], &length) != napi_ok || length <= 0) return throw_error(env, NULL, "length must be a positive number of bytes");
  if (napi_typeof(env, argv[4], &t) != napi_ok || t != napi_function) return throw_error(env, NULL, "done must be a function");

  int fds[2] = {-1, -1};
  int sock = fcntl(sock_fd, F_DUPFD_CLOEXEC, 0);
  int file = sock < 0 ? -1 : fcntl(file_fd, F_DUPFD_CLOEXEC, 0);
  if (file < 0 || pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    int err = errno;
    if (sock >= 0) close(sock);
    if (file >= 0) close(file);
    return throw_error(env, uv_err_name(-err), strerror(err));
  }
  // A bigger pipe takes more per wake-up; the default (64 KiB) still works.
  fcntl(fds[1], F_SETPIPE_SZ, PIPE_BYTES);
  int cap = fcntl(fds[1], F_GETPIPE_SZ);

  receiver_t* r = calloc(1, sizeof *r);
  if (!r) {
    close(sock);
    close(file);
    close(fds[0]);
    close(fds[1]);
    return throw_error(env, "ENOMEM", "out of memory");
  }
  r->sock = sock;
  r->file = file;
  r->pipe_r = fds[0];
  r->pipe_w = fds[1];
  r->pipe_cap = cap > 0 ? (size_t)cap : 65536;
  r->offset = offset;
  r->left = length;
  r->env = env;
  r->poll.data = r;
  uv_loop_t* loop;
  napi_get_uv_event_loop(env, &loop);
  int rc = uv_poll_init(loop, &r->poll, sock);
  // Bytes may be waiting already; the poll reports them on the next turn of
  // the loop, so `done` is never called before receiveToFile has returned.
  if (rc == 0) {
    rc = uv_poll_start(&r->poll, UV_READABLE, on_poll);
    r->polling = rc == 0;
    r->poll_open = 1;
  }
  napi_value handle;
  if (rc != 0 || napi_create_external(env, r, finalize, NULL, &handle) != napi_ok) {
    const char* code = rc != 0 ? uv_err_name(rc) : "ENOMEM";
    close_fd(&r->sock);
    close_fd(&r->file);
    close_fd(&r->pipe_r);
    close_fd(&r->pipe_w);
    r->ended = 1;
    r->finalized = 1;
    if (r->poll_open) {
      uv_poll_stop(&r->poll);
      uv_close((uv_handle_t*)&r->poll, on_poll_closed);
    } else {
      free(r);
    }
    return throw_error(env, code, "the upload could not be received");
  }
  napi_create_reference(env, argv[4], 1, &r->done);
  napi_value name;
  napi_create_string_utf8(env, "paddock:receive-to-file", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &r->async);
  return handle;
}

napi_value cancel_receive(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data)
    return throw_error(env, NULL, "cancelReceive expects a receiver handle");
  receiver_t* r = data;
  if (!r->ended) {
    napi_delete_reference(env, r->done);
    napi_async_destroy(env, r->async);
    release(r);
  }
  return NULL;
}
