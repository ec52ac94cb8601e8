{
  "targets": [
    {
      "target_name": "pipesize",
      "sources": ["src/native/pipesize.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    },
    {
      "target_name": "scan",
      "sources": ["src/native/scan.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
