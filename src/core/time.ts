// Timestamps are 14 digits YYYYMMDDhhmmss in the local time zone; durations are
// `90s`, `30m`, `1h`, `10h`, `1d` or plain seconds.

/** True when `ts` is 14 digits naming a real calendar date and time (no Feb 31, no 24:00). */
export function isValidTimestamp(ts: string): boolean {
  // A reflog carries the same second on many consecutive lines.
  if (ts === lastValidTs) return true;
  if (ts.length !== 14) return false;
  for (let i = 0; i < 14; i++) {
    const c = ts.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  const two = (i: number) => (ts.charCodeAt(i) - 48) * 10 + ts.charCodeAt(i + 1) - 48;
  const y = two(0) * 100 + two(2);
  const mo = two(4);
  const d = two(6);
  const h = two(8);
  const mi = two(10);
  const s = two(12);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return false;
  if (d > daysInMonth(y, mo)) return false;
  lastValidTs = ts;
  return true;
}

let lastValidTs = '';

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
