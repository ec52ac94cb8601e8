// The URLs that are already in canonical form, told apart on their bytes: most of a
// reflog's URLs are, and for them the WHATWG parser (with its strings) has nothing to do.

/** Bytes a path keeps as they are: printable ASCII but those WHATWG percent-encodes there ("<>`{}^), '#' and '?' (which end it) and '\' (a '/' to it). */
const PATH_KEEPS = new Uint8Array(256);
/** Bytes a query keeps as they are: as a path, with '?', but not "'" (which WHATWG percent-encodes in an http(s) query). */
const QUERY_KEEPS = new Uint8Array(256);
for (let c = 0x21; c <= 0x7e; c++) {
  if (!'"#<>?\\^`{}'.includes(String.fromCharCode(c))) PATH_KEEPS[c] = 1;
  if (!'"#<>\\^`{}\''.includes(String.fromCharCode(c))) QUERY_KEEPS[c] = 1;
}

const SLASH = 47;
const DOT = 46;
const HYPHEN = 45;
const PERCENT = 37;
const QUESTION = 63;
const HASH = 35;
/** The longest host label and host the fast path takes (DNS's limits; longer ones go to the parser). */
const MAX_LABEL = 63;
const MAX_HOST = 253;

const isLower = (c: number) => c >= 97 && c <= 122;
const isDigit = (c: number) => c >= 48 && c <= 57;
const isHex = (c: number) => isDigit(c) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);

/**
 * For an absolute http(s) URL `b[s, e)` that the WHATWG URL parser would leave as it
 * is (its serialization, fragment removed, is the same bytes), where that
 * serialization ends (before a '#'); else -1, and the URL goes to the parser. `host`
 * receives where its host starts and ends. Taken: `http://` or `https://`, a host of
 * lower-case ASCII letters, digits, dots and hyphens (labels of 1 to 63, none empty,
 * no hyphen at a label's ends, no "--" anywhere (so no punycode), the last label
 * starting with a letter: not an IPv4 address), no port or user, then a path from a
 * '/' without dot segments ('.', '..', or spelled with %2e), then a query; printable
 * ASCII that WHATWG keeps as it is there, '%' only before two hex digits. Anything
 * else (upper case, IDN, an IP, a port, a byte it would percent-encode, a backslash,
 * '^' (encoded by newer parsers), no path) is declined, so the answer is the parser's.
 */
export function canonicalEnd(b: Uint8Array, s: number, e: number, host: Int32Array): number {
  let p: number;
  if (e - s < 10 || b[s] !== 104 || b[s + 1] !== 116 || b[s + 2] !== 116 || b[s + 3] !== 112) return -1;
  if (b[s + 4] === 58) p = s + 5;
  else if (b[s + 4] === 115 && b[s + 5] === 58) p = s + 6;
  else return -1;
  if (b[p] !== SLASH || b[p + 1] !== SLASH) return -1;
  p = hostEnd(b, p + 2, e);
  if (p < 0 || b[p] !== SLASH) return -1;
  host[0] = s + (b[s + 4] === 58 ? 7 : 8);
  host[1] = p;
  // The path: segments up to '?', '#' or the end.
  let seg = p + 1;
  for (p++; p < e; p++) {
    const c = b[p]!;
    if (c === SLASH) {
      if (isDotSegment(b, seg, p)) return -1;
      seg = p + 1;
    } else if (c === QUESTION || c === HASH) {
      break;
    } else if (PATH_KEEPS[c] === 0 || (c === PERCENT && !escapeAt(b, p, e))) {
      return -1;
    }
  }
  if (isDotSegment(b, seg, p)) return -1;
  if (p < e && b[p] === QUESTION) {
    for (p++; p < e; p++) {
      const c = b[p]!;
      if (c === HASH) break;
      if (c !== QUESTION && (QUERY_KEEPS[c] === 0 || (c === PERCENT && !escapeAt(b, p, e)))) return -1;
    }
  }
  return p;
}

/** Where a host as canonicalEnd takes it, starting at `b[p]`, ends (at the first byte that is not part of one), or -1. */
function hostEnd(b: Uint8Array, p: number, e: number): number {
  const start = p;
  let label = p;
  for (; p < e; p++) {
    const c = b[p]!;
    if (isLower(c) || isDigit(c)) continue;
    if (c === HYPHEN) {
      if (p === label || b[p - 1] === HYPHEN) return -1;
      continue;
    }
    if (c !== DOT) break;
    if (p === label || b[p - 1] === HYPHEN || p - label > MAX_LABEL) return -1;
    label = p + 1;
  }
  if (p === label || b[p - 1] === HYPHEN || p - label > MAX_LABEL || p - start > MAX_HOST || !isLower(b[label]!)) return -1;
  return p;
}

/** Whether `b[s, e)` may be a dot segment ('.', '..', or either with a dot spelled %2e): every short one starting with '.' or '%' is taken as one. */
function isDotSegment(b: Uint8Array, s: number, e: number): boolean {
  return e - s <= 6 && e > s && (b[s] === DOT || b[s] === PERCENT);
}

/** Whether the '%' at `b[p]` starts a percent-escape (two hex digits follow). */
function escapeAt(b: Uint8Array, p: number, e: number): boolean {
  return p + 2 < e && isHex(b[p + 1]!) && isHex(b[p + 2]!);
}
