// paddock-legacy-cgroups PROGRAM [ARG...]
//
// Runs PROGRAM (crun) in a mount namespace of its own in which the cgroup v2
// hierarchy of a "hybrid" host is not mounted, so that PROGRAM sees a plain
// cgroup v1 host.
//
// A hybrid host has the v1 controllers mounted under /sys/fs/cgroup (a
// tmpfs) and a v2 hierarchy at /sys/fs/cgroup/unified. crun refuses to work
// there as soon as the v2 hierarchy has any controller ("cgroups in hybrid
// mode not supported, drop all controllers from cgroupv2"); this host's has
// hugetlb. runc uses the v1 controllers on such a host and ignores the v2
// hierarchy's controllers, which is what crun does in a namespace without it.
// The container's limits (cpu, memory, pids, devices, freezer) are all v1
// controllers there.
//
// The new namespace is a private copy of the caller's: nothing mounted or
// unmounted in it reaches the host, and everything crun needs from the host
// (the sandbox's root filesystem, its network namespace's bind mount, its
// bundle) is in the copy. The containers crun starts get mount namespaces
// of their own, copied from this one, before they pivot into their root.
//
// On any other host (v2 only, v1 only) it only executes PROGRAM.
//
// Built static, as the start hook is: it needs no library of the host's.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <unistd.h>

static int is_fs(const char* path, long magic) {
  struct statfs s;
  return statfs(path, &s) == 0 && (long)s.f_type == magic;
}

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] != '/') {
    fprintf(stderr, "usage: paddock-legacy-cgroups /ABSOLUTE/PROGRAM [ARG...]\n");
    return 2;
  }
  if (is_fs("/sys/fs/cgroup", TMPFS_MAGIC) && is_fs("/sys/fs/cgroup/unified", CGROUP2_SUPER_MAGIC)) {
    if (unshare(CLONE_NEWNS) != 0) {
      fprintf(stderr, "paddock-legacy-cgroups: unshare(CLONE_NEWNS): %s\n", strerror(errno));
      return 125;
    }
    // Private first: the unmount below must not propagate to the host's namespace.
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
      fprintf(stderr, "paddock-legacy-cgroups: making / private: %s\n", strerror(errno));
      return 125;
    }
    if (umount2("/sys/fs/cgroup/unified", MNT_DETACH) != 0) {
      fprintf(stderr, "paddock-legacy-cgroups: unmounting /sys/fs/cgroup/unified: %s\n", strerror(errno));
      return 125;
    }
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "paddock-legacy-cgroups: cannot execute '%s': %s\n", argv[1], strerror(errno));
  return 127;
}
