/*
 * Passes over lines a block at a time, in C: the streaming stages' record checks
 * (src/core/record-checks.ts: scanUrlRecord, scanJoined, logsaver's routed lines) and
 * the reflog parser's pass over a line (src/core/reflog.ts: ReflogAnalyzer.lineAt),
 * byte for byte the same; and the sorter's copy of a group's records, in order, into
 * the output (src/core/runs.ts: SinkOut.putSorted). The JavaScript there stays the
 * reference and the fallback; test/record-checks.test.ts, test/reflog.test.ts,
 * test/urlfast.test.ts and test/sorter.test.ts hold the two to the same answers.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <node_api.h>

enum { TAB = 9, LF = 10, CR = 13, DASH = 45, ID_BYTES = 16, TS_BYTES = 14, MAX_HITS_DIGITS = 30 };
enum { KIND_URL = 0, KIND_JOINED = 1, KIND_ROUTED = 2 };

/* The TABs a line of each kind has; scanRecords writes one int more per line (its LF). */
static const int TABS[] = {5, 8, 6};

/*
 * What each byte value may be, as bits: HEX (a lower-case hex digit: 0-9, a-f), DOMAIN
 * (in a domain as checkDomain has it: 0x21 to 0x7e but A-Z), PATH_KEEP and QUERY_KEEP
 * (kept as it is in a path, in a query, by WHATWG: src/core/urlfast.ts). Constant, so
 * that every thread that loads the addon shares it as it is.
 */
enum { HEX = 1, DOMAIN = 2, PATH_KEEP = 4, QUERY_KEEP = 8 };
static const uint8_t byte_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 14, 2, 2, 14, 14, 14, 6, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 14, 14, 2, 14, 2, 10,
    14, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 14, 2, 14, 2, 14,
    2, 15, 15, 15, 15, 15, 15, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 2, 14, 2, 14, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* 16 lower-case hex digits; no branch per byte (digits and letters come in no order a branch predictor learns). */
static int is_id(const uint8_t *p) {
  uint8_t all = HEX;
  for (int k = 0; k < ID_BYTES; k++) all &= byte_class[p[k]];
  return all != 0;
}

static int days_in_month(long y, long mo) {
  if (mo == 2) return ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : 28;
  return (mo == 4 || mo == 6 || mo == 9 || mo == 11) ? 30 : 31;
}

static long digits(const uint8_t *p, int n) {
  long v = 0;
  for (int k = 0; k < n; k++) v = v * 10 + (p[k] - '0');
  return v;
}

/* timestampKey >= 0: 14 digits naming a real calendar date and time. */
static int is_timestamp(const uint8_t *p) {
  for (int k = 0; k < TS_BYTES; k++)
    if (!is_digit(p[k])) return 0;
  if (p[10] > '5' || p[12] > '5') return 0;
  long y = digits(p, 4), mo = digits(p + 4, 2), d = digits(p + 6, 2), h = digits(p + 8, 2);
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days_in_month(y, mo) && h <= 23;
}

static int is_tab(const uint8_t *b, long i, long e) { return i < e && b[i] == TAB; }

/* Whether any byte of the word x is below 14 (TAB, LF and CR are): exact, for any bytes. */
static int has_control(uint64_t x) {
  const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  return ((x - 14 * ones) & ~x & highs) != 0;
}

/* textEnd with lf LF: the field's TAB or the LF, or e; -1 at a CR. */
static long text_end(const uint8_t *b, long i, long e) {
  // Eight bytes at a time up to the first word that holds a byte below 14.
  for (; i + 8 <= e; i += 8) {
    uint64_t x;
    memcpy(&x, b + i, 8);
    if (has_control(x)) break;
  }
  for (; i < e; i++) {
    uint8_t c = b[i];
    if (c <= CR) {
      if (c == TAB || c == LF) return i;
      if (c == CR) return -1;
    }
  }
  return e;
}

static long hits_end(const uint8_t *b, long i, long e) {
  long from = i;
  while (i < e && is_digit(b[i])) i++;
  return i > from && i - from <= MAX_HITS_DIGITS ? i : -1;
}

static long domain_end(const uint8_t *b, long i, long e) {
  long from = i;
  while (i < e && (byte_class[b[i]] & DOMAIN)) i++;
  return i > from && is_tab(b, i, e) ? i : -1;
}

/* urlRecordEnd with lf LF: where the line from s ends (its LF, or e), or -1; its TABs in T. */
static long url_record_end(const uint8_t *b, long s, long e, int32_t *T) {
  long ts_end = ID_BYTES + 1 + TS_BYTES;
  if (e - s <= ts_end || !is_id(b + s) || b[s + ID_BYTES] != TAB) return -1;
  T[0] = (int32_t)(s + ID_BYTES);
  if (!is_timestamp(b + s + ID_BYTES + 1) || b[s + ts_end] != TAB) return -1;
  T[1] = (int32_t)(s + ts_end);
  long tag = text_end(b, s + ts_end + 1, e);
  if (!is_tab(b, tag, e)) return -1;
  T[2] = (int32_t)tag;
  long hits = hits_end(b, tag + 1, e);
  if (hits < 0 || !is_tab(b, hits, e)) return -1;
  T[3] = (int32_t)hits;
  long domain = domain_end(b, hits + 1, e);
  if (domain < 0) return -1;
  T[4] = (int32_t)domain;
  long end = text_end(b, domain + 1, e);
  return end > domain + 1 && (end == e || b[end] == LF) ? end : -1;
}

static long side_ts_end(const uint8_t *b, long i, long e) {
  long end = i < e && b[i] == DASH ? i + 1 : i + TS_BYTES;
  if (!is_tab(b, end, e)) return -1;
  if (end == i + 1) return end;
  for (long k = i; k < end; k++)
    if (!is_digit(b[k])) return -1;
  return end;
}

static long side_hits_end(const uint8_t *b, long i, long e, int absent) {
  if (!absent) return hits_end(b, i, e);
  return i < e && b[i] == DASH ? i + 1 : -1;
}

/* joinedEnd with lf LF. */
static long joined_end(const uint8_t *b, long s, long e, int32_t *T) {
  if (e - s <= ID_BYTES || !is_id(b + s) || b[s + ID_BYTES] != TAB) return -1;
  T[0] = (int32_t)(s + ID_BYTES);
  long domain = domain_end(b, s + ID_BYTES + 1, e);
  if (domain < 0) return -1;
  T[1] = (int32_t)domain;
  long url = text_end(b, domain + 1, e);
  if (url <= domain + 1 || !is_tab(b, url, e)) return -1;
  T[2] = (int32_t)url;
  long c_ts = side_ts_end(b, url + 1, e);
  if (c_ts < 0) return -1;
  T[3] = (int32_t)c_ts;
  long i_ts = side_ts_end(b, c_ts + 1, e);
  if (i_ts < 0) return -1;
  T[4] = (int32_t)i_ts;
  int c_absent = c_ts == url + 2, i_absent = i_ts == c_ts + 2;
  if (c_absent && i_absent) return -1;
  long c_tag = text_end(b, i_ts + 1, e);
  if (!is_tab(b, c_tag, e) || (c_absent && c_tag != i_ts + 1)) return -1;
  T[5] = (int32_t)c_tag;
  long i_tag = text_end(b, c_tag + 1, e);
  if (!is_tab(b, i_tag, e) || (i_absent && i_tag != c_tag + 1)) return -1;
  T[6] = (int32_t)i_tag;
  long c_hits = side_hits_end(b, i_tag + 1, e, c_absent);
  if (c_hits < 0 || !is_tab(b, c_hits, e)) return -1;
  T[7] = (int32_t)c_hits;
  long end = side_hits_end(b, c_hits + 1, e, i_absent);
  return end >= 0 && (end == e || b[end] == LF) ? end : -1;
}

/* logsaver's routed line: a yacobot_id (a positive integer, at most 18 digits) TAB a URL record; T[0] its TAB. */
static long routed_end(const uint8_t *b, long s, long e, int32_t *T) {
  const uint8_t *tab = memchr(b + s, TAB, (size_t)(e - s));
  if (tab == NULL) return -1;
  long t = tab - b;
  if (t - s > 18 || t == s || b[s] == '0') return -1;
  for (long k = s; k < t; k++)
    if (!is_digit(b[k])) return -1;
  T[0] = (int32_t)t;
  return url_record_end(b, t + 1, e, T + 1);
}

static int is_lower(uint8_t c) { return c >= 'a' && c <= 'z'; }
static int is_hex_any(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static long host_end(const uint8_t *b, long p, long e) {
  long start = p, label = p;
  for (; p < e; p++) {
    uint8_t c = b[p];
    if (is_lower(c) || is_digit(c)) continue;
    if (c == '-') {
      if (p == label || b[p - 1] == '-') return -1;
      continue;
    }
    if (c != '.') break;
    if (p == label || b[p - 1] == '-' || p - label > 63) return -1;
    label = p + 1;
  }
  if (p == label || b[p - 1] == '-' || p - label > 63 || p - start > 253 || !is_lower(b[label])) return -1;
  return p;
}

static int is_dot_segment(const uint8_t *b, long s, long e) { return e - s <= 6 && e > s && (b[s] == '.' || b[s] == '%'); }

static int escape_at(const uint8_t *b, long p, long e) { return p + 2 < e && is_hex_any(b[p + 1]) && is_hex_any(b[p + 2]); }

/*
 * canonicalEnd of src/core/urlfast.ts (where it says what a URL in canonical form is):
 * for an absolute http(s) URL b[s, e) that the WHATWG parser would leave as it is, where
 * it ends (before a '#'), its host in host[0, 1]; else -1. Reads b[s, e], b[e] included.
 */
static long canonical_end(const uint8_t *b, long s, long e, int32_t *host) {
  long p;
  if (e - s < 10 || b[s] != 'h' || b[s + 1] != 't' || b[s + 2] != 't' || b[s + 3] != 'p') return -1;
  if (b[s + 4] == ':') p = s + 5;
  else if (b[s + 4] == 's' && b[s + 5] == ':') p = s + 6;
  else return -1;
  if (b[p] != '/' || b[p + 1] != '/') return -1;
  p = host_end(b, p + 2, e);
  if (p < 0 || b[p] != '/') return -1;
  host[0] = (int32_t)(s + (b[s + 4] == ':' ? 7 : 8));
  host[1] = (int32_t)p;
  long seg = p + 1;
  for (p++; p < e; p++) {
    uint8_t c = b[p];
    if (c == '/') {
      if (is_dot_segment(b, seg, p)) return -1;
      seg = p + 1;
    } else if (c == '?' || c == '#') {
      break;
    } else if (!(byte_class[c] & PATH_KEEP) || (c == '%' && !escape_at(b, p, e))) {
      return -1;
    }
  }
  if (is_dot_segment(b, seg, p)) return -1;
  if (p < e && b[p] == '?') {
    for (p++; p < e; p++) {
      uint8_t c = b[p];
      if (c == '#') break;
      if (c != '?' && (!(byte_class[c] & QUERY_KEEP) || (c == '%' && !escape_at(b, p, e)))) return -1;
    }
  }
  return p;
}

/*
 * What scanReflog writes per line: its end, TABs, high-byte flag, last two CRs, first
 * 7 TABs, and for a line of 5 TABs or more canonicalEnd of its fifth field (the URL,
 * between the 4th and 5th TAB) with its host (else -2 and two zeros).
 */
enum { R_END = 0, R_TABS = 1, R_HIGH = 2, R_CR = 3, R_CR_BEFORE = 4, R_TAB0 = 5, R_CUT = 12, R_HOST = 13, REFLOG_STRIDE = 15 };

/*
 * ReflogAnalyzer.lineAt's one pass over the line from s: where it ends (its LF, or e),
 * its TABs (how many, and where the first 7 are), 128 when a byte is 128 or more (else
 * 0), and its last CR and the one before (or -1).
 */
static long reflog_line(const uint8_t *b, long s, long e, int32_t *o) {
  const uint64_t highs = 0x8080808080808080ULL;
  int32_t nt = 0, high = 0, cr = -1, cr_before = -1;
  long p = s;
  while (p < e) {
    // A word with no byte below 14 and none above 127 holds nothing to note.
    while (p + 8 <= e) {
      uint64_t x;
      memcpy(&x, b + p, 8);
      if (has_control(x) || (x & highs)) break;
      p += 8;
    }
    long stop = p + 8 < e ? p + 8 : e;
    for (; p < stop; p++) {
      uint8_t c = b[p];
      if (c <= CR) {
        if (c == LF) goto done;
        if (c == TAB) {
          if (nt < 7) o[R_TAB0 + nt] = (int32_t)p;
          nt++;
        } else if (c == CR) {
          cr_before = cr;
          cr = (int32_t)p;
        }
      } else if (c >= 128) {
        high = 128;
      }
    }
  }
done:
  o[R_CUT] = -2;
  o[R_HOST] = o[R_HOST + 1] = 0;
  if (nt >= 5) o[R_CUT] = (int32_t)canonical_end(b, o[R_TAB0 + 3] + 1, o[R_TAB0 + 4], o + R_HOST);
  o[R_END] = (int32_t)p;
  o[R_TABS] = nt;
  o[R_HIGH] = high;
  o[R_CR] = cr;
  o[R_CR_BEFORE] = cr_before;
  return p;
}

/* An integer argument from `min` to `max` (not napi_get_value_int32, which takes NaN for 0). */
static int int_arg(napi_env env, napi_value v, double min, double max, int64_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= min && d <= max) || d != (double)(int64_t)d) return 0;
  *out = (int64_t)d;
  return 1;
}

/* A typed array argument of `type`: its data and length in elements. */
static int typed_arg(napi_env env, napi_value v, napi_typedarray_type type, void **data, size_t *len) {
  napi_typedarray_type t;
  return napi_get_typedarray_info(env, v, &t, len, data, NULL, NULL) == napi_ok && t == type;
}

/* A pass over lines: the bytes b[s, e) and the Int32Array out[0, olen) it writes to. */
struct lines {
  const uint8_t *b;
  long s, e;
  int32_t *out;
  size_t olen;
};

/* The `argc` arguments of a pass over lines into argv: (buf, from, limit, ..., out), checked; 0 when one is bad. */
static int lines_call(napi_env env, napi_callback_info info, size_t argc, napi_value *argv, struct lines *l) {
  size_t got = argc;
  void *bdata;
  size_t blen;
  int64_t f, e;
  if (napi_get_cb_info(env, info, &got, argv, NULL, NULL) != napi_ok || got < argc || !typed_arg(env, argv[0], napi_uint8_array, &bdata, &blen) ||
      blen > INT32_MAX || !typed_arg(env, argv[argc - 1], napi_int32_array, (void **)&l->out, &l->olen) || !int_arg(env, argv[2], 0, (double)blen, &e) ||
      !int_arg(env, argv[1], 0, (double)e, &f))
    return 0;
  l->b = bdata;
  l->s = (long)f;
  l->e = (long)e;
  return 1;
}

static napi_value int_result(napi_env env, int32_t n) {
  napi_value result;
  napi_create_int32(env, n, &result);
  return result;
}

/*
 * scanRecords(buf, from, limit, kind, out): checks the lines of `kind` (0: URL record,
 * 1: joined, 2: routed) that follow one another from buf[from], each ended by an LF
 * before buf[limit], and stops at the first that is not one (or runs past limit), or
 * when `out` (an Int32Array) is full. Per line it writes to `out` its LF's position
 * and its TABs' (5, 8 or 6); returns the number of lines.
 */
static napi_value ScanRecords(napi_env env, napi_callback_info info) {
  napi_value argv[5];
  struct lines l;
  int64_t kind;
  if (!lines_call(env, info, 5, argv, &l) || !int_arg(env, argv[3], 0, 2, &kind)) {
    napi_throw_type_error(env, NULL,
                          "scanRecords(buf, from, limit, kind, out) wants a Uint8Array, 0 <= from <= limit <= its length, kind 0, 1 or 2, and an Int32Array");
    return NULL;
  }
  size_t stride = (size_t)TABS[kind] + 1;
  int32_t n = 0;
  for (size_t at = 0; at + stride <= l.olen && l.s < l.e; at += stride) {
    int32_t *o = l.out + at;
    long end = kind == KIND_URL ? url_record_end(l.b, l.s, l.e, o + 1) : kind == KIND_JOINED ? joined_end(l.b, l.s, l.e, o + 1) : routed_end(l.b, l.s, l.e, o + 1);
    if (end < 0 || end >= l.e) break;
    o[0] = (int32_t)end;
    n++;
    l.s = end + 1;
  }
  return int_result(env, n);
}

/*
 * scanReflog(buf, from, limit, out): ReflogAnalyzer.lineAt's pass over the lines from
 * buf[from] (each ended by an LF, the last maybe by `limit`), as many as `out` (an
 * Int32Array) holds, 15 ints each: see reflog_line. Returns the number of lines.
 */
static napi_value ScanReflog(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  struct lines l;
  if (!lines_call(env, info, 4, argv, &l)) {
    napi_throw_type_error(env, NULL, "scanReflog(buf, from, limit, out) wants a Uint8Array, 0 <= from <= limit <= its length, and an Int32Array");
    return NULL;
  }
  int32_t n = 0;
  for (size_t at = 0; at + REFLOG_STRIDE <= l.olen && l.s < l.e; at += REFLOG_STRIDE) {
    l.s = reflog_line(l.b, l.s, l.e, l.out + at) + 1;
    n++;
  }
  return int_result(env, n);
}

/*
 * gather(dst, pos, sources, at, len, order, from, to, end): copies the records
 * order[from], order[from + 1], ... (record k: len[k] bytes at offset at[k] mod 2^32 of
 * the Uint8Array sources[floor(at[k] / 2^32)]) to dst from pos on, as many as fit
 * before its end; end[0] = where they end. Returns the index in order after the last
 * one copied. A record outside its source is a RangeError, as Buffer#copy's would be.
 */
static napi_value Gather(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  uint8_t *dst;
  double *at;
  uint32_t *len, *order;
  int32_t *end;
  size_t dlen, alen, llen, olen, elen;
  uint32_t nsrc;
  int64_t pos, from, to;
  bool is_array;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 9 ||
      !typed_arg(env, argv[0], napi_uint8_array, (void **)&dst, &dlen) || dlen > INT32_MAX ||
      napi_is_array(env, argv[2], &is_array) != napi_ok || !is_array || napi_get_array_length(env, argv[2], &nsrc) != napi_ok ||
      !typed_arg(env, argv[3], napi_float64_array, (void **)&at, &alen) || !typed_arg(env, argv[4], napi_uint32_array, (void **)&len, &llen) ||
      !typed_arg(env, argv[5], napi_uint32_array, (void **)&order, &olen) || !typed_arg(env, argv[8], napi_int32_array, (void **)&end, &elen) ||
      elen < 1 || !int_arg(env, argv[1], 0, (double)dlen, &pos) || !int_arg(env, argv[7], 0, (double)olen, &to) ||
      !int_arg(env, argv[6], 0, (double)to, &from)) {
    napi_throw_type_error(env, NULL,
                          "gather(dst, pos, sources, at, len, order, from, to, end) wants a Uint8Array and a position in it, an Array, a Float64Array, "
                          "two Uint32Arrays, 0 <= from <= to <= order's length, and an Int32Array");
    return NULL;
  }
  /* Each source's bytes, looked up when a record first needs them. */
  const uint8_t *cache[64];
  size_t cache_len[64];
  int32_t cached[64];
  for (int c = 0; c < 64; c++) cached[c] = -1;
  int64_t j = from;
  for (; j < to; j++) {
    uint32_t k = order[j];
    if (k >= alen || k >= llen) {
      napi_throw_range_error(env, NULL, "gather: a record number past its arrays");
      return NULL;
    }
    double a = at[k];
    uint32_t n = len[k];
    if (!(a >= 0) || a >= 9007199254740992.0) {
      napi_throw_range_error(env, NULL, "gather: a record's place is not a source and an offset");
      return NULL;
    }
    uint64_t place = (uint64_t)a;
    uint32_t src = (uint32_t)(place >> 32), off = (uint32_t)place;
    if ((double)place != a || src >= nsrc) {
      napi_throw_range_error(env, NULL, "gather: a record's source is not one of the sources");
      return NULL;
    }
    if (pos + n > (int64_t)dlen) break;
    int slot = (int)(src & 63);
    if (cached[slot] != (int32_t)src) {
      napi_value v;
      void *data;
      size_t l;
      if (napi_get_element(env, argv[2], src, &v) != napi_ok || !typed_arg(env, v, napi_uint8_array, &data, &l)) {
        napi_throw_type_error(env, NULL, "gather: a source is not a Uint8Array");
        return NULL;
      }
      cache[slot] = data;
      cache_len[slot] = l;
      cached[slot] = (int32_t)src;
    }
    if ((uint64_t)off + n > cache_len[slot]) {
      napi_throw_range_error(env, NULL, "gather: a record runs past the end of its source");
      return NULL;
    }
    memcpy(dst + pos, cache[slot] + off, n);
    pos += n;
  }
  end[0] = (int32_t)pos;
  napi_value result;
  napi_create_double(env, (double)j, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "scanRecords", NAPI_AUTO_LENGTH, ScanRecords, NULL, &fn);
  napi_set_named_property(env, exports, "scanRecords", fn);
  napi_create_function(env, "scanReflog", NAPI_AUTO_LENGTH, ScanReflog, NULL, &fn);
  napi_set_named_property(env, exports, "scanReflog", fn);
  napi_create_function(env, "gather", NAPI_AUTO_LENGTH, Gather, NULL, &fn);
  napi_set_named_property(env, exports, "gather", fn);
  return exports;
}
