// Linux system calls envd needs and Node.js does not offer:
//
// - inotify, with the real event kinds (Node's fs.watch folds them into
//   "rename" and "change", which cannot tell a create from a move or a
//   write from a chmod);
// - extended attributes, where uploaded file metadata is kept;
// - waitpid on a given pid, so that envd, as a container's init, can reap
//   orphaned processes without touching the children libuv waits for;
// - starting a process with vfork semantics (see spawn below);
// - marking an inherited descriptor close-on-exec.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

// Declares argv[n] and fills it with the call's arguments (undefined for
// those left out); argc is how many the caller passed.
#define ARGS(n)         \
  size_t argc = (n);      \
  napi_value argv[(n)];   \
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL))

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

// Reads the first n arguments as C strings into out (caller frees each).
// On failure frees those it read and returns 0, with an exception pending.
static int get_string_args(napi_env env, napi_value* argv, size_t n, char** out) {
  for (size_t i = 0; i < n; i++) {
    if (!(out[i] = get_string(env, argv[i]))) {
      while (i > 0) free(out[--i]);
      return 0;
    }
  }
  return 1;
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

// Reads every event queued on the descriptor now (it is non-blocking) into
// an array of {wd, mask, cookie, name}; *count says how many.
static napi_value read_events(napi_env env, watcher_t* w, uint32_t* count_out) {
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
  *count_out = count;
  return list;
}

// Drains the inotify descriptor when libuv finds it readable and hands the
// events to the JavaScript callback.
static void on_readable(uv_poll_t* handle, int status, int events) {
  (void)events;
  watcher_t* w = handle->data;
  if (w->closed || status < 0) return;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  uint32_t count = 0;
  napi_value list = read_events(env, w, &count);
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
  ARGS(1);
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

// inotifyDrain(handle) -> the events queued now, read at once rather than
// when libuv next polls: what a caller asking for events must not miss.
static napi_value inotify_drain(napi_env env, napi_callback_info info) {
  ARGS(1);
  if (argc < 1) {
    napi_throw_type_error(env, NULL, "inotifyDrain expects a handle");
    return NULL;
  }
  watcher_t* w = get_watcher(env, argv[0]);
  if (!w) return NULL;
  uint32_t count = 0;
  return read_events(env, w, &count);
}

// inotifyAddWatch(handle, path, mask) -> wd
static napi_value inotify_add(napi_env env, napi_callback_info info) {
  ARGS(3);
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
  ARGS(2);
  watcher_t* w = get_watcher(env, argv[0]);
  if (!w) return NULL;
  int32_t wd;
  CHECK(napi_get_value_int32(env, argv[1], &wd));
  inotify_rm_watch(w->fd, wd);
  return NULL;
}

static napi_value inotify_close(napi_env env, napi_callback_info info) {
  ARGS(1);
  void* data = NULL;
  if (napi_get_value_external(env, argv[0], &data) == napi_ok && data) watcher_close(data);
  return NULL;
}

// ---------------------------------------------------------------- xattr

// getXattrs(path, prefix) -> {name-without-prefix: value}. Entries that
// cannot carry attributes (symlinks, some filesystems) give {}.
static napi_value get_xattrs(napi_env env, napi_callback_info info) {
  ARGS(2);
  char* args[2];
  if (!get_string_args(env, argv, 2, args)) return NULL;
  char *path = args[0], *prefix = args[1];
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

// Calls op with the call's first n arguments (n <= 3) as C strings; when it
// fails, throws its errno, naming `what` and the path (the first argument).
static napi_value on_string_args(napi_env env, napi_callback_info info, size_t n, int (*op)(char** args), const char* what) {
  ARGS(3);
  char* args[3];
  if (!get_string_args(env, argv, n, args)) return NULL;
  napi_value r = NULL;
  if (op(args) < 0) r = throw_errno(env, errno, what, args[0]);
  for (size_t i = 0; i < n; i++) free(args[i]);
  return r;
}

static int set_xattr_op(char** a) { return lsetxattr(a[0], a[1], a[2], strlen(a[2]), 0); }

// A missing attribute is fine.
static int remove_xattr_op(char** a) { return lremovexattr(a[0], a[1]) < 0 && errno != ENODATA ? -1 : 0; }

// setXattr(path, name, value)
static napi_value set_xattr(napi_env env, napi_callback_info info) {
  return on_string_args(env, info, 3, set_xattr_op, "lsetxattr");
}

// removeXattr(path, name)
static napi_value remove_xattr(napi_env env, napi_callback_info info) {
  return on_string_args(env, info, 2, remove_xattr_op, "lremovexattr");
}

// ---------------------------------------------------------------- spawn

// Node's child_process.spawn forks: the kernel copies envd's page tables
// and the child, at exec, tears the copy down again, ~1 ms for envd while
// its event loop waits. Here the child shares envd's memory until it execs
// (CLONE_VM | CLONE_VFORK, as posix_spawn does), which costs a fraction of
// that. posix_spawn itself cannot switch the user, hence this.
//
// The child runs on its own stack in envd's memory, so it touches nothing
// but the prepared `spawn_args_t` and makes system calls only: credentials
// through syscall(2), because glibc's setuid and setgid would signal every
// thread of envd to change theirs too.

typedef struct {
  char** candidates;  // paths to try in order, as execvp searches PATH
  char** argv;
  // argv for a file without a `#!` line, which execvp runs with /bin/sh:
  // {"/bin/sh", <the file>, argv[1], ...}; the child fills in the file.
  char** script_argv;
  char** envp;
  const char* cwd;
  uid_t uid;
  gid_t gid;
  int stdio[3];       // become the child's fds 0, 1, 2
  // Written to the child's /proc/self/oom_score_adj when not empty. A vfork
  // child's write sets its own score only, not envd's, whose memory it shares.
  char oom_score_adj[16];
  int err;            // set by the child when it cannot exec
} spawn_args_t;

// Errors for which execvp goes on to the next directory of PATH.
static int try_next(int err) {
  return err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT;
}

static int spawn_child(void* p) {
  spawn_args_t* a = p;
  // Signal handlers of envd would run in its memory: back to the defaults,
  // and with nothing blocked, as a fresh process has them (as libuv does).
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < _NSIG; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    sigaction(sig, &dfl, NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  // Its own session and process group, so that a signal to the group reaches everything it starts.
  if (setsid() < 0) goto fail;
  for (int fd = 0; fd < 3; fd++) {
    if (dup2(a->stdio[fd], fd) < 0) goto fail;
  }
  if (chdir(a->cwd) < 0) goto fail;
  if (a->oom_score_adj[0]) {
    // Best effort, as the score is a preference: without /proc the command still runs.
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t ignored = write(fd, a->oom_score_adj, strlen(a->oom_score_adj));
      (void)ignored;
      close(fd);
    }
  }
  // As libuv does: without the right to drop them (an envd not run as
  // root), the groups stay and the uid and gid still switch.
  syscall(SYS_setgroups, 0, NULL);
  if (syscall(SYS_setgid, a->gid) < 0) goto fail;
  if (syscall(SYS_setuid, a->uid) < 0) goto fail;
  sigprocmask(SIG_SETMASK, &none, NULL);
  // What glibc's execvp does: a file the kernel cannot run goes to the
  // shell; a candidate that is missing (or whose directory is) is passed
  // over; one that may not be run only if another one can.
  int denied = 0;
  for (char** c = a->candidates; *c; c++) {
    execve(*c, a->argv, a->envp);
    if (errno == ENOEXEC) {
      a->script_argv[1] = *c;
      execve(a->script_argv[0], a->script_argv, a->envp);
    }
    if (errno == EACCES) denied = 1;
    else if (!try_next(errno)) break;
  }
  if (denied && try_next(errno)) errno = EACCES;
fail:
  a->err = errno;
  _exit(127);
}

static void free_strings(char** list) {
  if (!list) return;
  for (char** s = list; *s; s++) free(*s);
  free(list);
}

// A JavaScript array of strings as a NULL-terminated C array (caller frees).
static char** get_strings(napi_env env, napi_value array) {
  uint32_t n;
  if (napi_get_array_length(env, array, &n) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected an array of strings");
    return NULL;
  }
  char** out = calloc(n + 1, sizeof *out);
  if (!out) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    napi_get_element(env, array, i, &item);
    if (!(out[i] = get_string(env, item))) {
      free_strings(out);
      return NULL;
    }
  }
  return out;
}

static void close_all(int* fds, int n) {
  for (int i = 0; i < n; i++) {
    if (fds[i] >= 0) close(fds[i]);
  }
}

// spawn(candidates, argv, envp, cwd, uid, gid, withStdin, oomScoreAdj)
//   -> [pid, stdinFd (or -1), stdoutFd, stderrFd]
// oomScoreAdj (-1000..1000) is set in the child before it execs; null leaves
// the score it inherits.
// stdio are unix socket pairs, as libuv makes them for 'pipe'; without
// stdin the child reads /dev/null. Throws an errno error (ENOENT, EACCES,
// ...) when the program cannot be started; no process is left then.
static napi_value spawn(napi_env env, napi_callback_info info) {
  ARGS(8);
  spawn_args_t a;
  memset(&a, 0, sizeof a);
  char* cwd = NULL;
  uint32_t uid, gid;
  bool with_stdin;
  // Parent and child ends: [stdin parent, stdin child, stdout parent, stdout child, stderr parent, stderr child].
  int fds[6] = {-1, -1, -1, -1, -1, -1};
  void* stack = MAP_FAILED;
  const size_t stack_size = 64 * 1024;
  napi_value result = NULL;

  if (!(a.candidates = get_strings(env, argv[0])) || !(a.argv = get_strings(env, argv[1])) ||
      !(a.envp = get_strings(env, argv[2])) || !(cwd = get_string(env, argv[3]))) {
    goto done;
  }
  size_t n_args = 0;
  while (a.argv[n_args]) n_args++;
  // Borrowed pointers: freed with a.argv, not on their own.
  if (!(a.script_argv = calloc(n_args + 2, sizeof *a.script_argv))) {
    napi_throw_error(env, NULL, "out of memory");
    goto done;
  }
  a.script_argv[0] = "/bin/sh";
  for (size_t i = 1; i < n_args; i++) a.script_argv[i + 1] = a.argv[i];
  if (napi_get_value_uint32(env, argv[4], &uid) != napi_ok || napi_get_value_uint32(env, argv[5], &gid) != napi_ok ||
      napi_get_value_bool(env, argv[6], &with_stdin) != napi_ok) {
    napi_throw_type_error(env, NULL, "spawn: bad uid, gid or stdin");
    goto done;
  }
  napi_valuetype oom_type = napi_undefined;
  if (argc > 7) napi_typeof(env, argv[7], &oom_type);
  if (oom_type == napi_number) {
    int32_t oom;
    napi_get_value_int32(env, argv[7], &oom);
    if (oom < -1000 || oom > 1000) {
      napi_throw_range_error(env, NULL, "spawn: oomScoreAdj must be within -1000..1000");
      goto done;
    }
    snprintf(a.oom_score_adj, sizeof a.oom_score_adj, "%d", oom);
  } else if (oom_type != napi_null && oom_type != napi_undefined) {
    napi_throw_type_error(env, NULL, "spawn: oomScoreAdj must be a number or null");
    goto done;
  }
  a.cwd = cwd;
  a.uid = uid;
  a.gid = gid;
  for (int i = 0; i < 3; i++) {
    if (i == 0 && !with_stdin) {
      fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fds[1] < 0) {
        throw_errno(env, errno, "open", "/dev/null");
        goto done;
      }
      continue;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
      throw_errno(env, errno, "socketpair", NULL);
      goto done;
    }
    fds[2 * i] = pair[0];
    fds[2 * i + 1] = pair[1];
  }
  for (int i = 0; i < 3; i++) a.stdio[i] = fds[2 * i + 1];

  stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    throw_errno(env, errno, "mmap", NULL);
    goto done;
  }
  // No signal handler of envd may run on the child's stack before it has reset them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(spawn_child, (char*)stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    throw_errno(env, clone_err, "clone", a.argv[0]);
    goto done;
  }
  if (a.err) {
    // It exited without exec: collect it now, nobody else waits for it.
    waitpid(pid, NULL, 0);
    throw_errno(env, a.err, "spawn", a.argv[0]);
    goto done;
  }
  napi_value out, v;
  napi_create_array_with_length(env, 4, &out);
  napi_create_int32(env, pid, &v);
  napi_set_element(env, out, 0, v);
  for (int i = 0; i < 3; i++) {
    napi_create_int32(env, i == 0 && !with_stdin ? -1 : fds[2 * i], &v);
    napi_set_element(env, out, i + 1, v);
    if (!(i == 0 && !with_stdin)) fds[2 * i] = -1;  // handed over
  }
  result = out;

done:
  if (stack != MAP_FAILED) munmap(stack, stack_size);
  close_all(fds, 6);
  free_strings(a.candidates);
  free(a.script_argv);
  free_strings(a.argv);
  free_strings(a.envp);
  free(cwd);
  return result;
}

// waitStatus(pid) -> null while it runs, else [exitCode or -1, signal number or 0];
// collects it. Throws ECHILD when there is no such child.
static napi_value wait_status(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t pid;
  CHECK(napi_get_value_int32(env, argv[0], &pid));
  int status;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r < 0) return throw_errno(env, errno, "waitpid", NULL);
  napi_value result;
  if (r == 0) {
    napi_get_null(env, &result);
    return result;
  }
  napi_value code, sig;
  napi_create_int32(env, WIFEXITED(status) ? WEXITSTATUS(status) : -1, &code);
  napi_create_int32(env, WIFSIGNALED(status) ? WTERMSIG(status) : 0, &sig);
  napi_create_array_with_length(env, 2, &result);
  napi_set_element(env, result, 0, code);
  napi_set_element(env, result, 1, sig);
  return result;
}

// closeOnExec(fd): marks an inherited descriptor close-on-exec, so that the
// processes envd starts do not get it (the listening sockets the runtime
// passes in are envd's alone).
static napi_value close_on_exec(napi_env env, napi_callback_info info) {
  ARGS(1);
  int32_t fd;
  CHECK(napi_get_value_int32(env, argv[0], &fd));
  int flags = fcntl(fd, F_GETFD);
  if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) return throw_errno(env, errno, "fcntl FD_CLOEXEC on descriptor", NULL);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"inotifyOpen", NULL, inotify_open, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyAddWatch", NULL, inotify_add, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyDrain", NULL, inotify_drain, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyRemoveWatch", NULL, inotify_rm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"inotifyClose", NULL, inotify_close, NULL, NULL, NULL, napi_enumerable, NULL},
      {"getXattrs", NULL, get_xattrs, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setXattr", NULL, set_xattr, NULL, NULL, NULL, napi_enumerable, NULL},
      {"removeXattr", NULL, remove_xattr, NULL, NULL, NULL, napi_enumerable, NULL},
      {"spawn", NULL, spawn, NULL, NULL, NULL, napi_enumerable, NULL},
      {"waitStatus", NULL, wait_status, NULL, NULL, NULL, napi_enumerable, NULL},
      {"closeOnExec", NULL, close_on_exec, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
