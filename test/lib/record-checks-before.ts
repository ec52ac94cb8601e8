// The record checks on a line's bytes as they were before src/core/record-checks.ts
// checked each line in one pass (main at 818ea67, records.ts and time.ts): the
// reference that test/record-checks.test.ts holds the new ones to. Not to be improved.
import { DASH, TAB, isDigitsAt } from '../../src/core/bytes.js';
import { MAX_HITS_DIGITS } from '../../src/core/hits.js';
import { findTabsAt } from '../../src/core/lines.js';
import { DECIDED_TAIL_BYTES, ID_BYTES, TS_BYTES, checkCarryRecord, checkJoined, checkUrlRecord, type LineRef } from '../../src/core/records.js';
// The calendar check did not change: the reference's timestampKey uses the one of time.ts.
import { isRealHour } from '../../src/core/time.js';

const TS_AT = ID_BYTES + 1;

/** True when `buf[start, end)` is hits: 1 to MAX_HITS_DIGITS digits. */
function isValidHitsAt(buf: Uint8Array, start: number, end: number): boolean {
  return end - start <= MAX_HITS_DIGITS && isDigitsAt(buf, start, end);
}

/**
 * Checks a URL-record line as checkUrlRecord does, filling `l.tabs` (5 slots) with
 * its TAB positions; returns checkUrlRecord's message for a bad line, or null.
 */
export function checkUrlRecordAt(l: LineRef): string | null {
  const b = l.buf;
  const s = l.start;
  const T = l.tabs;
  const ok =
    findTabsAt(b, s, l.end, T) === 6 &&
    T[0] === s + ID_BYTES &&
    T[1] === s + TS_AT + TS_BYTES &&
    l.end > T[4]! + 1 &&
    isIdAt(b, s) &&
    isDomainAt(b, T[3]! + 1, T[4]!) &&
    timestampKey(b, s + TS_AT, s + TS_AT + TS_BYTES) >= 0 &&
    isValidHitsAt(b, T[2]! + 1, T[3]!);
  return ok ? null : (checkUrlRecord(l.text().split('\t')) ?? 'malformed record');
}

/**
 * Checks a joined line as checkJoined does, filling `l.tabs` (8 slots) with its TAB
 * positions; returns checkJoined's message for a bad line, or null.
 */
export function checkJoinedAt(l: LineRef): string | null {
  const b = l.buf;
  const T = l.tabs;
  let ok = findTabsAt(b, l.start, l.end, T) === 9 && T[0] === l.start + ID_BYTES && T[2]! > T[1]! + 1 && isIdAt(b, l.start) && isDomainAt(b, T[0]! + 1, T[1]!);
  if (ok) {
    // sides: timestamp, updatetag, hits for c (fields 3, 5, 7) and i (4, 6, 8)
    const cAbsent = T[3]! - T[2]! === 2 && b[T[2]! + 1] === DASH;
    const iAbsent = T[4]! - T[3]! === 2 && b[T[3]! + 1] === DASH;
    ok =
      !(cAbsent && iAbsent) &&
      sideOk(b, cAbsent, T[2]! + 1, T[3]!, T[4]! + 1, T[5]!, T[6]! + 1, T[7]!) &&
      sideOk(b, iAbsent, T[3]! + 1, T[4]!, T[5]! + 1, T[6]!, T[7]! + 1, l.end);
  }
  return ok ? null : (checkJoined(l.text().split('\t')) ?? 'malformed record');
}

function sideOk(b: Uint8Array, absent: boolean, ts: number, tsEnd: number, tag: number, tagEnd: number, hits: number, hitsEnd: number): boolean {
  if (absent) return tagEnd === tag && hitsEnd - hits === 1 && b[hits] === DASH;
  return tsEnd - ts === TS_BYTES && isDigitsAt(b, ts, tsEnd) && isValidHitsAt(b, hits, hitsEnd);
}

/** True when b[from, to) is a non-empty domain as checkDomain has it (lower-case printable ASCII). */
export function isDomainAt(b: Uint8Array, from: number, to: number): boolean {
  if (to <= from) return false;
  for (let i = from; i < to; i++) {
    const c = b[i]!;
    if (c < 0x21 || c > 0x7e || (c >= 0x41 && c <= 0x5a)) return false;
  }
  return true;
}

/** True when b[from, from + 16) is 16 lower-case hex digits (a URL id). */
function isIdAt(b: Uint8Array, from: number): boolean {
  for (let i = from; i < from + ID_BYTES; i++) {
    const c = b[i]!;
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * Checks a carry-record line as checkCarryRecord does, filling `l.tabs` (5 slots)
 * for its URL record, which is `l.buf[l.start, l.end - DECIDED_TAIL_BYTES)`; returns
 * checkCarryRecord's message for a bad line, or null.
 */
export function checkCarryRecordAt(l: LineRef): string | null {
  const b = l.buf;
  const tab = l.end - DECIDED_TAIL_BYTES;
  const end = l.end;
  let ok = tab > l.start && b[tab] === TAB && timestampKey(b, tab + 1, end) >= 0;
  if (ok) {
    l.end = tab;
    ok = checkUrlRecordAt(l) === null;
    l.end = end;
  }
  return ok ? null : (checkCarryRecord(l.text().split('\t')) ?? 'malformed record');
}

// Real hours seen, direct-mapped on the hour's ten digits YYYYMMDDhh as a number.
const realHours = new Float64Array(1024).fill(-1);

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
  if (buf[start + 10]! > 0x35 || buf[start + 12]! > 0x35) return -1; // minute, second > 59
  const hour = Math.floor(v / 1e4);
  const slot = hour & 1023;
  if (realHours[slot] === hour) return v;
  if (!isRealHour(hour)) return -1;
  realHours[slot] = hour;
  return v;
}
