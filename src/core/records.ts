// The shared record formats of SPEC.md "Streams". Records travel as arrays of
// field strings (split on TAB); these helpers validate and format them.
import { isValidHits } from './hits.js';
import { findTabs } from './tsv.js';

/** URL record: `id timestamp updatetag hits domain url` (incoming, current, filtered, queue). */
export const URL_RECORD = ['id', 'timestamp', 'updatetag', 'hits', 'domain', 'url'] as const;
export const U_ID = 0;
export const U_TS = 1;
export const U_TAG = 2;
export const U_HITS = 3;
export const U_DOMAIN = 4;
export const U_URL = 5;

/** Joined record: `id domain url c_timestamp i_timestamp c_updatetag i_updatetag c_hits i_hits`. */
export const JOINED_RECORD = [
  'id',
  'domain',
  'url',
  'c_timestamp',
  'i_timestamp',
  'c_updatetag',
  'i_updatetag',
  'c_hits',
  'i_hits',
] as const;
export const J_ID = 0;
export const J_DOMAIN = 1;
export const J_URL = 2;
export const J_CTS = 3;
export const J_ITS = 4;
export const J_CTAG = 5;
export const J_ITAG = 6;
export const J_CHITS = 7;
export const J_IHITS = 8;

/** Timestamp and hits of an absent side in a joined record. */
export const MISSING = '-';

/** Routed record: `yacobot_id` then the six URL-record fields. */
export const ROUTED_RECORD = ['yacobot_id', ...URL_RECORD] as const;

const ID_RE = /^[0-9a-f]{16}$/;
const TS_RE = /^\d{14}$/;

export function isValidId(id: string): boolean {
  return id.length === 16 && ID_RE.test(id);
}

function isTs(ts: string): boolean {
  return ts.length === 14 && TS_RE.test(ts);
}

/** Checks the six fields of a URL record; returns what is wrong, or null. */
export function checkUrlRecord(f: string[]): string | null {
  if (f.length !== URL_RECORD.length) return `expected ${URL_RECORD.length} fields (${URL_RECORD.join(' ')}), got ${f.length}`;
  if (!isValidId(f[U_ID]!)) return `bad id '${clip(f[U_ID]!)}' (want 16 lower-case hex digits)`;
  if (!isTs(f[U_TS]!)) return `bad timestamp '${clip(f[U_TS]!)}' (want YYYYMMDDhhmmss)`;
  if (!isValidHits(f[U_HITS]!)) return `bad hits '${clip(f[U_HITS]!)}'`;
  if (f[U_DOMAIN]!.length === 0) return 'empty domain';
  if (f[U_URL]!.length === 0) return 'empty url';
  return null;
}

/** Checks the nine fields of a joined record; returns what is wrong, or null. */
export function checkJoined(f: string[]): string | null {
  if (f.length !== JOINED_RECORD.length) return `expected ${JOINED_RECORD.length} fields (${JOINED_RECORD.join(' ')}), got ${f.length}`;
  if (!isValidId(f[J_ID]!)) return `bad id '${clip(f[J_ID]!)}' (want 16 lower-case hex digits)`;
  const hasC = f[J_CTS] !== MISSING;
  const hasI = f[J_ITS] !== MISSING;
  if (!hasC && !hasI) return 'neither side present (both timestamps are -)';
  for (const [side, ts, hits, tag] of [
    ['c', f[J_CTS]!, f[J_CHITS]!, f[J_CTAG]!],
    ['i', f[J_ITS]!, f[J_IHITS]!, f[J_ITAG]!],
  ] as const) {
    if (ts === MISSING) {
      if (hits !== MISSING || tag !== '') return `${side} side is absent but has hits or updatetag`;
    } else {
      if (!isTs(ts)) return `bad ${side}_timestamp '${clip(ts)}'`;
      if (!isValidHits(hits)) return `bad ${side}_hits '${clip(hits)}'`;
    }
  }
  return null;
}

/** Formats fields as one TSV line with its LF. */
export function line(fields: readonly string[]): string {
  return fields.join('\t') + '\n';
}

/** Shortens a value for an error message. */
export function clip(s: string, max = 60): string {
  const safe = s.replace(/[\t\r\n]/g, ' ');
  return safe.length > max ? safe.slice(0, max) + '...' : safe;
}

/**
 * Enforces strictly ascending ids (sorted, unique) in one input; returns an error
 * message for a violation, or null.
 */
export class IdOrder {
  private prev = '';
  check(id: string): string | null {
    const prev = this.prev;
    this.prev = id;
    if (prev === '' || prev < id) return null;
    return prev === id ? `duplicate id ${id} (input must be unique by id)` : `id ${id} is out of order after ${prev} (input must be sorted by id)`;
  }
}

// --- the same checks on a whole line, without splitting it ------------------------
// The streaming stages keep records as lines and take fields as slices between the
// TAB positions these fill in; a line failing the fast path gets the array check's message.

/**
 * Checks a URL-record line as checkUrlRecord does, filling `T` (5 slots) with its
 * TAB positions; returns checkUrlRecord's message for a bad line, or null.
 */
export function checkUrlRecordLine(line: string, T: Int32Array): string | null {
  const nf = findTabs(line, T);
  const ok =
    nf === 6 &&
    T[0] === 16 &&
    T[1] === 31 &&
    T[3]! - T[2]! <= 31 &&
    T[4]! > T[3]! + 1 &&
    line.length > T[4]! + 1 &&
    isIdAt(line, 0) &&
    isDigitsAt(line, 17, 31) &&
    isDigitsAt(line, T[2]! + 1, T[3]!);
  return ok ? null : (checkUrlRecord(line.split('\t')) ?? 'malformed record');
}

/**
 * Checks a joined line as checkJoined does, filling `T` (8 slots) with its TAB
 * positions; returns checkJoined's message for a bad line, or null.
 */
export function checkJoinedLine(line: string, T: Int32Array): string | null {
  const nf = findTabs(line, T);
  let ok = nf === 9 && T[0] === 16 && isIdAt(line, 0);
  if (ok) {
    // sides: timestamp, updatetag, hits for c (fields 3, 5, 7) and i (4, 6, 8)
    const cAbsent = T[3]! - T[2]! === 2 && line.charCodeAt(T[2]! + 1) === 45;
    const iAbsent = T[4]! - T[3]! === 2 && line.charCodeAt(T[3]! + 1) === 45;
    ok =
      !(cAbsent && iAbsent) &&
      sideOk(line, cAbsent, T[2]! + 1, T[3]!, T[4]! + 1, T[5]!, T[6]! + 1, T[7]!) &&
      sideOk(line, iAbsent, T[3]! + 1, T[4]!, T[5]! + 1, T[6]!, T[7]! + 1, line.length);
  }
  return ok ? null : (checkJoined(line.split('\t')) ?? 'malformed record');
}

function sideOk(line: string, absent: boolean, ts: number, tsEnd: number, tag: number, tagEnd: number, hits: number, hitsEnd: number): boolean {
  if (absent) return tagEnd === tag && hitsEnd - hits === 1 && line.charCodeAt(hits) === 45;
  return tsEnd - ts === 14 && isDigitsAt(line, ts, tsEnd) && hitsEnd - hits <= 30 && isDigitsAt(line, hits, hitsEnd);
}

/** True when s[from, to) is non-empty and all ASCII digits. */
function isDigitsAt(s: string, from: number, to: number): boolean {
  if (to <= from) return false;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** True when s[from, from + 16) is 16 lower-case hex digits (a URL id). */
function isIdAt(s: string, from: number): boolean {
  for (let i = from; i < from + 16; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}
