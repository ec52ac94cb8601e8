// The checks of records.ts on a line's bytes, for the streaming stages, which never
// decode a line: one pass over the line checks each field's bytes as it looks for the
// field's TAB, and fills in the TAB positions the stage then takes the fields by. A
// line that fails gets the message of the check on its fields.
import { loadAddon } from './addons.js';
import { DASH, LF, TAB, findTab, isDigitsAt } from './bytes.js';
import { MAX_HITS_DIGITS } from './hits.js';
import { findTabsAt } from './lines.js';
import { DECIDED_TAIL_BYTES, ID_BYTES, TS_AT, TS_BYTES, checkCarryRecord, checkJoined, checkUrlRecord, isYacobotIdAt, type LineRef } from './records.js';
import { timestampKey } from './time.js';

const CR = 13;

/**
 * Checks a URL-record line as checkUrlRecord does, filling `l.tabs` (5 slots) with
 * its TAB positions; returns checkUrlRecord's message for a bad line, or null.
 */
export function checkUrlRecordAt(l: LineRef): string | null {
  if (isUrlRecordAt(l.buf, l.start, l.end, l.tabs)) return null;
  // A bad line's TABs are where findTabsAt puts them, as they were before the one pass.
  findTabsAt(l.buf, l.start, l.end, l.tabs);
  return checkUrlRecord(l.text().split('\t')) ?? 'malformed record';
}

/**
 * Checks a joined line as checkJoined does, filling `l.tabs` (8 slots) with its TAB
 * positions; returns checkJoined's message for a bad line, or null.
 */
export function checkJoinedAt(l: LineRef): string | null {
  if (isJoinedAt(l.buf, l.start, l.end, l.tabs)) return null;
  findTabsAt(l.buf, l.start, l.end, l.tabs);
  return checkJoined(l.text().split('\t')) ?? 'malformed record';
}

/**
 * Checks a carry-record line as checkCarryRecord does, filling `l.tabs` (5 slots)
 * for its URL record, which is `l.buf[l.start, l.end - DECIDED_TAIL_BYTES)`; returns
 * checkCarryRecord's message for a bad line, or null.
 */
export function checkCarryRecordAt(l: LineRef): string | null {
  const b = l.buf;
  const tab = l.end - DECIDED_TAIL_BYTES;
  const tail = tab > l.start && b[tab] === TAB && timestampKey(b, tab + 1, l.end) >= 0;
  if (tail && isUrlRecordAt(b, l.start, tab, l.tabs)) return null;
  if (tail) findTabsAt(b, l.start, tab, l.tabs);
  return checkCarryRecord(l.text().split('\t')) ?? 'malformed record';
}

/**
 * The stream splitter's one pass over a URL-record line from `s` in `b[.., limit)`:
 * the position of the LF that ends it when the line is one checkUrlRecord passes (its
 * TAB positions in `T`, 5 slots), else -1, and the caller finds the line's end and
 * checks it as usual (checkUrlRecordAt). Saves a search for the LF per line.
 */
export function scanUrlRecord(b: Uint8Array, s: number, limit: number, T: Int32Array): number {
  const end = urlRecordEnd(b, s, limit, T, LF);
  return end < limit ? end : -1;
}

/** As scanUrlRecord, for a joined line (checkJoined's; `T`: 8 slots). */
export function scanJoined(b: Uint8Array, s: number, limit: number, T: Int32Array): number {
  const end = joinedEnd(b, s, limit, T, LF);
  return end < limit ? end : -1;
}

/**
 * As scanUrlRecord, for logsaver's routed line "yacobot_id TAB URL record": the TAB
 * after the yacobot_id (a positive integer) into `lead[0]`, the URL record's TABs into `T`.
 */
export function scanRouted(b: Uint8Array, s: number, limit: number, lead: Int32Array, T: Int32Array): number {
  const t = findTab(b, s, limit);
  if (t < 0 || !isYacobotIdAt(b, s, t)) return -1;
  lead[0] = t;
  return scanUrlRecord(b, t + 1, limit, T);
}

/** The line formats a RecordScanner reads: a URL record, a joined record, a routed line. */
export type ScanKind = 'url' | 'joined' | 'routed';

const KINDS: Record<ScanKind, { code: number; tabs: number }> = { url: { code: 0, tabs: 5 }, joined: { code: 1, tabs: 8 }, routed: { code: 2, tabs: 6 } };

type ScanRecords = (buf: Uint8Array, from: number, limit: number, kind: number, out: Int32Array) => number;

/** The native scanner (src/native/scan.c), or null when it was not built; tests may turn it off. */
export const nativeScan: { fn: ScanRecords | null } = { fn: loadAddon<{ scanRecords: ScanRecords }>('scan')?.scanRecords ?? null };

/** Lines a native call checks at most. */
const LINES_AHEAD = 1024;

/**
 * The streaming stages' LineScan for one line format: scanUrlRecord, scanJoined or
 * scanRouted, the same answers, from the native addon a block of lines ahead when it
 * was built. The TABs of the line it passes go to `T` (and for a routed line, the one
 * after its yacobot_id to `lead[0]`).
 */
export class RecordScanner {
  private readonly code: number;
  private readonly tabs: number;
  /** The TABs that go to `T`: all but a routed line's first. */
  private readonly copies: number;
  private readonly ahead: Int32Array;
  /** The lines checked ahead: `ahead[at..]` is the next one's, which starts at `next`; `left` of them. */
  private at = 0;
  private left = 0;
  private next = -1;

  constructor(
    private readonly kind: ScanKind,
    private readonly T: Int32Array,
    private readonly lead: Int32Array = new Int32Array(1),
  ) {
    this.code = KINDS[kind].code;
    this.tabs = KINDS[kind].tabs;
    this.copies = kind === 'routed' ? this.tabs - 1 : this.tabs;
    if (T.length < this.copies) throw new RangeError(`a ${kind} line has ${this.copies} TABs, T holds ${T.length}`);
    this.ahead = new Int32Array(LINES_AHEAD * (this.tabs + 1));
  }

  /** The LineScan. */
  readonly scan = (b: Uint8Array, s: number, limit: number, fresh: boolean): number => {
    const native = nativeScan.fn;
    if (native === null) return this.scanHere(b, s, limit);
    if (fresh || s !== this.next || this.left === 0) {
      this.left = native(b, s, limit, this.code, this.ahead);
      this.at = 0;
      if (this.left === 0) {
        this.next = -1;
        return -1;
      }
    }
    const a = this.ahead;
    let at = this.at;
    const end = a[at++]!;
    if (this.code === 2) this.lead[0] = a[at++]!;
    const T = this.T;
    for (let k = 0; k < this.copies; k++) T[k] = a[at + k]!;
    this.at += this.tabs + 1;
    this.left--;
    this.next = end + 1;
    return end;
  };

  /** The line from `s`, checked in JavaScript. */
  private scanHere(b: Uint8Array, s: number, limit: number): number {
    if (this.kind === 'url') return scanUrlRecord(b, s, limit, this.T);
    if (this.kind === 'joined') return scanJoined(b, s, limit, this.T);
    return scanRouted(b, s, limit, this.lead, this.T);
  }
}

/** True when b[from, to) is a non-empty domain as checkDomain has it (lower-case printable ASCII). */
export function isDomainAt(b: Uint8Array, from: number, to: number): boolean {
  return to > from && scanDomain(b, from, to) === to;
}

/**
 * True when `b[s, e)` is a URL record checkUrlRecord passes; fills `T` (5 slots) with
 * its TAB positions (for a bad line, those found before the fault).
 */
function isUrlRecordAt(b: Uint8Array, s: number, e: number, T: Int32Array): boolean {
  return urlRecordEnd(b, s, e, T, TAB) === e;
}

/**
 * Where the URL record that starts at `s` ends: at `limit`, or with `lf` LF at the
 * first LF before it (with `lf` TAB, an LF is a byte of a text field, as checkUrlRecord
 * has it); -1 when the bytes up to there are not a record checkUrlRecord passes. Fills
 * `T` (5 slots) with its TAB positions (for a bad line, those found before the fault).
 * With `lf` LF, the stream splitter's one pass over a line (scanUrlRecord).
 */
function urlRecordEnd(b: Uint8Array, s: number, limit: number, T: Int32Array, lf: number): number {
  // id TAB timestamp TAB tag TAB hits TAB domain TAB url: at least 38 bytes.
  const tsEnd = TS_AT + TS_BYTES;
  if (limit - s <= tsEnd || !isIdAt(b, s) || b[s + ID_BYTES] !== TAB) return -1;
  T[0] = s + ID_BYTES;
  if (timestampKey(b, s + TS_AT, s + tsEnd) < 0 || b[s + tsEnd] !== TAB) return -1;
  T[1] = s + tsEnd;
  const tag = textEnd(b, s + tsEnd + 1, limit, lf);
  if (!isTabAt(b, tag, limit)) return -1;
  T[2] = tag;
  const hits = hitsEnd(b, tag + 1, limit);
  if (hits < 0 || !isTabAt(b, hits, limit)) return -1;
  T[3] = hits;
  const domain = domainEnd(b, hits + 1, limit);
  if (domain < 0) return -1;
  T[4] = domain;
  const end = textEnd(b, domain + 1, limit, lf);
  return end > domain + 1 && (end === limit || b[end] === LF) ? end : -1;
}

/**
 * True when `b[s, e)` is a joined record checkJoined passes; fills `T` (8 slots) with
 * its TAB positions (for a bad line, those found before the fault).
 */
function isJoinedAt(b: Uint8Array, s: number, e: number, T: Int32Array): boolean {
  return joinedEnd(b, s, e, T, TAB) === e;
}

/** As urlRecordEnd, for a joined record (checkJoined's; `T`: 8 slots). */
function joinedEnd(b: Uint8Array, s: number, limit: number, T: Int32Array, lf: number): number {
  if (limit - s <= ID_BYTES || !isIdAt(b, s) || b[s + ID_BYTES] !== TAB) return -1;
  T[0] = s + ID_BYTES;
  const domain = domainEnd(b, s + ID_BYTES + 1, limit);
  if (domain < 0) return -1;
  T[1] = domain;
  const url = textEnd(b, domain + 1, limit, lf);
  if (url <= domain + 1 || !isTabAt(b, url, limit)) return -1;
  T[2] = url;
  const cTs = sideTsEnd(b, url + 1, limit);
  if (cTs < 0) return -1;
  T[3] = cTs;
  const iTs = sideTsEnd(b, cTs + 1, limit);
  if (iTs < 0) return -1;
  T[4] = iTs;
  // A side is absent when its timestamp is "-": then its updatetag is empty and its hits "-".
  const cAbsent = cTs === url + 2;
  const iAbsent = iTs === cTs + 2;
  if (cAbsent && iAbsent) return -1;
  const cTag = textEnd(b, iTs + 1, limit, lf);
  if (!isTabAt(b, cTag, limit) || (cAbsent && cTag !== iTs + 1)) return -1;
  T[5] = cTag;
  const iTag = textEnd(b, cTag + 1, limit, lf);
  if (!isTabAt(b, iTag, limit) || (iAbsent && iTag !== cTag + 1)) return -1;
  T[6] = iTag;
  const cHits = sideHitsEnd(b, iTag + 1, limit, cAbsent);
  if (cHits < 0 || !isTabAt(b, cHits, limit)) return -1;
  T[7] = cHits;
  const end = sideHitsEnd(b, cHits + 1, limit, iAbsent);
  return end >= 0 && (end === limit || b[end] === LF) ? end : -1;
}

/** Where a side's timestamp from `i` ("-" or 14 digits) ends at its TAB in `b[.., e)`, or -1. */
function sideTsEnd(b: Uint8Array, i: number, e: number): number {
  const end = i < e && b[i] === DASH ? i + 1 : i + TS_BYTES;
  if (!isTabAt(b, end, e)) return -1;
  return end === i + 1 || isDigitsAt(b, i, end) ? end : -1;
}

/** Where a side's hits from `i` ("-" when the side is absent, else hits) end in `b[.., e)`, or -1. */
function sideHitsEnd(b: Uint8Array, i: number, e: number, absent: boolean): number {
  if (!absent) return hitsEnd(b, i, e);
  return i < e && b[i] === DASH ? i + 1 : -1;
}

/** Where the text field from `i` ends in `b[.., e)`: at its TAB or at the byte `lf` (LF, or TAB again), or at `e`; -1 at a CR. */
function textEnd(b: Uint8Array, i: number, e: number, lf: number): number {
  for (; i < e; i++) {
    const c = b[i]!;
    if (c <= CR) {
      if (c === TAB || c === lf) return i;
      if (c === CR) return -1;
    }
  }
  return e;
}

/** Where the hits from `i` (1 to MAX_HITS_DIGITS digits) end in `b[.., e)`, or -1. */
function hitsEnd(b: Uint8Array, i: number, e: number): number {
  const from = i;
  for (; i < e; i++) {
    const c = b[i]!;
    if (c < 48 || c > 57) break;
  }
  return i > from && i - from <= MAX_HITS_DIGITS ? i : -1;
}

/** Where the domain from `i` (checkDomain's bytes, at least one) ends at its TAB in `b[.., e)`, or -1. */
function domainEnd(b: Uint8Array, i: number, e: number): number {
  const end = scanDomain(b, i, e);
  return end > i && isTabAt(b, end, e) ? end : -1;
}

/** Where the bytes from `i` that a domain may hold end in `b[.., e)`. */
function scanDomain(b: Uint8Array, i: number, e: number): number {
  while (i < e && (BYTE_CLASS[b[i]!]! & DOMAIN_BYTE) !== 0) i++;
  return i;
}

/** True when `b[i]` is a TAB of the line that ends at `e`. */
function isTabAt(b: Uint8Array, i: number, e: number): boolean {
  return i < e && b[i] === TAB;
}

/** True when b[from, from + 16) is 16 lower-case hex digits (a URL id). */
function isIdAt(b: Uint8Array, from: number): boolean {
  // No branch per byte: digits and letters come in no order a branch predictor learns.
  let all = HEX_BYTE;
  for (let i = from; i < from + ID_BYTES; i++) all &= BYTE_CLASS[b[i]!]!;
  return all !== 0;
}

/** What each byte value may be: bits HEX_BYTE (a lower-case hex digit) and DOMAIN_BYTE (in a domain as checkDomain has it). */
const BYTE_CLASS = new Uint8Array(256);
const HEX_BYTE = 1;
const DOMAIN_BYTE = 2;
for (let c = 0x21; c <= 0x7e; c++) if (c < 0x41 || c > 0x5a) BYTE_CLASS[c] = DOMAIN_BYTE;
for (const c of Buffer.from('0123456789abcdef', 'latin1')) BYTE_CLASS[c] = BYTE_CLASS[c]! | HEX_BYTE;
