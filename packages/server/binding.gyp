{
  "targets": [
    {
      "target_name": "relay_pump",
      "sources": ["native/relay_pump.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
