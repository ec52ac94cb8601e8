// Hits are non-negative decimal integers. Sums stay exact beyond 2^53 by falling
// back to BigInt, which costs nothing on the common small-number path.
import { digitsValue, isDigitsAt, latin1, putDecimal } from './bytes.js';

const HITS_RE = /^\d+$/;
const MAX_HITS_DIGITS = 30;

/** True for a non-negative decimal integer (leading zeros allowed, no sign). */
export function isValidHits(text: string): boolean {
  return text.length > 0 && text.length <= MAX_HITS_DIGITS && HITS_RE.test(text);
}

/** isValidHits on the bytes `buf[start, end)`. */
export function isValidHitsAt(buf: Uint8Array, start: number, end: number): boolean {
  return end - start <= MAX_HITS_DIGITS && isDigitsAt(buf, start, end);
}

/** Exact sum of two valid hit counts, as canonical decimal text. */
export function addHits(a: string, b: string): string {
  if (a.length < 16 && b.length < 16) {
    const s = Number(a) + Number(b);
    if (s <= Number.MAX_SAFE_INTEGER) return String(s);
  }
  return (BigInt(a) + BigInt(b)).toString();
}

/**
 * addHits on bytes: writes the exact sum of the valid hit counts `b[a, aEnd)` and
 * `b[c, cEnd)` as canonical decimal digits to `dst` from 0 (room for 31 needed);
 * returns how many digits it wrote.
 */
export function addHitsAt(b: Uint8Array, a: number, aEnd: number, c: number, cEnd: number, dst: Uint8Array): number {
  if (aEnd - a < 16 && cEnd - c < 16) {
    const s = digitsValue(b, a, aEnd) + digitsValue(b, c, cEnd);
    if (s <= Number.MAX_SAFE_INTEGER) return putDecimal(dst, 0, s);
  }
  const text = addHits(latin1(b, a, aEnd), latin1(b, c, cEnd));
  for (let k = 0; k < text.length; k++) dst[k] = text.charCodeAt(k);
  return text.length;
}
