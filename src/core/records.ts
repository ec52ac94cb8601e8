// The shared record formats of docs/formats-and-rules.md "Streams": field names and positions, checks
// on field arrays (for messages and the stages that split lines), and the writers of
// records as bytes; record-checks.ts has the same checks on a line's bytes.
import { isValidHits } from './hits.js';
import { DASH, LF, TAB, compareBytes, isDigitsAt, latin1, putBytes, utf8, type ByteSink } from './bytes.js';
import { isValidTimestamp } from './time.js';
import { clipText } from './errors.js';

/**
 * analyze-dump's warning for a reflog whose last line has no LF; the cron runner,
 * which says it in its own words, leaves this one out when it repeats the stages' warnings.
 */
export const UNTERMINATED_WARNING = 'the last line has no newline (was the reflog cut off?); it was processed as a line';

/** URL record: `id timestamp updatetag hits domain url` (incoming, current, filtered, queue). */
export const URL_RECORD = ['id', 'timestamp', 'updatetag', 'hits', 'domain', 'url'] as const;
export const U_ID = 0;
export const U_TS = 1;
export const U_TAG = 2;
export const U_HITS = 3;
export const U_DOMAIN = 4;
export const U_URL = 5;

/** Joined record: `id domain url c_timestamp i_timestamp c_updatetag i_updatetag c_hits i_hits`. */
export const JOINED_RECORD = ['id', 'domain', 'url', 'c_timestamp', 'i_timestamp', 'c_updatetag', 'i_updatetag', 'c_hits', 'i_hits'] as const;
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

/** Bytes of an id and of a timestamp, in every record format. */
export const ID_BYTES = 16;
export const TS_BYTES = 14;
/** Where a URL record's timestamp starts in its line (it follows the id's TAB). */
export const TS_AT = ID_BYTES + 1;

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

/** What is wrong with a field that holds a CR, or null (streams end lines with LF alone). */
function crInField(f: string[], names: readonly string[]): string | null {
  const i = f.findIndex((x) => x.includes('\r'));
  return i < 0 ? null : `${names[i] ?? `field ${i + 1}`} contains a CR (lines end with LF alone; no field holds CR)`;
}

/** Lower-case printable ASCII, as the streams carry domains (punycode, no spaces). */
const DOMAIN_RE = /^[!-@[-~]+$/;

/** What is wrong with a domain as the streams carry it, or null. */
export function checkDomain(d: string): string | null {
  if (d.length === 0) return 'empty domain';
  return DOMAIN_RE.test(d) ? null : `bad domain '${clipText(d)}' (want lower-case ASCII, as analyze-dump writes it)`;
}

/** Checks the six fields of a URL record; returns what is wrong, or null. */
export function checkUrlRecord(f: string[]): string | null {
  if (f.length !== URL_RECORD.length) return `expected ${URL_RECORD.length} fields (${URL_RECORD.join(' ')}), got ${f.length}`;
  const cr = crInField(f, URL_RECORD);
  if (cr) return cr;
  if (!isValidId(f[U_ID]!)) return `bad id '${clip(f[U_ID]!)}' (want 16 lower-case hex digits)`;
  if (!isTs(f[U_TS]!)) return `bad timestamp '${clip(f[U_TS]!)}' (want YYYYMMDDhhmmss)`;
  // filter-url computes with it: caught here, an unreal time is named where it is, not
  // at the line of a later stage's input.
  if (!isValidTimestamp(f[U_TS]!)) return `bad timestamp '${f[U_TS]}': not a real date and time`;
  if (!isValidHits(f[U_HITS]!)) return `bad hits '${clip(f[U_HITS]!)}'`;
  const bad = checkDomain(f[U_DOMAIN]!);
  if (bad) return bad;
  if (f[U_URL]!.length === 0) return 'empty url';
  return null;
}

/** Checks the nine fields of a joined record; returns what is wrong, or null. */
export function checkJoined(f: string[]): string | null {
  if (f.length !== JOINED_RECORD.length) return `expected ${JOINED_RECORD.length} fields (${JOINED_RECORD.join(' ')}), got ${f.length}`;
  const cr = crInField(f, JOINED_RECORD);
  if (cr) return cr;
  if (!isValidId(f[J_ID]!)) return `bad id '${clip(f[J_ID]!)}' (want 16 lower-case hex digits)`;
  const bad = checkDomain(f[J_DOMAIN]!);
  if (bad) return bad;
  if (f[J_URL]!.length === 0) return 'empty url';
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
  private prev = new Uint8Array(ID_BYTES);
  private any = false;

  /** Checks the id at `buf[start, start + ID_BYTES)` (a checked record's) against the one before. */
  check(buf: Uint8Array, start: number): string | null {
    if (this.any) {
      const d = compareBytes(buf, start, this.prev, 0, ID_BYTES);
      if (d <= 0) {
        const id = latin1(buf, start, start + ID_BYTES);
        const prev = latin1(this.prev, 0, ID_BYTES);
        return d === 0 ? `duplicate id ${id} (input must be unique by id)` : `id ${id} is out of order after ${prev} (input must be sorted by id)`;
      }
    }
    for (let k = 0; k < ID_BYTES; k++) this.prev[k] = buf[start + k]!;
    this.any = true;
    return null;
  }
}

// --- records as bytes, without splitting or decoding them ---------------------------
// The streaming stages keep records as bytes and take fields as ranges between the
// TAB positions the checks of record-checks.ts fill in.

/**
 * A record line as the bytes `buf[start, end)` (no LF) and, once a check filled them
 * in, the positions of its TABs in `buf`. Stages point one at each line they read.
 */
export class LineRef {
  buf: Uint8Array = EMPTY;
  start = 0;
  end = 0;
  readonly tabs: Int32Array;

  /** `tabs`: how many TAB positions the line's format has (5 for a URL record, 8 for a joined one). */
  constructor(tabs: number) {
    this.tabs = new Int32Array(tabs);
  }

  set(buf: Uint8Array, start: number, end: number): this {
    this.buf = buf;
    this.start = start;
    this.end = end;
    return this;
  }

  /**
   * Where field `k` (a U_ or J_ number, as the line's format is) starts in `buf`, once
   * a check filled `tabs`; not the first field, which starts at `start`. Kept this
   * small so that a stage's record writer inlines every field it reads.
   */
  fieldStart(k: number): number {
    return this.tabs[k - 1]! + 1;
  }

  /** Where field `k` ends in `buf`, at the TAB after it; not the last field, which ends at `end`. */
  fieldEnd(k: number): number {
    return this.tabs[k]!;
  }

  /** The line as text (for messages). */
  text(): string {
    return utf8(this.buf, this.start, this.end);
  }
}

/**
 * The one writer of joined records: writes the joined line (with its LF) for one id
 * to `out`, from the current side `c` and/or the incoming side `i` (URL-record lines
 * checked by checkUrlRecordAt; at least one side present).
 */
export function writeJoined(out: ByteSink, c: LineRef | null, i: LineRef | null): void {
  // Every byte comes from the input lines: both together are longer than the output.
  out.reserve((c ? c.end - c.start : 0) + (i ? i.end - i.start : 0) + 8);
  const o = out.buf;
  // "domain TAB url" is one range: the joined record carries both in that order.
  const k = (i ?? c)!;
  let p = putBytes(o, out.pos, k.buf, k.start, k.start + TS_AT); // id TAB
  p = putBytes(o, p, k.buf, k.fieldStart(U_DOMAIN), k.end);
  o[p++] = TAB;
  p = c ? putBytes(o, p, c.buf, c.start + TS_AT, c.start + TS_AT + TS_BYTES) : dash(o, p);
  o[p++] = TAB;
  p = i ? putBytes(o, p, i.buf, i.start + TS_AT, i.start + TS_AT + TS_BYTES) : dash(o, p);
  o[p++] = TAB;
  if (c) p = putBytes(o, p, c.buf, c.fieldStart(U_TAG), c.fieldEnd(U_TAG));
  o[p++] = TAB;
  if (i) p = putBytes(o, p, i.buf, i.fieldStart(U_TAG), i.fieldEnd(U_TAG));
  o[p++] = TAB;
  p = c ? putBytes(o, p, c.buf, c.fieldStart(U_HITS), c.fieldEnd(U_HITS)) : dash(o, p);
  o[p++] = TAB;
  p = i ? putBytes(o, p, i.buf, i.fieldStart(U_HITS), i.fieldEnd(U_HITS)) : dash(o, p);
  o[p++] = LF;
  out.pos = p;
}

function dash(o: Uint8Array, p: number): number {
  o[p] = DASH;
  return p + 1;
}

/**
 * The one writer of URL records: a stage keeps one, points it at the byte ranges
 * that hold the fields of each record it writes (in any buffers), and writes it.
 */
export class UrlRecordWriter {
  /** The id at `urlBuf[idAt]`, and "domain TAB url" as `urlBuf[domainAt, urlEnd)`. */
  private urlBuf: Uint8Array = EMPTY;
  private idAt = 0;
  private domainAt = 0;
  private urlEnd = 0;
  /** The timestamp at `valBuf[tsAt]`, and the updatetag as `valBuf[tagAt, tagEnd)`. */
  private valBuf: Uint8Array = EMPTY;
  private tsAt = 0;
  private tagAt = 0;
  private tagEnd = 0;
  /** The hits as `hitsBuf[hitsAt, hitsEnd)`. */
  private hitsBuf: Uint8Array = EMPTY;
  private hitsAt = 0;
  private hitsEnd = 0;

  /** Takes the id from `b[id]` and domain and url from `b[domain, urlEnd)` ("domain TAB url"). */
  setUrl(b: Uint8Array, id: number, domain: number, urlEnd: number): this {
    this.urlBuf = b;
    this.idAt = id;
    this.domainAt = domain;
    this.urlEnd = urlEnd;
    return this;
  }

  /** Takes the timestamp from `b[ts]` and the updatetag from `b[tag, tagEnd)`. */
  setValues(b: Uint8Array, ts: number, tag: number, tagEnd: number): this {
    this.valBuf = b;
    this.tsAt = ts;
    this.tagAt = tag;
    this.tagEnd = tagEnd;
    return this;
  }

  /** Takes the hits from `b[from, to)`. */
  setHits(b: Uint8Array, from: number, to: number): this {
    this.hitsBuf = b;
    this.hitsAt = from;
    this.hitsEnd = to;
    return this;
  }

  /** The record's length in bytes, its LF not counted. */
  length(): number {
    return ID_BYTES + TS_BYTES + (this.tagEnd - this.tagAt) + (this.hitsEnd - this.hitsAt) + (this.urlEnd - this.domainAt) + 4;
  }

  /** Writes the record and its LF to `o` at `p` (room for length() + 1 bytes); returns where it ends. */
  put(o: Uint8Array, p: number): number {
    p = putBytes(o, p, this.urlBuf, this.idAt, this.idAt + ID_BYTES);
    o[p++] = TAB;
    p = putBytes(o, p, this.valBuf, this.tsAt, this.tsAt + TS_BYTES);
    o[p++] = TAB;
    p = putBytes(o, p, this.valBuf, this.tagAt, this.tagEnd);
    o[p++] = TAB;
    p = putBytes(o, p, this.hitsBuf, this.hitsAt, this.hitsEnd);
    o[p++] = TAB;
    p = putBytes(o, p, this.urlBuf, this.domainAt, this.urlEnd);
    o[p++] = LF;
    return p;
  }

  /** Writes the record and its LF to `out`. */
  write(out: ByteSink): void {
    out.reserve(this.length() + 1);
    out.pos = this.put(out.buf, out.pos);
  }

  /** Writes the record and its LF to `a` and to `b`, copying to `b` the bytes written to `a`. */
  writeBoth(a: ByteSink, b: ByteSink): void {
    const n = this.length() + 1;
    a.reserve(n);
    const from = a.pos;
    a.pos = this.put(a.buf, from);
    b.reserve(n);
    b.pos = putBytes(b.buf, b.pos, a.buf, from, a.pos);
  }
}

const EMPTY = new Uint8Array(0);

/**
 * Whether `b[start, end)` is a yacobot_id as the routed stream and domain_map carry
 * it (and as it may become a directory name): a positive decimal integer of at most
 * 18 digits, no sign or leading zero.
 */
export function isYacobotIdAt(b: Uint8Array, start: number, end: number): boolean {
  return end - start <= 18 && b[start] !== 48 && isDigitsAt(b, start, end);
}

// --- the carry of limit-domains ------------------------------------------------------

/**
 * Carry record: a URL record and, as its seventh field, `decided`: the --now of the
 * run that first decided to send the URL (14 digits). Sorted by id, unique. The URL
 * record is the line up to its last TAB; a URL decided again keeps its `decided`.
 */
export const CARRY_RECORD = [...URL_RECORD, 'decided'] as const;
export const C_DECIDED = 6;
/** The bytes `TAB decided` that end a carry record. */
export const DECIDED_TAIL_BYTES = TS_BYTES + 1;

/** Checks the seven fields of a carry record; returns what is wrong, or null. */
export function checkCarryRecord(f: string[]): string | null {
  if (f.length !== CARRY_RECORD.length) return `expected ${CARRY_RECORD.length} fields (${CARRY_RECORD.join(' ')}), got ${f.length}`;
  const d = f[C_DECIDED]!;
  if (!isTs(d) || !isValidTimestamp(d)) return `bad decided '${clip(d)}' (want a real time as YYYYMMDDhhmmss)`;
  return checkUrlRecord(f.slice(0, URL_RECORD.length));
}

/** Writes the URL record `b[start, end)` (no LF) with `decided` (14 bytes at `d[at]`) as a carry record, with LF, to `out`. */
export function writeCarry(out: ByteSink, b: Uint8Array, start: number, end: number, d: Uint8Array, at: number): void {
  out.reserve(end - start + DECIDED_TAIL_BYTES + 1);
  let p = putBytes(out.buf, out.pos, b, start, end);
  out.buf[p++] = TAB;
  p = putBytes(out.buf, p, d, at, at + TS_BYTES);
  out.buf[p++] = LF;
  out.pos = p;
}

/**
 * Rank line: how limit-domains orders a domain's records (a temporary file's line,
 * sorted by RecordSorter on its first 31 characters): `group TAB rank TAB id TAB
 * domain`. `group` is a 64-bit hash of the domain as 16 hex digits (records of one
 * domain are together; a collision puts two domains in one group, told apart by
 * `domain`); `rank` is 14 digits, smaller first.
 */
export const RANK_LINE = ['group', 'rank', 'id', 'domain'] as const;
/** Where the id starts in a rank line. */
export const RANK_ID_AT = ID_BYTES + 1 + TS_BYTES + 1;
/** Where the domain starts in a rank line. */
export const RANK_DOMAIN_AT = RANK_ID_AT + ID_BYTES + 1;

/**
 * Ranked carry record (limit-domains' spool, a temporary file): `rank TAB` and a
 * carry record, the rank as in a rank line.
 */
export const RANKED_PREFIX_BYTES = TS_BYTES + 1;
/** Where the updatetag starts in a ranked carry record. */
export const RANKED_TAG_AT = RANKED_PREFIX_BYTES + ID_BYTES + 1 + TS_BYTES + 1;
