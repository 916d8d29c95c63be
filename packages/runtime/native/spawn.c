// Starting the OCI runtime (runc, crun) without forking the server.
//
// Node's child_process.spawn forks: the kernel copies the whole process's
// page tables, and the child tears the copy down again at exec, while the
// event loop waits. Measured here: 5 ms for a bare node, 25 ms for one of
// 400 MB, on the path of every cold create. Here the child shares the
// memory until it execs (clone with CLONE_VM | CLONE_VFORK, as posix_spawn
// does), a fraction of a millisecond whatever the size. Not posix_spawn
// itself: glibc's sets glibc's own two signals (32, 33) to SIG_IGN in the
// child, and an ignored signal stays ignored across exec, into runc, the
// container and every process in it.
//
// The child's exit is watched through a pidfd polled by the event loop
// (libuv reaps only the children it started itself): when it becomes
// readable the child is collected with waitid(P_PIDFD), so none is left a
// zombie, and the callback gets its exit code or signal.
//
// spawn(file, argv, fds, onExit) -> pid
//   file:   absolute path of the program (no PATH search)
//   argv:   its arguments, argv[0] included
//   fds:    fds[i] becomes the child's descriptor i (0, 1, 2, then the
//           passed ones); every other descriptor is closed in the child
//   onExit: (code, signal) once it ended: code is its exit status or -1
//           when a signal ended it, signal the signal's number or 0
// Throws an errno error (ENOENT, EACCES, ...) when it cannot be started;
// no process is left then.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#include "throw_errno.h"

extern char** environ;

typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  int pidfd;
  pid_t pid;
} child_watch_t;

static void free_strings(char** list) {
  if (!list) return;
  for (char** s = list; *s; s++) free(*s);
  free(list);
}

static char* get_string(napi_env env, napi_value value) {
  size_t len;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) return NULL;
  char* s = malloc(len + 1);
  if (s && napi_get_value_string_utf8(env, value, s, len + 1, &len) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

static void on_closed(uv_handle_t* handle) {
  child_watch_t* w = handle->data;
  free(w);
}

static void on_exit_readable(uv_poll_t* handle, int status, int events) {
  (void)status;
  (void)events;
  child_watch_t* w = handle->data;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  // Readable means it ended: collect it (P_PIDFD needs Linux 5.4; waitpid by pid otherwise).
  int rc;
  do {
    rc = waitid((idtype_t)3 /* P_PIDFD */, (id_t)w->pidfd, &si, WEXITED);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0 && errno == EINVAL) {
    int st = 0;
    pid_t r;
    do {
      r = waitpid(w->pid, &st, 0);
    } while (r < 0 && errno == EINTR);
    si.si_code = WIFSIGNALED(st) ? CLD_KILLED : CLD_EXITED;
    si.si_status = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
  }
  uv_poll_stop(&w->poll);
  close(w->pidfd);
  int exited = si.si_code == CLD_EXITED;
  napi_env env = w->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value cb, global, args[2], result;
  napi_get_reference_value(env, w->callback, &cb);
  napi_get_global(env, &global);
  napi_create_int32(env, exited ? si.si_status : -1, &args[0]);
  napi_create_int32(env, exited ? 0 : si.si_status, &args[1]);
  napi_delete_reference(env, w->callback);
  uv_close((uv_handle_t*)&w->poll, on_closed);
  napi_async_context ctx;
  napi_value resource_name;
  napi_create_string_utf8(env, "paddock:spawn", NAPI_AUTO_LENGTH, &resource_name);
  if (napi_async_init(env, NULL, resource_name, &ctx) == napi_ok) {
    napi_make_callback(env, ctx, global, cb, 2, args, &result);
    napi_async_destroy(env, ctx);
  }
  napi_close_handle_scope(env, scope);
}

typedef struct {
  const char* file;
  char** argv;
  const int* temps;  // temps[i] becomes the child's descriptor i
  int n_fds;
  int err;  // set by the child when it cannot exec
} spawn_args_t;

// Runs on its own stack in the parent's memory until it execs: system calls only.
static int spawn_child(void* p) {
  spawn_args_t* a = p;
  // The parent's handlers would run in its memory: every signal back to its
  // default (raw rt_sigaction: glibc's refuses its own 32 and 33), then none
  // blocked, as a fresh process has them.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } dfl = {SIG_DFL, 0, NULL, 0};
  for (int sig = 1; sig < _NSIG; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  }
  for (int i = 0; i < a->n_fds; i++) {
    // The copies are all above every target (see spawn): no dup2 overwrites another's source.
    if (dup2(a->temps[i], i) < 0) goto fail;
  }
  // Nothing of the server's but what is passed, not even a descriptor opened without close-on-exec.
  syscall(SYS_close_range, (unsigned)a->n_fds, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8);
  execve(a->file, a->argv, environ);
fail:
  a->err = errno;
  _exit(127);
}

static napi_value spawn(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4) {
    napi_throw_type_error(env, NULL, "spawn(file, argv, fds, onExit)");
    return NULL;
  }
  napi_valuetype cb_type;
  napi_typeof(env, argv[3], &cb_type);
  if (cb_type != napi_function) {
    napi_throw_type_error(env, NULL, "spawn: onExit must be a function");
    return NULL;
  }
  char* file = NULL;
  char** args = NULL;
  int* temps = NULL;
  uint32_t n_args = 0, n_fds = 0;
  napi_value result = NULL;
  void* stack = MAP_FAILED;

  if (!(file = get_string(env, argv[0]))) {
    napi_throw_type_error(env, NULL, "spawn: file must be a string");
    goto done;
  }
  if (napi_get_array_length(env, argv[1], &n_args) != napi_ok || n_args == 0 || napi_get_array_length(env, argv[2], &n_fds) != napi_ok || n_fds < 3) {
    napi_throw_type_error(env, NULL, "spawn: argv must be a non-empty array, fds an array of at least 3 descriptors");
    goto done;
  }
  if (!(args = calloc(n_args + 1, sizeof *args)) || !(temps = malloc(n_fds * sizeof *temps))) {
    napi_throw_error(env, NULL, "spawn: out of memory");
    goto done;
  }
  for (uint32_t i = 0; i < n_args; i++) {
    napi_value item;
    napi_get_element(env, argv[1], i, &item);
    if (!(args[i] = get_string(env, item))) {
      napi_throw_type_error(env, NULL, "spawn: argv must hold strings");
      goto done;
    }
  }
  for (uint32_t i = 0; i < n_fds; i++) temps[i] = -1;
  // Each source is first copied above every target, so that one target's
  // dup2 cannot overwrite another's source; dup2 onto the target then
  // clears close-on-exec there, and the copies close with the parent's end.
  for (uint32_t i = 0; i < n_fds; i++) {
    napi_value item;
    int32_t fd;
    napi_get_element(env, argv[2], i, &item);
    if (napi_get_value_int32(env, item, &fd) != napi_ok || fd < 0) {
      napi_throw_type_error(env, NULL, "spawn: fds must hold descriptors");
      goto done;
    }
    temps[i] = fcntl(fd, F_DUPFD_CLOEXEC, (int)n_fds);
    if (temps[i] < 0) {
      throw_errno(env, errno, "spawn: duplicating descriptor of", file);
      goto done;
    }
  }
  spawn_args_t a = {file, args, temps, (int)n_fds, 0};
  const size_t stack_size = 64 * 1024;
  stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    throw_errno(env, errno, "spawn: mmap for", file);
    goto done;
  }
  // No handler of this process may run on the child's stack before it has reset them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(spawn_child, (char*)stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    throw_errno(env, clone_err, "spawn: clone for", file);
    goto done;
  }
  if (a.err) {
    // It exited without exec: collected now, nobody else waits for it.
    waitpid(pid, NULL, 0);
    throw_errno(env, a.err, "spawn", file);
    goto done;
  }
  child_watch_t* w = calloc(1, sizeof *w);
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  uv_loop_t* loop = NULL;
  napi_get_uv_event_loop(env, &loop);
  if (!w || pidfd < 0 || uv_poll_init(loop, &w->poll, pidfd) != 0) {
    // Cannot watch it: it is not left running unseen.
    int err = pidfd < 0 ? errno : ENOMEM;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (pidfd >= 0) close(pidfd);
    free(w);
    throw_errno(env, err, "spawn: watching", file);
    goto done;
  }
  w->env = env;
  w->pidfd = pidfd;
  w->pid = pid;
  w->poll.data = w;
  napi_create_reference(env, argv[3], 1, &w->callback);
  uv_poll_start(&w->poll, UV_READABLE, on_exit_readable);
  napi_create_int32(env, pid, &result);

done:
  if (stack != MAP_FAILED) munmap(stack, 64 * 1024);
  if (temps) {
    for (uint32_t i = 0; i < n_fds; i++) {
      if (temps[i] >= 0) close(temps[i]);
    }
  }
  free(temps);
  free_strings(args);
  free(file);
  return result;
}

// pipe() -> [readFd, writeFd], both close-on-exec: a child's output to this
// process without child_process (which would fork it to make its pipes).
static napi_value make_pipe(napi_env env, napi_callback_info info) {
  (void)info;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return throw_errno(env, errno, "make a pipe", "pipe2");
  napi_value result, end;
  napi_create_array_with_length(env, 2, &result);
  for (uint32_t i = 0; i < 2; i++) {
    napi_create_int32(env, fds[i], &end);
    napi_set_element(env, result, i, end);
  }
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn, supported;
  if (napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, spawn, NULL, &fn) != napi_ok) return NULL;
  napi_set_named_property(env, exports, "spawn", fn);
  if (napi_create_function(env, "pipe", NAPI_AUTO_LENGTH, make_pipe, NULL, &fn) != napi_ok) return NULL;
  napi_set_named_property(env, exports, "pipe", fn);
  // pidfd_open came with Linux 5.3: without it spawn() cannot watch a child, and the caller forks instead.
  int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (probe >= 0) close(probe);
  napi_get_boolean(env, probe >= 0, &supported);
  napi_set_named_property(env, exports, "supported", supported);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
