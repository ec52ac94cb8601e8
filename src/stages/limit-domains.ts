// limit-domains: at most N URL records of a domain go out per run; the rest wait in the carry.
import * as fs from 'node:fs';
import * as os from 'node:os';
import { pathOption, refuseOwnStreams, type Count, type StageContext, type StageDef } from '../cli/stage.js';
import type { Output } from '../cli/output.js';
import { LF, TAB, compareBytes, digitsValue, latin1, putBytes, putHex32, type ByteSink } from '../core/bytes.js';
import { DataError, UsageError } from '../core/errors.js';
import { regularFileFor } from '../core/fifos.js';
import { DEFAULT_MAX_LINE, FileLineReader } from '../core/lines.js';
import { countOption } from '../core/numbers.js';
import {
  DECIDED_TAIL_BYTES,
  ID_BYTES,
  IdOrder,
  LineRef,
  RANKED_PREFIX_BYTES,
  RANK_DOMAIN_AT,
  RANK_ID_AT,
  TS_BYTES,
  URL_RECORD,
  U_DOMAIN,
  U_HITS,
  checkCarryRecordAt,
  checkUrlRecordAt,
  RANKED_TAG_AT,
} from '../core/records.js';
import { DEFAULT_CARRY_KEEP } from '../core/defaults.js';
import { parseBudget } from '../core/size.js';
import { RecordBatch, RecordSorter, SPILL_PREFIX, type PackedRecords } from '../core/sorter.js';
import { SPOOL_PREFIX, Spool, type LineSource } from '../core/spool.js';
import { removeStaleTemps } from '../core/temps.js';
import { formatTimestamp, isValidTimestamp, parseDuration, timestampMsAt, timestampToMs } from '../core/time.js';
import { AtomicFileWriter } from '../core/writers.js';

/** How many of the capped domains the summary names (those that held back the most). */
export const TOP_CAPPED = 10;

export interface LimitDomainsOptions {
  maxPerDomain: number;
  carry: string;
  carryOut: string;
  now: string;
  nowMs: number;
  carryKeepMs: number;
  memoryBytes: number;
  tmpDir: string;
}

// A record's rank within its domain, 14 digits, smaller first: carried records by their
// decision (seconds since the epoch, below CARRIED_RANKS), then fresh ones by hits, most first.
const MAX_RANK = 1e14 - 1;
const CARRIED_RANKS = 1e12;

/** The rank of a carried record decided at `decidedMs`: older first, and before every fresh one. */
export function carriedRank(decidedMs: number): number {
  return Math.min(CARRIED_RANKS - 1, Math.max(0, Math.floor(decidedMs / 1000)));
}

/** The rank of a fresh record with the hits `b[from, to)`: most viewed first (beyond 99 * 10^12 hits, alike), after every carried one. */
export function freshRank(b: Uint8Array, from: number, to: number): number {
  const hits = to - from < 15 ? digitsValue(b, from, to) : Infinity;
  return MAX_RANK - Math.min(hits, MAX_RANK - CARRIED_RANKS);
}

/** Two 32-bit hashes of `b[from, to)` (FNV-1a and a multiply-shift one): a domain's group in the ranking. */
export function domainHashes(b: Uint8Array, from: number, to: number, out: Uint32Array): void {
  let h1 = 0x811c9dc5;
  let h2 = 0x9747b28c;
  for (let i = from; i < to; i++) {
    const c = b[i]!;
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
    h2 ^= h2 >>> 15;
  }
  h2 = Math.imul(h2 ^ (h2 >>> 13), 0x5bd1e995);
  out[0] = h1 >>> 0;
  out[1] = (h2 ^ (h2 >>> 16)) >>> 0;
}

/**
 * Counts records per domain in a fixed table of counters, one per hash bucket: a
 * domain whose bucket holds at most N records is under its cap for sure; the records
 * of the others are ranked, and counted exactly there. Memory is the table's.
 */
class DomainCounter {
  private readonly table: Uint32Array;
  private readonly shift: number;
  private readonly h = new Uint32Array(2);
  max = 0;

  constructor(
    bytes: number,
    private readonly cap: number,
  ) {
    let bits = 12;
    while (bits < 24 && 4 << (bits + 1) <= bytes) bits++;
    this.table = new Uint32Array(1 << bits);
    this.shift = 32 - bits;
  }

  add(b: Uint8Array, from: number, to: number): void {
    const k = this.bucket(b, from, to);
    const n = ++this.table[k]!;
    if (n > this.max) this.max = n;
  }

  /** Whether the domain `b[from, to)` may be over its cap (its bucket is). */
  over(b: Uint8Array, from: number, to: number): boolean {
    return this.table[this.bucket(b, from, to)]! > this.cap;
  }

  get anyOver(): boolean {
    return this.max > this.cap;
  }

  private bucket(b: Uint8Array, from: number, to: number): number {
    domainHashes(b, from, to, this.h);
    return Math.imul(this.h[0]!, 0x9e3779b1) >>> this.shift;
  }
}

/** The counts of a run, for its summary line. */
class LimitCounts {
  filteredIn = 0;
  carriedIn = 0;
  carriedAgain = 0;
  carryExpired = 0;
  sent = 0;
  carriedOut = 0;
  cappedTotal = 0;
  /** The domains held back the most: domain -> records carried out, at most TOP_CAPPED. */
  capped = new Map<string, number>();
  committed = false;
  spoolSpilled = false;
  sortRuns = 0;
  /** The oldest `decided` of the records carried out (14 bytes), when there are any. */
  readonly oldest = new Uint8Array(TS_BYTES);

  /** Counts a record carried out, decided at `b[at, at + 14)`. */
  carried(b: Uint8Array, at: number): void {
    if (this.carriedOut === 0 || compareBytes(b, at, this.oldest, 0, TS_BYTES) < 0) this.oldest.set(b.subarray(at, at + TS_BYTES));
    this.carriedOut++;
  }

  /** Notes a domain that held back `held` records, keeping the TOP_CAPPED that held back most. */
  noteCapped(domain: string, held: number): void {
    this.cappedTotal++;
    this.capped.set(domain, held);
    if (this.capped.size <= TOP_CAPPED) return;
    let least: string | null = null;
    for (const [d, n] of this.capped) if (least === null || n < this.capped.get(least)! || (n === this.capped.get(least)! && d > least)) least = d;
    this.capped.delete(least!);
  }

  report(o: LimitDomainsOptions): Record<string, Count> {
    const top = [...this.capped].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    return {
      now: o.now,
      max_per_domain: o.maxPerDomain,
      filtered_in: this.filteredIn,
      carried_in: this.carriedIn,
      carried_again: this.carriedAgain,
      carry_expired: this.carryExpired,
      sent: this.sent,
      // Records in the new carry: none unless it was renamed into place.
      carried_out: this.committed ? this.carriedOut : 0,
      capped_domains: Object.fromEntries(top),
      capped_domains_total: this.cappedTotal,
      ...(this.committed && this.carriedOut > 0 && { carry_oldest_decided: latin1(this.oldest, 0, TS_BYTES) }),
      spool_spilled: this.spoolSpilled,
      sort_runs: this.sortRuns,
    };
  }
}

const DECIDED_AT = 1 - DECIDED_TAIL_BYTES; // where `decided` starts, from a carry record's end

/**
 * Pass one: filtered_log (stdin) merged by id with the carry, each record written to
 * the spool with its rank (a ranked carry record) and counted for its domain. A
 * carried record not decided again whose decision is --carry-keep old is dropped.
 */
class CarryMerge {
  private readonly carryLine = new LineRef(URL_RECORD.length - 1);
  private carry: LineRef | null = null;
  private readonly carryOrder = new IdOrder();
  private readonly inOrder = new IdOrder();
  private readonly nowBytes: Buffer;
  private readonly rank = new Uint8Array(TS_BYTES);

  constructor(
    private readonly o: LimitDomainsOptions,
    private readonly reader: FileLineReader | null,
    private readonly spool: Spool,
    private readonly domains: DomainCounter,
    private readonly n: LimitCounts,
  ) {
    this.nowBytes = Buffer.from(o.now, 'latin1');
    this.nextCarry();
  }

  /** Merges the checked filtered_log record `l` (line `lineNo` of `file`). */
  feed(l: LineRef, file: string, lineNo: number): void {
    const bad = checkUrlRecordAt(l) ?? this.inOrder.check(l.buf, l.start);
    if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
    let d = 1;
    while (this.carry !== null && (d = compareBytes(this.carry.buf, this.carry.start, l.buf, l.start, ID_BYTES)) < 0) this.carriedOnly();
    this.n.filteredIn++;
    if (this.carry !== null && d === 0) {
      // Decided again: this hour's values, the first decision's age.
      const c = this.carry;
      this.emit(l, l.end, c.buf, c.end + DECIDED_AT, carriedRank(timestampMsAt(c.buf, c.end + DECIDED_AT)));
      this.n.carriedAgain++;
      this.nextCarry();
    } else {
      this.emit(l, l.end, this.nowBytes, 0, freshRank(l.buf, l.fieldStart(U_HITS), l.fieldEnd(U_HITS)));
    }
  }

  /** The carried records after the last filtered_log one. */
  finish(): void {
    while (this.carry !== null) this.carriedOnly();
  }

  private carriedOnly(): void {
    const c = this.carry!;
    const decidedMs = timestampMsAt(c.buf, c.end + DECIDED_AT);
    if (this.o.nowMs - decidedMs >= this.o.carryKeepMs) this.n.carryExpired++;
    else this.emit(c, c.end - DECIDED_TAIL_BYTES, c.buf, c.end + DECIDED_AT, carriedRank(decidedMs));
    this.nextCarry();
  }

  /**
   * Writes `rank TAB url-record TAB decided` to the spool and counts its domain: the URL
   * record is `l.buf[l.start, urlEnd)` (checked, its TABs in `l`), decided `d[dAt, dAt + 14)`.
   */
  private emit(l: LineRef, urlEnd: number, d: Uint8Array, dAt: number, rank: number): void {
    const s = this.spool;
    s.reserve(urlEnd - l.start + RANKED_PREFIX_BYTES + DECIDED_TAIL_BYTES + 1);
    putRank(this.rank, rank);
    let p = putBytes(s.buf, s.pos, this.rank, 0, TS_BYTES);
    s.buf[p++] = TAB;
    p = putBytes(s.buf, p, l.buf, l.start, urlEnd);
    s.buf[p++] = TAB;
    p = putBytes(s.buf, p, d, dAt, dAt + TS_BYTES);
    s.buf[p++] = LF;
    s.pos = p;
    this.domains.add(l.buf, l.fieldStart(U_DOMAIN), l.fieldEnd(U_DOMAIN));
  }

  private nextCarry(): void {
    this.carry = null;
    const l = this.carryLine;
    if (this.reader === null || !this.reader.next(l)) return;
    const bad = checkCarryRecordAt(l) ?? this.carryOrder.check(l.buf, l.start);
    if (bad) throw new DataError('BAD_CARRY', bad, { file: this.o.carry, line: this.reader.lineNo });
    this.n.carriedIn++;
    this.carry = l;
  }
}

/** Writes `rank` as 14 digits to `to`. */
function putRank(to: Uint8Array, rank: number): void {
  for (let k = TS_BYTES - 1; k >= 0; k--) {
    const q = Math.floor(rank / 10);
    to[k] = 48 + (rank - q * 10);
    rank = q;
  }
}

/**
 * Feeds lines to a RecordSorter through a packed batch of about 1 MiB: `line()` gives
 * room for one, `commit()` adds it with its key.
 */
class SorterFeed {
  private readonly batch = new RecordBatch(1 << 20, 1 << 14);
  private reuse: PackedRecords | undefined;

  constructor(readonly sorter: RecordSorter) {}

  /** The batch's buffer, with room for `n` bytes at its `pos`. */
  room(n: number): RecordBatch {
    this.batch.reserve(n);
    return this.batch;
  }

  commit(end: number, hi: number, lo: number, ts: number): void {
    this.batch.commit(end, hi, lo, ts);
    if (this.batch.pos >= 1 << 20) this.flush();
  }

  flush(): void {
    this.reuse = this.batch.take(this.reuse);
    this.sorter.addPacked(this.reuse);
  }
}

/** The value of the 8 lower-case hex digits at `b[at]`. */
function hex8(b: Uint8Array, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) {
    const c = b[i]!;
    v = v * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return v;
}

/** Where the TAB after `b[from]` is (before `end`), or `end`. */
function tabAfter(b: Uint8Array, from: number, end: number): number {
  while (from < end && b[from] !== TAB) from++;
  return from;
}

/** Where the domain of a ranked carry record `b[start, end)` is, as [from, to) in `at`. */
function domainOf(b: Uint8Array, start: number, end: number, at: Int32Array): void {
  const tag = start + RANKED_TAG_AT;
  const hits = tabAfter(b, tag, end) + 1;
  const domain = tabAfter(b, hits, end) + 1;
  at[0] = domain;
  at[1] = tabAfter(b, domain, end);
}

/**
 * Pass two, when some domain may be over its cap: the records of such domains, as
 * rank lines, sorted by (domain group, rank, id); the first N of each domain are
 * chosen, and their ids sorted for pass three.
 */
class DomainRanking {
  private readonly h = new Uint32Array(2);
  private readonly at = new Int32Array(2);
  private readonly ranked: SorterFeed;
  readonly chosen: SorterFeed;

  constructor(
    private readonly o: LimitDomainsOptions,
    private readonly domains: DomainCounter,
    private readonly n: LimitCounts,
  ) {
    this.ranked = new SorterFeed(new RecordSorter({ memoryBytes: Math.floor(o.memoryBytes / 2), tmpDir: o.tmpDir }));
    this.chosen = new SorterFeed(new RecordSorter({ memoryBytes: Math.floor(o.memoryBytes / 4), tmpDir: o.tmpDir }));
  }

  dispose(): void {
    this.ranked.sorter.dispose();
    this.chosen.sorter.dispose();
  }

  /** Reads the spool and ranks the records of the domains that may be over their cap. */
  async rank(spool: LineSource): Promise<void> {
    const line = { buf: EMPTY as Uint8Array, start: 0, end: 0 };
    for (let k = 1; spool.next(line); k++) {
      const { buf: b, start, end } = line;
      domainOf(b, start, end, this.at);
      const [from, to] = [this.at[0]!, this.at[1]!];
      if (this.domains.over(b, from, to)) this.addRanked(b, start, from, to);
      if ((k & 0xffff) === 0) await turn();
    }
    spool.close();
    this.ranked.flush();
    this.n.sortRuns += this.ranked.sorter.spilledRuns;
    let chunks = 0;
    await this.ranked.sorter.drain((chunk) => {
      this.choose(chunk);
      return (++chunks & 15) === 0 ? turn() : undefined;
    });
    this.closeGroup();
    this.chosen.flush();
    this.n.sortRuns += this.chosen.sorter.spilledRuns;
  }

  /** Writes the rank line `group TAB rank TAB id TAB domain` of the ranked record at `b[start]`. */
  private addRanked(b: Uint8Array, start: number, from: number, to: number): void {
    domainHashes(b, from, to, this.h);
    const r = this.ranked.room(RANK_DOMAIN_AT + (to - from) + 1);
    let p = putHex32(r.buf, r.pos, this.h[0]!);
    p = putHex32(r.buf, p, this.h[1]!);
    r.buf[p++] = TAB;
    p = putBytes(r.buf, p, b, start, start + RANKED_PREFIX_BYTES + ID_BYTES); // rank TAB id
    r.buf[p++] = TAB;
    p = putBytes(r.buf, p, b, from, to);
    r.buf[p++] = LF;
    this.ranked.commit(p, this.h[0]!, this.h[1]!, digitsValue(b, start, start + TS_BYTES));
  }

  // The group being counted: its first 16 bytes, and its domains' counts (one domain,
  // bar a hash collision).
  private readonly group = new Uint8Array(ID_BYTES);
  private inGroup = false;
  private curDomain = '';
  private curCount = 0;
  private readonly others = new Map<string, number>();

  /** Chooses from a chunk of sorted rank lines: the first N of each domain go to `chosen`. */
  private choose(chunk: Buffer): void {
    for (let s = 0; s < chunk.length; ) {
      const e = chunk.indexOf(LF, s);
      if (!this.inGroup || compareBytes(chunk, s, this.group, 0, ID_BYTES) !== 0) {
        this.closeGroup();
        this.group.set(chunk.subarray(s, s + ID_BYTES));
        this.inGroup = true;
      }
      if (this.countDomain(chunk, s + RANK_DOMAIN_AT, e) <= this.o.maxPerDomain) this.addChosen(chunk, s + RANK_ID_AT);
      s = e + 1;
    }
  }

  /** Counts one more record of the domain `b[from, to)` in the group; returns its count. */
  private countDomain(b: Uint8Array, from: number, to: number): number {
    const same = this.curDomain.length === to - from && this.curDomain === latin1(b, from, to);
    if (same) return ++this.curCount;
    if (this.curCount > 0) this.others.set(this.curDomain, this.curCount);
    this.curDomain = latin1(b, from, to);
    this.curCount = (this.others.get(this.curDomain) ?? 0) + 1;
    return this.curCount;
  }

  /** Ends the group: its domains over the cap are noted. */
  private closeGroup(): void {
    if (this.curCount > 0) this.others.set(this.curDomain, this.curCount);
    for (const [d, count] of this.others) if (count > this.o.maxPerDomain) this.n.noteCapped(d, count - this.o.maxPerDomain);
    this.others.clear();
    this.curDomain = '';
    this.curCount = 0;
    this.inGroup = false;
  }

  /** Adds the id at `b[at]` to the chosen ones (as `id TAB 0...0`, sorted by id). */
  private addChosen(b: Uint8Array, at: number): void {
    const r = this.chosen.room(ID_BYTES + 1 + TS_BYTES + 1);
    let p = putBytes(r.buf, r.pos, b, at, at + ID_BYTES);
    r.buf[p++] = TAB;
    r.buf.fill(48, p, p + TS_BYTES);
    p += TS_BYTES;
    r.buf[p++] = LF;
    this.chosen.commit(p, hex8(b, at), hex8(b, at + 8), 0);
  }
}

const EMPTY = new Uint8Array(0);

/** One turn of the event loop: a stop signal that came during the long synchronous passes is acted on. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Pass three: the spool read in id order; a record goes to stdout unless its domain
 * may be over its cap and it was not chosen, and then to the carry.
 */
class Dispatch {
  private readonly line = { buf: EMPTY as Uint8Array, start: 0, end: 0 };
  private readonly at = new Int32Array(2);
  private have = false;
  private k = 0;

  constructor(
    private readonly spool: LineSource,
    private readonly domains: DomainCounter,
    private readonly out: Output,
    private readonly carry: ByteSink,
    private readonly n: LimitCounts,
  ) {
    this.have = spool.next(this.line);
  }

  /** Dispatches the spool's records up to the chosen id at `b[at]`, which goes out. */
  async upTo(b: Uint8Array, at: number): Promise<void> {
    while (this.have && compareBytes(this.line.buf, this.line.start + RANKED_PREFIX_BYTES, b, at, ID_BYTES) < 0) await this.one(false);
    if (!this.have) throw new Error('a chosen record is not in the spool');
    await this.one(true);
  }

  /** Dispatches the rest of the spool. */
  async rest(): Promise<void> {
    while (this.have) await this.one(false);
    this.spool.close();
  }

  private async one(chosen: boolean): Promise<void> {
    const { buf: b, start, end } = this.line;
    domainOf(b, start, end, this.at);
    const from = start + RANKED_PREFIX_BYTES;
    if (chosen || !this.domains.over(b, this.at[0]!, this.at[1]!)) {
      writeLine(this.out, b, from, end - DECIDED_TAIL_BYTES);
      this.n.sent++;
    } else {
      writeLine(this.carry, b, from, end);
      this.n.carried(b, end - TS_BYTES);
    }
    this.have = this.spool.next(this.line);
    if ((++this.k & 0x3fff) === 0) await this.out.flushIfFull();
    if ((this.k & 0xffff) === 0) await turn();
  }
}

/** Writes `b[from, to)` and LF to `out`. */
function writeLine(out: ByteSink, b: Uint8Array, from: number, to: number): void {
  out.reserve(to - from + 1);
  const p = putBytes(out.buf, out.pos, b, from, to);
  out.buf[p] = LF;
  out.pos = p + 1;
}

/** The carry as a line reader, or null when the file does not exist (an empty carry). */
async function openCarry(ctx: StageContext, file: string): Promise<FileLineReader | null> {
  const source = await regularFileFor(file, (fn) => ctx.onExit(fn), DEFAULT_MAX_LINE + DECIDED_TAIL_BYTES);
  if (!fs.existsSync(source)) return null;
  const r = new FileLineReader(source, 1 << 20, file, DEFAULT_MAX_LINE + DECIDED_TAIL_BYTES);
  ctx.onExit(() => r.close());
  return r;
}

export const limitDomains: StageDef<LimitDomainsOptions> = {
  name: 'limit-domains',
  summary: 'Send at most N URL records per domain this run; carry the rest over.',
  usage: `
Reads filtered_log (URL records, sorted by id, unique) and the carry (--carry
FILE: carry records "id timestamp updatetag hits domain url decided", sorted by
id; a missing file is an empty carry), merges them by id, and writes at most
--max-per-domain records of each domain to stdout (URL records, sorted by id).
Every other record goes to --carry-out (carry records, sorted by id).

  decided   the --now of the run that first decided to send the URL; a URL
            in both inputs (decided again) gets filtered_log's values and
            keeps the carry's decided
  order     within a domain: carried records first, oldest decided first;
            then the others, most hits first (beyond 99*10^12, alike); ties
            by id
  expiry    a carried record not decided again whose decided is --carry-keep
            or more before --now is dropped, and counted (carry_expired)

Timestamps are read in the local time zone (set TZ to choose). Durations: 90s,
30m, 1h, 10h, 1d, or seconds. --carry-out is written to a temporary file and
renamed over FILE (which may be --carry itself) only at a clean end.
Summary: filtered_in + carried_in - carried_again = sent + carried_out +
carry_expired; capped_domains names the ${TOP_CAPPED} domains that held back the most.

Buffers: the merged records up to a quarter of --memory (beyond it, in a file
in --tmp), read two or three times; those of domains over their cap are
sorted within half of --memory, spilling to --tmp. Output starts at the end of
input.`,
  options(cmd) {
    cmd
      .requiredOption('--max-per-domain <n>', 'the most records of one domain sent this run (required)')
      .requiredOption('--carry <file>', 'the carry to merge (required; a missing file is an empty carry)')
      .requiredOption('--carry-out <file>', 'where to write the next carry (required)')
      .option('--now <YYYYMMDDhhmmss>', 'the time of this run (default: the wall clock, local time)')
      .option('--carry-keep <duration>', 'drop a carried record decided this long ago', DEFAULT_CARRY_KEEP)
      .option('--memory <size>', 'memory budget for the merged records and sorting, e.g. 64M, 1G', '256M')
      .option('--tmp <dir>', 'directory for spill files', os.tmpdir());
  },
  normalize(raw) {
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    const keep = parseDuration(String(raw.carryKeep));
    if (keep === null) throw new UsageError(`--carry-keep wants a duration like 90s, 30m, 1h, 1d or seconds (at most 3650d), got '${raw.carryKeep}'`);
    const memory = parseBudget(String(raw.memory));
    if (typeof memory !== 'number') throw new UsageError(`--memory ${memory.error}`);
    return {
      maxPerDomain: countOption('--max-per-domain', raw.maxPerDomain, 1, 2 ** 31),
      carry: pathOption('--carry', raw.carry),
      carryOut: pathOption('--carry-out', raw.carryOut),
      now,
      nowMs: timestampToMs(now),
      carryKeepMs: keep,
      memoryBytes: memory,
      tmpDir: pathOption('--tmp', raw.tmp, 'a directory name'),
    };
  },
  async run(ctx, o) {
    refuseOwnStreams('--carry', o.carry, ctx.inputPath);
    refuseOwnStreams('--carry-out', o.carryOut, ctx.inputPath);
    // What runs that were SIGKILLed left in --tmp goes before this one needs the space.
    removeStaleTemps(o.tmpDir, SPILL_PREFIX);
    removeStaleTemps(o.tmpDir, SPOOL_PREFIX);
    const n = new LimitCounts();
    ctx.reportCounts(() => n.report(o));
    const next = new AtomicFileWriter(o.carryOut);
    ctx.onExit(() => next.abort());
    const spool = new Spool(Math.floor(o.memoryBytes / 4), o.tmpDir);
    ctx.onExit(() => spool.dispose());
    const domains = new DomainCounter(Math.floor(o.memoryBytes / 16), o.maxPerDomain);
    await mergeInputs(ctx, o, spool, domains, n);
    await limitOutput(ctx, o, spool, domains, n, next);
    await ctx.out.flush();
    next.commit();
    n.committed = true;
  },
};

/** Pass one: stdin and the carry merged into the spool. */
async function mergeInputs(ctx: StageContext, o: LimitDomainsOptions, spool: Spool, domains: DomainCounter, n: LimitCounts): Promise<void> {
  const merge = new CarryMerge(o, await openCarry(ctx, o.carry), spool, domains, n);
  const l = new LineRef(URL_RECORD.length - 1);
  await ctx.eachLine((buf, start, end, lineNo) => merge.feed(l.set(buf, start, end), ctx.inputName, lineNo));
  merge.finish();
  spool.finish();
  n.spoolSpilled = spool.spilled;
}

/** Passes two and three: the domains over their cap ranked (if any), then every record sent or carried. */
async function limitOutput(ctx: StageContext, o: LimitDomainsOptions, spool: Spool, domains: DomainCounter, n: LimitCounts, next: ByteSink): Promise<void> {
  const out = ctx.out;
  if (!domains.anyOver) {
    await new Dispatch(spool.reader(), domains, out, next, n).rest();
    return;
  }
  const ranking = new DomainRanking(o, domains, n);
  ctx.onExit(() => ranking.dispose());
  await ranking.rank(spool.reader());
  const dispatch = new Dispatch(spool.reader(), domains, out, next, n);
  await ranking.chosen.sorter.drain(async (chunk) => {
    for (let s = 0; s < chunk.length; s += ID_BYTES + 1 + TS_BYTES + 1) await dispatch.upTo(chunk, s);
  });
  await dispatch.rest();
}
