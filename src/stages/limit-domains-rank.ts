// limit-domains' ranking: a record's rank within its domain; which domains may be over
// their cap (a fixed table of counters per hash bucket); the records of those domains
// ranked by (domain, rank) and the first N of each chosen (pass two); then each record
// dispatched to stdout or the carry (pass three).
import type { Output } from '../cli/output.js';
import { LF, TAB, compareBytes, digitsValue, latin1, putBytes, putHex32, type ByteSink } from '../core/bytes.js';
import { DECIDED_TAIL_BYTES, ID_BYTES, RANKED_PREFIX_BYTES, RANKED_TAG_AT, RANK_DOMAIN_AT, RANK_ID_AT, TS_BYTES } from '../core/records.js';
import { RecordBatch, RecordSorter, type PackedRecords } from '../core/sorter.js';
import type { LineSource } from '../core/spool.js';

/** What the ranking reads of the stage's options. */
export interface RankOptions {
  maxPerDomain: number;
  memoryBytes: number;
  tmpDir: string;
}

/** What the ranking and the dispatch count for the stage's summary. */
export interface RankCounts {
  sent: number;
  sortRuns: number;
  /** Counts a record carried out, decided at `b[at, at + 14)`. */
  carried(b: Uint8Array, at: number): void;
  /** Notes a domain that held back `held` records. */
  noteCapped(domain: string, held: number): void;
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
export class DomainCounter {
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
export class DomainRanking {
  private readonly h = new Uint32Array(2);
  private readonly at = new Int32Array(2);
  private readonly ranked: SorterFeed;
  readonly chosen: SorterFeed;

  constructor(
    private readonly o: RankOptions,
    private readonly domains: DomainCounter,
    private readonly n: RankCounts,
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
export class Dispatch {
  private readonly line = { buf: EMPTY as Uint8Array, start: 0, end: 0 };
  private readonly at = new Int32Array(2);
  private have = false;
  private k = 0;

  constructor(
    private readonly spool: LineSource,
    private readonly domains: DomainCounter,
    private readonly out: Output,
    private readonly carry: ByteSink,
    private readonly n: RankCounts,
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
