// What `caps` counts in one hour's reflog: each domain's distinct URLs, canonicalized and
// keyed by the core reflog parser as analyze-dump does and grouped by id as group-sum
// groups them, in bounded memory (a set of ids of at most 128 MiB, a domain table pruned
// as lossy counting prunes past 262,144 domains, with the most a count may be low by).
import * as fs from 'node:fs';
import { TAB } from '../../core/bytes.js';
import { DataError, ioError } from '../../core/errors.js';
import { LineBatcher } from '../../core/lines.js';
import { ID_BYTES, TS_BYTES } from '../../core/records.js';
import { ReflogAnalyzer, Verdict, lineLimit } from '../../core/reflog.js';
import type { RecordSink } from '../../core/sorter.js';
import { UrlResolver, type UrlHash, type UrlOptions } from '../../core/url.js';

const MIN_SLOTS = 1 << 16;
/** 2 x 4 bytes a slot: 128 MiB, room for 12.5M ids (at 3/4 full), more than a 10M-line hour holds. */
const MAX_SLOTS = 1 << 24;

/**
 * A set of 64-bit URL ids (hi, lo), open addressing. At MAX_SLOTS three quarters full
 * it takes no more: an id it does not hold is then new every time (`full`).
 */
export class IdSet {
  size = 0;
  full = false;
  private zero = false;
  private hi = new Uint32Array(MIN_SLOTS);
  private lo = new Uint32Array(MIN_SLOTS);

  constructor(private readonly maxSlots = MAX_SLOTS) {}

  /** Adds id (hi, lo) (unsigned 32-bit halves); whether it was not there. */
  add(hi: number, lo: number): boolean {
    if (hi === 0 && lo === 0) {
      if (this.zero) return false;
      this.zero = true;
      return true;
    }
    const mask = this.hi.length - 1;
    let i = lo & mask;
    for (;;) {
      const h = this.hi[i]!;
      const l = this.lo[i]!;
      if (h === 0 && l === 0) break;
      if (h === hi && l === lo) return false;
      i = (i + 1) & mask;
    }
    if (this.full) return true;
    this.hi[i] = hi;
    this.lo[i] = lo;
    if (++this.size * 4 >= this.hi.length * 3) this.grow();
    return true;
  }

  private grow(): void {
    if (this.hi.length >= this.maxSlots) {
      this.full = true;
      return;
    }
    const [hi, lo] = [this.hi, this.lo];
    this.hi = new Uint32Array(hi.length * 2);
    this.lo = new Uint32Array(hi.length * 2);
    const mask = this.hi.length - 1;
    for (let k = 0; k < hi.length; k++) {
      if (hi[k] === 0 && lo[k] === 0) continue;
      let i = lo[k]! & mask;
      while (this.hi[i] !== 0 || this.lo[i] !== 0) i = (i + 1) & mask;
      this.hi[i] = hi[k]!;
      this.lo[i] = lo[k]!;
    }
  }
}

/** Where a domain's table value keeps the most it may have had before it was (again) held: above its count. */
const DELTA = 2 ** 31;

/**
 * URLs per domain, exact while it holds at most `pruneAt` domains. Past that, at each
 * boundary of `bucket` URLs it drops the domains that may have at most that boundary's
 * number of URLs (lossy counting, Manku and Motwani): a count is then low by at most
 * `error`, and a domain not held has at most `error` URLs. One table, a number a domain:
 * its count, plus DELTA times the most it may have had before (the error when it came).
 */
export class DomainTally {
  /** The most a count may be low by: the last boundary at which domains were dropped (0: exact). */
  error = 0;
  private readonly table = new Map<string, number>();
  private seen = 0;

  constructor(
    private readonly pruneAt = 1 << 18,
    private readonly bucket = 1 << 18,
  ) {}

  /** The domains held. */
  get size(): number {
    return this.table.size;
  }

  /** Counts one URL of `domain` (fewer than 2^31 URLs a domain). */
  add(domain: string): void {
    const v = this.table.get(domain);
    this.table.set(domain, v === undefined ? 1 + this.error * DELTA : v + 1);
    if (++this.seen % this.bucket === 0 && this.table.size > this.pruneAt) this.prune(this.seen / this.bucket);
  }

  /** The counts per domain: the table itself, made counts alone (nothing may be added after). */
  counts(): Map<string, number> {
    if (this.error > 0) for (const [d, v] of this.table) this.table.set(d, v % DELTA);
    return this.table;
  }

  private prune(boundary: number): void {
    for (const [d, v] of this.table) {
      if ((v % DELTA) + Math.floor(v / DELTA) > boundary) continue;
      this.table.delete(d);
      this.error = boundary;
    }
  }
}

/** Counts the distinct URLs of a record as the parser writes it (`id TAB ts TAB tag TAB hits TAB domain TAB url LF`) for its domain. */
class DomainSink implements RecordSink {
  buf = Buffer.alloc(1 << 16);
  pos = 0;
  /** Distinct URLs counted. */
  urls = 0;

  constructor(
    private readonly ids: IdSet,
    private readonly tally: DomainTally,
  ) {}

  reserve(max: number): void {
    if (this.buf.length < max) this.buf = Buffer.alloc(max);
    this.pos = 0;
  }

  commit(_end: number, hi: number, lo: number): void {
    if (!this.ids.add(hi, lo)) return;
    this.urls++;
    const b = this.buf;
    let p = b.indexOf(TAB, ID_BYTES + 1 + TS_BYTES + 1) + 1; // past the updatetag
    p = b.indexOf(TAB, p) + 1; // past the hits
    this.tally.add(b.toString('latin1', p, b.indexOf(TAB, p)));
  }
}

/** What one hour's reflog holds, as caps counts it. */
export interface HourCount {
  lines: number;
  /** Lines analyze-dump would reject. */
  rejected: number;
  /** Distinct URLs (ids): group-sum's records_out. */
  urls: number;
  /** Distinct URLs per domain (DomainTally). */
  counts: Map<string, number>;
  /** The most a count of `counts` may be low by (0: exact). */
  count_error: number;
  /** More distinct URLs than the set of ids holds: past that, repeats count again (the counts are upper bounds). */
  ids_full: boolean;
}

const READ_BYTES = 1 << 20;

/** Counts the reflog `file` with URL options `opts` (the state's keying). */
export function countReflog(file: string, opts: UrlOptions, hash: UrlHash, tally = new DomainTally(), ids = new IdSet()): HourCount {
  const sink = new DomainSink(ids, tally);
  const analyzer = new ReflogAnalyzer(new UrlResolver(opts, hash), sink);
  const maxLine = lineLimit(opts.maxUrlBytes);
  const batcher = new LineBatcher(4 * READ_BYTES, maxLine);
  const n = { lines: 0, rejected: 0 };
  const analyze = (batch: Buffer) => {
    n.lines += analyzeLines(analyzer, batch, maxLine, n);
    batcher.recycle(batch);
  };
  let fd: number;
  try {
    // Not blocking: open(2) of a FIFO to read would wait for a writer, for ever.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    throw ioError(err, file, 'open');
  }
  try {
    if (!fs.fstatSync(fd).isFile()) throw new DataError('NOT_A_FILE', 'not a regular file', { file });
    const chunk = Buffer.allocUnsafe(READ_BYTES);
    for (let got = fs.readSync(fd, chunk); got > 0; got = fs.readSync(fd, chunk)) {
      for (const batch of batcher.push(Buffer.from(chunk.subarray(0, got)))) analyze(batch);
    }
    const last = batcher.end();
    if (last !== null) analyze(last);
  } catch (err) {
    throw err instanceof DataError ? err : ioError(err, file, 'read');
  } finally {
    fs.closeSync(fd);
  }
  return { lines: n.lines, rejected: n.rejected, urls: sink.urls, counts: tally.counts(), count_error: tally.error, ids_full: ids.full };
}

/**
 * Runs the analyzer over the lines of `buf` as analyze-dump does (a line longer than
 * `maxLine` with a TAB is rejected, one without is a header); returns how many, counting rejects into `n`.
 */
function analyzeLines(analyzer: ReflogAnalyzer, buf: Buffer, maxLine: number, n: { rejected: number }): number {
  let lines = 0;
  for (let s = 0; s < buf.length; ) {
    let e = buf.indexOf(10, s);
    if (e === -1) e = buf.length;
    lines++;
    const len = e > s && buf[e - 1] === 13 ? e - s - 1 : e - s;
    const overlong = len > maxLine && buf.subarray(s, e).indexOf(TAB) !== -1;
    if (analyzer.line(buf, s, len > maxLine ? s + maxLine : e, overlong) === Verdict.Reject) n.rejected++;
    s = e + 1;
  }
  return lines;
}
