// Hits are non-negative decimal integers. Sums stay exact beyond 2^53 by falling
// back to BigInt, which costs nothing on the common small-number path.
//
// Bounds, so that no stage writes a count the next one refuses: a reflog's hits
// may have at most 18 significant digits (analyze-dump rejects more); the record
// streams carry at most 30 digits. An hour's sum of 10 million such counts has at
// most 25, so current_log can add up 10^5 hours of the largest possible sums; a
// sum that would still pass 30 digits stops group-sum or filter-url with an error
// naming the line, instead of being written.
import { digitsValue, latin1, putDecimal } from './bytes.js';

const HITS_RE = /^\d+$/;
/** Most digits a hits field of a record stream may have. */
export const MAX_HITS_DIGITS = 30;
/** Most significant digits (leading zeros aside) a reflog's hits may have. */
export const MAX_REFLOG_HITS_DIGITS = 18;

/** True for a non-negative decimal integer (leading zeros allowed, no sign). */
export function isValidHits(text: string): boolean {
  return text.length > 0 && text.length <= MAX_HITS_DIGITS && HITS_RE.test(text);
}

/** The error message for a hits sum longer than MAX_HITS_DIGITS. */
export function hitsTooBig(digits: number): string {
  return `hits sum of ${digits} digits is beyond the ${MAX_HITS_DIGITS} digits the record streams carry`;
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
