// paddock-start-hook SOURCE ROOTFS [NAME=VALUE...]
//
// An OCI createContainer hook: runc runs it inside the new container's
// namespaces, as the container's root with all its capabilities there,
// after it mounted the container's /proc and before it pivots into the root
// filesystem and drops capabilities. It does what each start of a sandbox
// needs and runc's configuration cannot say:
//
// - It bind-mounts SOURCE (a file the runtime wrote with a fresh UUID for
//   this start), read-only, over /proc/sys/kernel/random/boot_id, so that
//   every start is a new boot to the programs inside. runc refuses such a
//   mount in config.json (only a few files under /proc may be mounted over).
// - It sets the user namespace's own limits: each NAME=VALUE is written to
//   /proc/sys/user/NAME, which the kernel keeps per user namespace (the
//   writer's). The counts behind them are also charged to the namespace's
//   owner, the host's root, for whom one limit holds for all sandboxes
//   together: without a limit of each sandbox's own, one sandbox could take
//   all of root's inotify instances, the host's and every other sandbox's.
//   /proc/sys is read-only inside, so the sandbox cannot raise them again.
//
// ROOTFS is a directory the host made, but what is inside it comes from an
// image and from the sandbox itself: `proc` there could be a symlink to
// anywhere. So nothing below ROOTFS is resolved by path: `proc` is opened
// without following a link and must be a procfs mount, and the target is
// reached from that descriptor, inside procfs, where no sandbox can place a
// link. The mount is made through /proc/self/fd of both descriptors.
//
// Built static: it must not depend on the host's or the image's libraries.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static int fail(const char* what, const char* path) {
  fprintf(stderr, "paddock-start-hook: %s '%s': %s\n", what, path, strerror(errno));
  return 1;
}

/** Writes VALUE to /proc/sys/user/NAME for one NAME=VALUE (names of lowercase letters and '_', values of digits). */
static int set_user_limit(const char* setting) {
  const char* eq = strchr(setting, '=');
  if (eq == NULL || eq == setting || eq[1] == '\0' || eq - setting > 64) {
    errno = EINVAL;
    return fail("not NAME=VALUE", setting);
  }
  for (const char* p = setting; p < eq; p++) {
    if (!((*p >= 'a' && *p <= 'z') || *p == '_')) {
      errno = EINVAL;
      return fail("not a limit name", setting);
    }
  }
  for (const char* p = eq + 1; *p; p++) {
    if (*p < '0' || *p > '9') {
      errno = EINVAL;
      return fail("not a number", setting);
    }
  }
  char path[96];
  snprintf(path, sizeof path, "/proc/sys/user/%.*s", (int)(eq - setting), setting);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open", path);
  size_t len = strlen(eq + 1);
  if (write(fd, eq + 1, len) != (ssize_t)len) return fail("cannot write", path);
  close(fd);
  return 0;
}

/**
 * Reads the container's state, which the OCI runtime writes to a hook's
 * standard input, to its end. Unread, a hook that exits before the runtime
 * wrote it makes the write fail: crun then fails the start ("writing to
 * pipe: Broken pipe"); runc ignores it.
 */
static void drain_stdin(void) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    return;
  }
}

int main(int argc, char** argv) {
  drain_stdin();
  if (argc < 3) {
    fprintf(stderr, "usage: paddock-start-hook SOURCE ROOTFS [NAME=VALUE...]\n");
    return 2;
  }
  // First, while /proc is still the one runc found (this process's user namespace is the container's).
  for (int i = 3; i < argc; i++) {
    if (set_user_limit(argv[i]) != 0) return 1;
  }
  const char* source = argv[1];
  const char* rootfs = argv[2];
  int src = open(source, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0) return fail("cannot open", source);
  struct stat st;
  if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return fail("not a regular file", source);
  }
  int root = open(rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) return fail("cannot open", rootfs);
  int proc = openat(root, "proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (proc < 0) return fail("cannot open proc in", rootfs);
  struct statfs fs;
  if (fstatfs(proc, &fs) < 0) return fail("cannot stat proc in", rootfs);
  if (fs.f_type != PROC_SUPER_MAGIC) {
    errno = EINVAL;
    return fail("proc is not a procfs mount in", rootfs);
  }
  int target = openat(proc, "sys/kernel/random/boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (target < 0) return fail("cannot open sys/kernel/random/boot_id under proc in", rootfs);
  char from[64], to[64];
  snprintf(from, sizeof from, "/proc/self/fd/%d", src);
  snprintf(to, sizeof to, "/proc/self/fd/%d", target);
  if (mount(from, to, NULL, MS_BIND, NULL) < 0) return fail("cannot bind-mount the boot id from", source);
  // The new mount sits on top of the old descriptor's file: reach it again to make it read-only.
  int mounted = openat(proc, "sys/kernel/random/boot_id", O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (mounted < 0) return fail("cannot open the mounted boot id under proc in", rootfs);
  snprintf(to, sizeof to, "/proc/self/fd/%d", mounted);
  if (mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) return fail("cannot make the boot id read-only from", source);
  return 0;
}
