// The relay's body pump: moves a known number of bytes from one socket to
// another inside the kernel, with splice(2) through a pipe, driven by the
// event loop. A request or response body of known length then crosses the
// proxy without passing through JavaScript a chunk at a time, which is where
// the relay spent most of its time on large transfers.
//
// The pump works on its own duplicates of the two descriptors, so that a
// socket Node closes while a pump runs can never have its number reused under
// the pump. JavaScript must stop Node from reading the source and writing the
// destination while the pump runs; pump.ts does that.
//
//   start(fromFd, toFd, length, idleMs, done, chunked) -> handle
//     done(code, moved, side): code is null once `length` bytes moved, else
//     'EOF' (the source ended first), 'ETIMEDOUT' (no progress for idleMs;
//     0 = no limit) or an errno name; side is 'from' or 'to' for an error.
//   cancel(handle) -> bytes moved so far; `done` is not called afterwards.
//
// With `chunked` true the pump goes on through a chunked body (RFC 9112
// §7.1), started inside a chunk's data with `length` bytes of it left. At
// the end of each chunk's data it peeks at what follows: the CRLF, the next
// size line and, while they fit, whole small chunks, and moves them together
// with the data of the last one. It reads only the plainest framing: CRLF,
// hex digits, CRLF. Anything else (the last chunk, an extension, a line not
// all here yet, bad bytes, the end of the stream) stops it with code null
// right after a chunk's data, where JavaScript's stricter reader takes over;
// so it never lets through what that reader would refuse. A stream (process
// output, a watch) then crosses the relay in the kernel as a file does.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#define PIPE_BYTES (1024 * 1024)
// The most a pump raises a Unix destination's send buffer to (see raise_send_buffer).
#define SEND_BUFFER_MAX (2 * 1024 * 1024)
// What is peeked at a chunk boundary: enough for several small chunks.
#define PEEK_BYTES 512
// As many hex digits as the JavaScript reader takes (a size below 2^53).
#define MAX_SIZE_DIGITS 13

typedef struct {
  int from, to;              // duplicates owned by the pump; -1 once closed
  int pipe_r, pipe_w;
  size_t pipe_cap;
  int64_t left;              // bytes still to take from `from`
  size_t in_pipe;            // taken, not yet given to `to`
  int64_t moved;             // given to `to`
  int chunked;               // going on through a chunked body, see above
  uint64_t idle_ms;
  uv_poll_t from_poll, to_poll;
  uv_timer_t timer;
  int waiting;               // 0 none, 1 `from` readable, 2 `to` writable
  napi_env env;
  napi_ref done;
  napi_async_context async;
  int ended;                 // finished, failed or cancelled: fds and refs released
  int open_handles;          // libuv handles not yet closed
  int finalized;             // the JavaScript handle was collected
} pump_t;

static void maybe_free(pump_t* p) {
  if (p->ended && p->open_handles == 0 && p->finalized) free(p);
}

static void on_handle_closed(uv_handle_t* h) {
  pump_t* p = h->data;
  p->open_handles--;
  maybe_free(p);
}

static void close_fd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Stops everything and lets go of the descriptors, the callback and the
// libuv handles. The struct lives on until libuv and the GC are both done.
static void release(pump_t* p) {
  if (p->ended) return;
  p->ended = 1;
  // uv_poll_stop takes the descriptor out of epoll before it is closed.
  uv_poll_stop(&p->from_poll);
  uv_poll_stop(&p->to_poll);
  uv_timer_stop(&p->timer);
  close_fd(&p->from);
  close_fd(&p->to);
  close_fd(&p->pipe_r);
  close_fd(&p->pipe_w);
  uv_close((uv_handle_t*)&p->from_poll, on_handle_closed);
  uv_close((uv_handle_t*)&p->to_poll, on_handle_closed);
  uv_close((uv_handle_t*)&p->timer, on_handle_closed);
}

// Ends the pump and tells JavaScript how it went.
static void finish(pump_t* p, const char* code, const char* side) {
  if (p->ended) return;
  napi_env env = p->env;
  napi_ref done_ref = p->done;
  napi_async_context async = p->async;
  int64_t moved = p->moved;
  release(p);
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

static void on_poll(uv_poll_t* h, int status, int events);
static void on_timeout(uv_timer_t* t);

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// At the end of a chunk's data: peeks at what follows and gives how many
// bytes to move next: the CRLF and size line of each chunk that follows in
// the plainest form, with its data, up to and with the data of the first
// one that does not fit in the peek. 0 leaves the framing to JavaScript;
// -EAGAIN when nothing has arrived yet, another -errno when reading fails.
static int64_t next_chunks(pump_t* p) {
  unsigned char b[PEEK_BYTES];
  ssize_t n;
  do n = recv(p->from, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  size_t have = (size_t)n, at = 0;
  int64_t range = 0;
  for (;;) {
    size_t i = at;
    if (i + 2 > have || b[i] != '\r' || b[i + 1] != '\n') break;
    i += 2;
    int64_t size = 0;
    int digits = 0, h;
    while (i < have && digits < MAX_SIZE_DIGITS && (h = hex_value(b[i])) >= 0) {
      size = size * 16 + h;
      i++;
      digits++;
    }
    // The last chunk (0), an extension, a line cut off by the peek: JavaScript's.
    if (size == 0 || i + 2 > have || b[i] != '\r' || b[i + 1] != '\n') break;
    i += 2;
    range = (int64_t)i + size;
    if (range > (int64_t)have) break;
    at = (size_t)range;
  }
  return range;
}

// Waits for `from` to be readable (1) or `to` to be writable (2).
static void wait_for(pump_t* p, int what) {
  if (p->waiting != what) {
    if (p->waiting == 1) uv_poll_stop(&p->from_poll);
    if (p->waiting == 2) uv_poll_stop(&p->to_poll);
    int rc = what == 1 ? uv_poll_start(&p->from_poll, UV_READABLE, on_poll) : uv_poll_start(&p->to_poll, UV_WRITABLE, on_poll);
    if (rc != 0) {
      finish(p, uv_err_name(rc), what == 1 ? "from" : "to");
      return;
    }
    p->waiting = what;
  }
}

// Moves what can move now, then waits for whichever side holds it up.
static void advance(pump_t* p) {
  int progressed = 0;
  while (!p->ended) {
    if (p->in_pipe > 0) {
      ssize_t n = splice(p->pipe_r, NULL, p->to, NULL, p->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        p->in_pipe -= (size_t)n;
        p->moved += n;
        progressed = 1;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        wait_for(p, 2);
        break;
      }
      finish(p, n == 0 ? "EPIPE" : uv_err_name(-errno), "to");
      return;
    }
    if (p->left == 0) {
      if (!p->chunked) {
        finish(p, NULL, NULL);
        return;
      }
      int64_t next = next_chunks(p);
      if (next > 0) {
        p->left = next;
        continue;
      }
      if (next == -EAGAIN) {
        wait_for(p, 1);
        break;
      }
      if (next < 0) {
        finish(p, uv_err_name((int)next), "from");
        return;
      }
      // Framing left to JavaScript, right after a chunk's data.
      finish(p, NULL, NULL);
      return;
    }
    size_t want = p->left < (int64_t)p->pipe_cap ? (size_t)p->left : p->pipe_cap;
    ssize_t n = splice(p->from, NULL, p->pipe_w, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      p->left -= n;
      p->in_pipe += (size_t)n;
      progressed = 1;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // The pipe is empty here, so EAGAIN can only mean the source has nothing yet.
    if (n < 0 && errno == EAGAIN) {
      wait_for(p, 1);
      break;
    }
    finish(p, n == 0 ? "EOF" : uv_err_name(-errno), "from");
    return;
  }
  if (!p->ended && progressed && p->idle_ms > 0) uv_timer_again(&p->timer);
}

static void on_poll(uv_poll_t* h, int status, int events) {
  (void)events;
  pump_t* p = h->data;
  if (p->ended) return;
  if (status < 0) {
    // An error condition on the socket: the next splice names it. If it
    // does not, the poll's own error does.
    int64_t before_moved = p->moved, before_left = p->left;
    advance(p);
    if (!p->ended && p->moved == before_moved && p->left == before_left) finish(p, uv_err_name(status), h == &p->from_poll ? "from" : "to");
    return;
  }
  advance(p);
}

static void on_timeout(uv_timer_t* t) {
  pump_t* p = t->data;
  finish(p, "ETIMEDOUT", p->waiting == 2 ? "to" : "from");
}

static void finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  pump_t* p = data;
  p->finalized = 1;
  if (!p->ended) {
    // Collected while running: nobody can cancel it any more, so it stops.
    napi_delete_reference(p->env, p->done);
    napi_async_destroy(p->env, p->async);
    release(p);
  }
  maybe_free(p);
}

static napi_value throw_error(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

// A body going into a sandbox crosses a Unix socket to its envd, whose send
// buffer is net.core.wmem_default (208 KiB on most hosts) and, unlike TCP's,
// does not grow by itself: a 1 MiB upload waited on envd five times or more.
// Raised to hold the body (up to SEND_BUFFER_MAX; the kernel caps it at
// net.core.wmem_max), it goes in one or two splices. It is a limit, not memory
// set aside. A TCP destination is left alone: setting its buffer would turn
// off the kernel's own sizing of it. A failure leaves the default.
static void raise_send_buffer(int sock, int64_t length) {
  struct sockaddr_storage addr;
  socklen_t addr_len = sizeof addr;
  if (getsockname(sock, (struct sockaddr*)&addr, &addr_len) != 0 || addr.ss_family != AF_UNIX) return;
  int want = length < SEND_BUFFER_MAX ? (int)length : SEND_BUFFER_MAX;
  int have = 0;
  socklen_t len = sizeof have;
  // getsockopt gives the doubled value the kernel keeps (socket(7)).
  if (getsockopt(sock, SOL_SOCKET, SO_SNDBUF, &have, &len) == 0 && have / 2 >= want) return;
  setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

static napi_value start(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6) return throw_error(env, NULL, "start(fromFd, toFd, length, idleMs, done, chunked) takes 6 arguments");
  int32_t from_fd, to_fd;
  int64_t length, idle;
  napi_valuetype t;
  if (napi_get_value_int32(env, argv[0], &from_fd) != napi_ok || napi_get_value_int32(env, argv[1], &to_fd) != napi_ok || from_fd < 0 || to_fd < 0)
    return throw_error(env, NULL, "fromFd and toFd must be open descriptors");
  if (napi_get_value_int64(env, argv[2], &length) != napi_ok || length <= 0) return throw_error(env, NULL, "length must be a positive number of bytes");
  if (napi_get_value_int64(env, argv[3], &idle) != napi_ok || idle < 0) return throw_error(env, NULL, "idleMs must be 0 or more");
  if (napi_typeof(env, argv[4], &t) != napi_ok || t != napi_function) return throw_error(env, NULL, "done must be a function");
  bool chunked;
  if (napi_get_value_bool(env, argv[5], &chunked) != napi_ok) return throw_error(env, NULL, "chunked must be a boolean");

  int fds[2] = {-1, -1};
  int from = fcntl(from_fd, F_DUPFD_CLOEXEC, 0);
  int to = from < 0 ? -1 : fcntl(to_fd, F_DUPFD_CLOEXEC, 0);
  if (to < 0 || pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    int err = errno;
    if (from >= 0) close(from);
    if (to >= 0) close(to);
    return throw_error(env, uv_err_name(-err), strerror(err));
  }
  // A bigger pipe takes more per wake-up; the default (64 KiB) still works.
  fcntl(fds[1], F_SETPIPE_SZ, PIPE_BYTES);
  int cap = fcntl(fds[1], F_GETPIPE_SZ);
  raise_send_buffer(to, length);

  pump_t* p = calloc(1, sizeof *p);
  p->from = from;
  p->to = to;
  p->pipe_r = fds[0];
  p->pipe_w = fds[1];
  p->pipe_cap = cap > 0 ? (size_t)cap : 65536;
  p->left = length;
  p->chunked = chunked;
  p->idle_ms = (uint64_t)idle;
  p->env = env;
  uv_loop_t* loop;
  napi_get_uv_event_loop(env, &loop);
  napi_create_reference(env, argv[4], 1, &p->done);
  napi_value name;
  napi_create_string_utf8(env, "paddock:relay-pump", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &p->async);
  p->from_poll.data = p->to_poll.data = p->timer.data = p;
  uv_timer_init(loop, &p->timer);
  int polls = 0;
  int rc = uv_poll_init(loop, &p->from_poll, from);
  if (rc == 0) {
    polls = 1;
    rc = uv_poll_init(loop, &p->to_poll, to);
  }
  if (rc == 0) {
    polls = 2;
    // Bytes may be waiting already; the poll reports them on the next turn of
    // the loop, so `done` is never called before start() has returned.
    rc = uv_poll_start(&p->from_poll, UV_READABLE, on_poll);
    p->waiting = 1;
  }
  napi_value handle;
  if (rc != 0 || napi_create_external(env, p, finalize, NULL, &handle) != napi_ok) {
    const char* code = rc != 0 ? uv_err_name(rc) : "ENOMEM";
    napi_delete_reference(env, p->done);
    napi_async_destroy(env, p->async);
    if (polls > 0) uv_poll_stop(&p->from_poll);
    close_fd(&p->from);
    close_fd(&p->to);
    close_fd(&p->pipe_r);
    close_fd(&p->pipe_w);
    p->ended = 1;
    p->finalized = 1;
    p->open_handles = 1 + polls;
    uv_close((uv_handle_t*)&p->timer, on_handle_closed);
    if (polls > 0) uv_close((uv_handle_t*)&p->from_poll, on_handle_closed);
    if (polls > 1) uv_close((uv_handle_t*)&p->to_poll, on_handle_closed);
    return throw_error(env, code, "the relay pump could not start");
  }
  p->open_handles = 3;
  // The repeat value is what uv_timer_again restarts the timer with.
  if (p->idle_ms > 0) uv_timer_start(&p->timer, on_timeout, p->idle_ms, p->idle_ms);
  return handle;
}

static napi_value cancel(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data)
    return throw_error(env, NULL, "cancel expects a pump handle");
  pump_t* p = data;
  if (!p->ended) {
    napi_delete_reference(env, p->done);
    napi_async_destroy(env, p->async);
    release(p);
  }
  napi_value moved;
  napi_create_int64(env, p->moved, &moved);
  return moved;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"start", NULL, start, NULL, NULL, NULL, napi_default, NULL},
      {"cancel", NULL, cancel, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
