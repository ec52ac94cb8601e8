{
  "targets": [
    {
      "target_name": "pipesize",
      "sources": ["src/native/pipesize.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
