{
  "targets": [
    {
      "target_name": "envd_native",
      "sources": ["native/envd_native.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
