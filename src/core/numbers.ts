// Numbers an operator types (options, config values, arguments), read one way for
// every tool. Number() and parseInt() take much that a person does not mean: hex
// (0x1), exponents (1e0), spaces (' 1 '), '' as 0, Infinity, a sign; parseInt
// stops at the first non-digit (`10x` is 10).
import { UsageError } from './errors.js';

const DECIMAL_RE = /^(\d+(\.\d*)?|\.\d+)$/;
const DIGITS_RE = /^\d+$/;
const GROUPED_RE = /^\d{1,3}([_,]\d{3})+$/;

/**
 * A non-negative number written as plain decimal digits, with or without a
 * fraction: `0`, `0.01`, `1`, `.5`, `2.50`, `1.`. Null for anything else (a sign,
 * an exponent, hex, spaces, '', Infinity, too many digits to be finite).
 */
export function parseDecimal(text: string): number | null {
  if (!DECIMAL_RE.test(text)) return null;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

/** A whole number written as digits only, up to Number.MAX_SAFE_INTEGER (beyond it, it would be read as another); null otherwise. */
export function parseCount(text: string): number | null {
  if (!DIGITS_RE.test(text)) return null;
  const n = Number(text);
  return n <= Number.MAX_SAFE_INTEGER ? n : null;
}

/** parseCount, or digits grouped by threes with `_` or `,` (`1_000_000`, `1,000,000`); `1,5` is no number. */
export function parseGroupedCount(text: string): number | null {
  return parseCount(GROUPED_RE.test(text) ? text.replace(/[_,]/g, '') : text);
}

/** The usage error for a ratio option `name` given as `shown`. */
export function ratioError(name: string, shown: string): UsageError {
  return new UsageError(`${name} wants a number from 0 to 1, got '${shown}' (written as a plain decimal: 0, 0.01, .5, 1)`);
}

/** A ratio from 0 to 1 as parseDecimal reads it; null otherwise. */
export function parseRatio(text: string): number | null {
  const r = parseDecimal(text);
  return r !== null && r <= 1 ? r : null;
}

/** Option `flag`'s `value` as a ratio (parseRatio), or a UsageError naming both. */
export function ratioOption(flag: string, value: unknown): number {
  const r = parseRatio(String(value ?? ''));
  if (r === null) throw ratioError(flag, String(value ?? ''));
  return r;
}

/** Option `flag`'s `value` as an integer from `min` to `max` (parseCount), or a UsageError naming both. */
export function countOption(flag: string, value: unknown, min: number, max: number): number {
  const n = parseCount(String(value ?? ''));
  if (n === null || n < min || n > max) throw new UsageError(`${flag} wants an integer from ${min} to ${max}, got '${value ?? ''}'`);
  return n;
}
