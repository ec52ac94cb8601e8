// Timestamps are 14 digits YYYYMMDDhhmmss in the local time zone; durations are
// `90s`, `30m`, `1h`, `10h`, `1d` or plain seconds.
import { digitsValue } from './bytes.js';

/** True when `ts` is 14 digits naming a real calendar date and time (no Feb 31, no 24:00). */
export function isValidTimestamp(ts: string): boolean {
  return /^[0-9]{14}$/.test(ts) && timestampKey(Buffer.from(ts, 'latin1'), 0, 14) >= 0;
}

let lastKey = -1;

/**
 * The timestamp in `buf[start, end)` as the number YYYYMMDDhhmmss (its bytewise
 * order is its numeric order), or -1 unless it is 14 digits naming a real calendar
 * date and time.
 */
export function timestampKey(buf: Uint8Array, start: number, end: number): number {
  if (end - start !== 14) return -1;
  let v = 0;
  for (let i = start; i < end; i++) {
    const c = buf[i]! - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  // A reflog carries the same second on many consecutive lines.
  if (v === lastKey) return v;
  const y = Math.floor(v / 1e10);
  const mo = Math.floor(v / 1e8) % 100;
  const d = Math.floor(v / 1e6) % 100;
  const h = Math.floor(v / 1e4) % 100;
  const mi = Math.floor(v / 100) % 100;
  const s = v % 100;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return -1;
  if (d > daysInMonth(y, mo)) return -1;
  lastKey = v;
  return v;
}

function daysInMonth(y: number, mo: number): number {
  if (mo === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return mo === 4 || mo === 6 || mo === 9 || mo === 11 ? 30 : 31;
}

// Local-time conversion is cached per hour (a reflog spans few hours), direct-mapped
// on a small-integer key of the hour: no strings, no Map.
const HOUR_SLOTS = 1024;
const hourKeys = new Int32Array(HOUR_SLOTS).fill(-1);
const hourMs = new Float64Array(HOUR_SLOTS);

/** Milliseconds since the epoch of a valid timestamp read in the local time zone. */
export function timestampToMs(ts: string): number {
  return timestampMsAt(Buffer.from(ts, 'latin1'), 0);
}

/** timestampToMs of the valid timestamp at `buf[at, at + 14)`. */
export function timestampMsAt(buf: Uint8Array, at: number): number {
  const y = digitsValue(buf, at, at + 4);
  const mo = digitsValue(buf, at + 4, at + 6);
  const d = digitsValue(buf, at + 6, at + 8);
  const h = digitsValue(buf, at + 8, at + 10);
  const key = ((y * 13 + mo) * 32 + d) * 24 + h;
  const slot = key & (HOUR_SLOTS - 1);
  let base: number;
  if (hourKeys[slot] === key) base = hourMs[slot]!;
  else {
    const date = new Date(y, mo - 1, d, h, 0, 0, 0);
    if (y < 100) date.setFullYear(y, mo - 1, d); // the constructor reads years 0-99 as 1900-1999
    base = date.getTime();
    hourKeys[slot] = key;
    hourMs[slot] = base;
  }
  return base + (digitsValue(buf, at + 10, at + 12) * 60 + digitsValue(buf, at + 12, at + 14)) * 1000;
}

/** The local wall-clock time as a 14-digit timestamp. */
export function formatTimestamp(date: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return (
    p(date.getFullYear(), 4) +
    p(date.getMonth() + 1) +
    p(date.getDate()) +
    p(date.getHours()) +
    p(date.getMinutes()) +
    p(date.getSeconds())
  );
}

const DURATION_RE = /^(\d+)(s|m|h|d)?$/;
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Parses `90s`, `30m`, `1h`, `1d` or a number of seconds into milliseconds; null if malformed. */
export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * UNIT_SECONDS[m[2] ?? 's']! * 1000;
}
