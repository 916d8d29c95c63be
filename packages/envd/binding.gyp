{
  "targets": [
    {
      "target_name": "envd_native",
      "sources": ["native/envd_native.c", "native/file_transfer.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
