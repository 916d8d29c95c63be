{
  "targets": [
    {
      "target_name": "runtime_native",
      "sources": ["native/listen_unix.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "runtime_spawn",
      "sources": ["native/spawn.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "mount_overlay",
      "sources": ["native/mount_overlay.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"],
      "ldflags": ["-pthread"]
    },
    {
      "target_name": "image_fs",
      "sources": ["native/image_fs.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "paddock-start-hook",
      "type": "executable",
      "sources": ["native/start_hook.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "ldflags": ["-static"]
    },
    {
      "target_name": "paddock-legacy-cgroups",
      "type": "executable",
      "sources": ["native/legacy_cgroups_exec.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "ldflags": ["-static"]
    }
  ]
}
