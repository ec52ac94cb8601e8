/*
 * fcntl(F_SETPIPE_SZ) for the stages: Node has no fcntl. Between two stages a
 * 64 KiB pipe (Linux's default) lets a stage run at most one write ahead of its
 * reader, so on two cores the chain's six processes often leave a core idle;
 * with 1 MiB pipes they do not (see docs/performance.md, "Where the time goes").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>

/*
 * growPipe(fd, bytes): makes the pipe on fd hold at least `bytes` (never shrinks
 * it); returns its capacity, or -errno (EBADF: not open, EBADF/EINVAL: not a
 * pipe, EPERM: above the system's or the user's limit).
 */
/*
 * An integer argument from `min` to INT32_MAX. Not napi_get_value_int32: it takes
 * NaN for 0 (stdin), 1.5 for 1 and 2^32 + 4096 for 4096.
 */
static int int_arg(napi_env env, napi_value v, double min, int32_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= min && d <= INT32_MAX) || d != (int32_t)d) return 0;
  *out = (int32_t)d;
  return 1;
}

static napi_value GrowPipe(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd = -1;
  int32_t bytes = 0;
  napi_value out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      !int_arg(env, argv[0], 0, &fd) || !int_arg(env, argv[1], 1, &bytes)) {
    napi_throw_type_error(env, NULL, "growPipe(fd, bytes) wants two integers, fd >= 0 and bytes >= 1");
    return NULL;
  }
  int r = fcntl(fd, F_GETPIPE_SZ);
  if (r >= 0 && r < bytes) r = fcntl(fd, F_SETPIPE_SZ, bytes);
  napi_create_int32(env, r < 0 ? -errno : r, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "growPipe", NAPI_AUTO_LENGTH, GrowPipe, NULL, &fn);
  napi_set_named_property(env, exports, "growPipe", fn);
  return exports;
}
