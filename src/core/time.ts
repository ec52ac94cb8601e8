// Timestamps are 14 digits YYYYMMDDhhmmss in the local time zone; durations are
// `90s`, `30m`, `1h`, `10h`, `1d` or plain seconds.
import { digitsValue, latin1 } from './bytes.js';
import { DataError } from './errors.js';

/** True when `ts` is 14 digits naming a real calendar date and time (no Feb 31, no 24:00). */
export function isValidTimestamp(ts: string): boolean {
  return /^[0-9]{14}$/.test(ts) && timestampKey(Buffer.from(ts, 'latin1'), 0, 14) >= 0;
}

// Real hours seen, direct-mapped on the hour's ten digits YYYYMMDDhh as a number:
// a reflog repeats the same few hours, and so does a current_log, whose consecutive
// timestamps differ (a one-value cache missed on nearly every line of it).
const realHours = new Float64Array(1024).fill(-1);

/**
 * The timestamp in `buf[start, end)` as the number YYYYMMDDhhmmss (its bytewise
 * order is its numeric order), or -1 unless it is 14 digits naming a real calendar
 * date and time.
 */
export function timestampKey(buf: Uint8Array, start: number, end: number): number {
  if (end - start !== 14) return -1;
  // Two runs of 7 digits side by side in int32 arithmetic: a single run of 14 is a
  // chain of float64 multiplications, each waiting for the one before.
  let hi = 0;
  let lo = 0;
  let bad = 0;
  for (let k = 0; k < 7; k++) {
    const a = buf[start + k]! - 48;
    const c = buf[start + 7 + k]! - 48;
    bad |= a | c | (9 - a) | (9 - c); // negative unless both are digits
    hi = hi * 10 + a;
    lo = lo * 10 + c;
  }
  if (bad < 0) return -1;
  if (buf[start + 10]! > 0x35 || buf[start + 12]! > 0x35) return -1; // minute, second > 59
  const v = hi * 1e7 + lo;
  const hour = Math.floor(v / 1e4);
  const slot = hour & 1023;
  if (realHours[slot] === hour) return v;
  if (!isRealHour(hour)) return -1;
  realHours[slot] = hour;
  return v;
}

/** True when the ten digits YYYYMMDDhh (as a number) name a real calendar date and hour. */
export function isRealHour(hour: number): boolean {
  const y = Math.floor(hour / 1e6);
  const mo = Math.floor(hour / 1e4) % 100;
  const d = Math.floor(hour / 100) % 100;
  return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo) && hour % 100 <= 23;
}

function daysInMonth(y: number, mo: number): number {
  if (mo === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return mo === 4 || mo === 6 || mo === 9 || mo === 11 ? 30 : 31;
}

// Local-time conversion is cached per hour (a reflog spans few hours), direct-mapped
// on the hour's ten digits YYYYMMDDhh as a number: no strings, no Map, and no two
// hours share a key (a month 14 must not pass for January of the next year).
const HOUR_SLOTS = 1024;
const hourKeys = new Float64Array(HOUR_SLOTS).fill(-1);
/** The hour's start in ms, or NaN for an hour in which the local clock changes. */
const hourMs = new Float64Array(HOUR_SLOTS);

/** Milliseconds since the epoch of a valid timestamp read in the local time zone. */
export function timestampToMs(ts: string): number {
  return timestampMsAt(Buffer.from(ts, 'latin1'), 0);
}

/**
 * timestampToMs of the 14 digits at `buf[at, at + 14)`, exactly as
 * `new Date(y, mo - 1, d, h, mi, s)` reads them; a DataError BAD_TIMESTAMP (no
 * place) unless they name a real calendar date and time.
 */
export function timestampMsAt(buf: Uint8Array, at: number): number {
  const hour = digitsValue(buf, at, at + 10);
  const mi = digitsValue(buf, at + 10, at + 12);
  const s = digitsValue(buf, at + 12, at + 14);
  if (mi > 59 || s > 59) throw badTimestamp(buf, at);
  const slot = hour & (HOUR_SLOTS - 1);
  let base: number;
  if (hourKeys[slot] === hour) base = hourMs[slot]!;
  else {
    if (!isRealHour(hour)) throw badTimestamp(buf, at);
    base = localMs(hour, 0, 0);
    // Minutes and seconds add up only if the local clock does not change inside the
    // hour: a change off the hour (St John's, 2011: 00:01) or of 30 minutes (Lord
    // Howe) makes such an hour converted per timestamp.
    if (localMs(hour, 59, 59) - base !== 3_599_000) base = NaN;
    hourKeys[slot] = hour;
    hourMs[slot] = base;
  }
  return Number.isNaN(base) ? localMs(hour, mi, s) : base + (mi * 60 + s) * 1000;
}

/** The local time `hour` (the digits YYYYMMDDhh as a number) `mi`:`s`, in ms since the epoch. */
function localMs(hour: number, mi: number, s: number): number {
  const y = Math.floor(hour / 1e6);
  const mo = Math.floor(hour / 1e4) % 100;
  const d = Math.floor(hour / 100) % 100;
  const date = new Date(y, mo - 1, d, hour % 100, mi, s, 0);
  if (y < 100) date.setFullYear(y, mo - 1, d); // the constructor reads years 0-99 as 1900-1999
  return date.getTime();
}

function badTimestamp(buf: Uint8Array, at: number): DataError {
  return new DataError('BAD_TIMESTAMP', `bad timestamp '${latin1(buf, at, at + 14)}': not a real date and time`);
}

/** The local wall-clock time as a 14-digit timestamp. */
export function formatTimestamp(date: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return p(date.getFullYear(), 4) + p(date.getMonth() + 1) + p(date.getDate()) + p(date.getHours()) + p(date.getMinutes()) + p(date.getSeconds());
}

const DURATION_RE = /^(\d+)(s|m|h|d)?$/;
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** The longest duration accepted: ten years (400 digits of days read as Infinity, so nothing ever expired). */
export const MAX_DURATION_MS = 3650 * 86400 * 1000;

/** Parses `90s`, `30m`, `1h`, `1d` or a number of seconds into milliseconds; null if malformed or above MAX_DURATION_MS. */
export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text);
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_SECONDS[m[2] ?? 's']! * 1000;
  return ms <= MAX_DURATION_MS ? ms : null;
}

/** A duration for people, largest units first, from parseDuration's units: 15h, 1d2h, 2h30m, 90 s as 1m30s, 0 as 0s. */
export function formatDuration(ms: number): string {
  let s = Math.round(ms / 1000);
  let out = '';
  for (const unit of ['d', 'h', 'm', 's']) {
    const secs = UNIT_SECONDS[unit]!;
    if (s >= secs) {
      out += `${Math.floor(s / secs)}${unit}`;
      s %= secs;
    }
  }
  return out || '0s';
}
