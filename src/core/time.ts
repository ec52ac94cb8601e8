// Timestamps are 14 digits YYYYMMDDhhmmss in the local time zone; durations are
// `90s`, `30m`, `1h`, `10h`, `1d` or plain seconds.

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

// Local-time conversion per hour prefix ("YYYYMMDDhh") is cached: a reflog spans few hours.
const hourCache = new Map<string, number>();

/** Milliseconds since the epoch of a valid timestamp read in the local time zone. */
export function timestampToMs(ts: string): number {
  const hour = ts.slice(0, 10);
  let base = hourCache.get(hour);
  if (base === undefined) {
    base = new Date(+ts.slice(0, 4), +ts.slice(4, 6) - 1, +ts.slice(6, 8), +ts.slice(8, 10), 0, 0, 0).getTime();
    if (hourCache.size > 100_000) hourCache.clear();
    hourCache.set(hour, base);
  }
  return base + (+ts.slice(10, 12) * 60 + +ts.slice(12, 14)) * 1000;
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
