// Stable external sort of URL records by (id, timestamp), in bounded memory. Records
// are kept as bytes in large off-heap blocks with their keys in typed arrays (no
// string per record, so almost nothing for the garbage collector); a full budget is
// sorted and spilled as a run to a private temporary directory, and the runs are
// k-way merged at the end.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { grown } from './arrays.js';
import { ioError } from './errors.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly } from './temps.js';

/** The prefix of a sorter's spill directory in --tmp (see ownedTempPrefix). */
export const SPILL_PREFIX = 'master-server-sort-';
import { putBytes } from './bytes.js';
import { ID_BYTES, TS_BYTES } from './records.js';

export interface SorterOptions {
  /** Budget for buffered records and their keys, in bytes. */
  memoryBytes: number;
  /** Directory for spilled runs. */
  tmpDir: string;
}

/** Where a record is written: the caller fills `buf` from `pos`, then calls `commit()`. */
export interface RecordSink {
  buf: Buffer;
  pos: number;
  /** Makes room for a record of up to `max` bytes at `buf[pos]` (may replace `buf`). */
  reserve(max: number): void;
  /** Adds the record written at `buf[pos, end)` (LF included) with its sort key. */
  commit(end: number, hi: number, lo: number, ts: number): void;
}

/** The text key of a record line: `id TAB timestamp`, 16 + 1 + 14 characters. */
const SORT_KEY_LENGTH = ID_BYTES + 1 + TS_BYTES;
/** Bytes per buffered record beyond its own bytes: 5 key arrays and its share of the sort scratch. */
const BYTES_PER_KEY = 8 + 4 + 4 + 4 + 8 + 4;
/** Records are partitioned by the id's top 8 bits at most; by fewer under a small budget, so that chunks are not mostly empty. */
const MAX_PART_BITS = 8;
const MIN_CHUNK = 4 << 10;
const MAX_CHUNK = 64 << 10;
const MAX_BLOCK = 4 << 20;
const FIRST_KEYS = 64;
const OFFSET_SCALE = 2 ** 32;
/** Most runs merged at once; more runs are first merged in groups of this many. */
const FAN_IN = 64;

/** One partition's buffered records: their bytes in chunks, in input order, and their keys. */
interface Part {
  chunks: Buffer[];
  /** Write position in the last chunk. */
  pos: number;
  n: number;
  /** chunk number * 2^32 + offset of each record. */
  at: Float64Array;
  len: Uint32Array;
  hi: Uint32Array;
  lo: Uint32Array;
  ts: Float64Array;
}

const emptyPart = (): Part => ({
  chunks: [],
  pos: 0,
  n: 0,
  at: new Float64Array(0),
  len: new Uint32Array(0),
  hi: new Uint32Array(0),
  lo: new Uint32Array(0),
  ts: new Float64Array(0),
});

/**
 * Collects URL records (bytes ending in LF) with their keys (the id as two 32-bit
 * halves and the timestamp as the number YYYYMMDDhhmmss) and hands them back sorted
 * by (id, timestamp), ties in input order. The key must be the record's own first
 * 31 characters: spilled runs are merged by that text. Beyond `memoryBytes`, sorted
 * runs spill to a private directory under `tmpDir`, which is removed after
 * `drain()`, by `dispose()`, and by the stage runner on any exit (`liveTempFiles`).
 *
 * Records come in packed batches (RecordBatch.take(): grouped by the id's top byte)
 * and are copied, group by group, into the partition of their id's top bits (256 of
 * them, each a list of chunks), because the output reads them in id order: read
 * from one arena in arrival order, every record was a cache miss (1M records:
 * 700 ms to hand out; copying 92-byte records in a random order over 92 MB took
 * 235 ms, against 55 ms within partitions read through once in order first).
 */
export class RecordSorter {
  private parts: Part[];
  private readonly partBits: number;
  private readonly chunkSize: number;
  /** Chunks are cut from blocks (big allocations, given back to the system whole when dropped). */
  private readonly blockSize: number;
  private block: Buffer | null = null;
  private blockPos = 0;
  /** Chunks of an earlier run, for reuse. */
  private spare: Buffer[] = [];
  /** Bytes of blocks, of records longer than a chunk, and of key arrays. */
  private held = 0;
  private n = 0;
  private seq = 0;
  private order = new Uint32Array(64);
  private readonly counts = new Int32Array(257);
  private dir: string | null = null;
  private runs: string[] = [];
  private runNo = 0;
  private spillBuf: Buffer | null = null;
  /** The memory the largest batch given to addPacked took: records and keys. */
  private largestBatch = 0;
  /** 60% of the budget for the buffered run; the rest is for merge read buffers and the heap. */
  private readonly runBudget: number;

  constructor(private readonly opts: SorterOptions) {
    this.runBudget = Math.floor(opts.memoryBytes * 0.6);
    // As many partitions as leave each room for a few chunks; chunks of a 1/1024th of the budget.
    let bits = MAX_PART_BITS;
    while (bits > 0 && (1 << bits) * 4 * MIN_CHUNK > this.runBudget) bits--;
    this.partBits = bits;
    this.chunkSize = Math.max(MIN_CHUNK, Math.min(MAX_CHUNK, Math.floor(this.runBudget / (4 << bits) / MIN_CHUNK) * MIN_CHUNK));
    this.blockSize = Math.max(this.chunkSize, Math.min(MAX_BLOCK, Math.floor(this.runBudget / 8 / MIN_CHUNK) * MIN_CHUNK));
    this.parts = Array.from({ length: 1 << bits }, emptyPart);
  }

  /** Number of records added. */
  get count(): number {
    return this.seq;
  }

  /** Number of runs spilled to disk so far. */
  get spilledRuns(): number {
    return this.runNo;
  }

  /**
   * Adds a batch of packed records (partitioned as RecordBatch.take() leaves them),
   * after everything added so far: each partition's share is copied in one piece.
   */
  addPacked(p: PackedRecords): void {
    this.largestBatch = Math.max(this.largestBatch, p.bytes.length + p.n * BYTES_PER_KEY);
    // A sorter partition takes 2^(8 - partBits) consecutive partitions of the batch.
    const per = 1 << (MAX_PART_BITS - this.partBits);
    for (let q = 0; q < this.parts.length; q++) {
      const from = p.parts[q * per]!;
      const to = p.parts[(q + 1) * per]!;
      if (from < to) this.addRange(p, from, to, q);
    }
  }

  /**
   * Copies the records `from` to `to` of `p` (all of partition `q`) into the partition,
   * as many at a time as fit its current chunk and key arrays; spills first when more
   * memory would not fit the budget.
   */
  private addRange(p: PackedRecords, from: number, to: number, q: number): void {
    const { bytes, starts, hi, lo, ts } = p;
    while (from < to) {
      const part = this.parts[q]!;
      const chunk = part.chunks.length > 0 ? part.chunks[part.chunks.length - 1]! : null;
      const base = starts[from]!;
      const room = chunk === null ? 0 : chunk.length - part.pos;
      const limit = Math.min(to, from + (part.len.length - part.n));
      let j = from;
      while (j < limit && starts[j + 1]! - base <= room) j++;
      if (j === from) {
        this.makeRoom(part, starts[from + 1]! - base);
        continue;
      }
      const c = part.chunks.length - 1;
      const at0 = c * OFFSET_SCALE + part.pos - base;
      chunk!.set(bytes.subarray(base, starts[j]!), part.pos);
      let k = part.n;
      for (let i = from; i < j; i++, k++) {
        part.at[k] = at0 + starts[i]!;
        part.len[k] = starts[i + 1]! - starts[i]!;
        part.hi[k] = hi[i]!;
        part.lo[k] = lo[i]!;
        part.ts[k] = ts[i]!;
      }
      part.pos += starts[j]! - base;
      part.n = k;
      this.n += j - from;
      this.seq += j - from;
      from = j;
    }
  }

  /**
   * Gives `part` room for its next record of `len` bytes: a chunk (its own one if longer
   * than a chunk) and key slots, whichever is missing; when that memory would not fit
   * the budget, the buffered run spills first (or, right after a spill, what the last run
   * left is dropped, so that a differently skewed run still fits).
   */
  private makeRoom(part: Part, len: number): void {
    const chunk = part.chunks.length > 0 ? part.chunks[part.chunks.length - 1]! : null;
    const needChunk = chunk === null || part.pos + len > chunk.length;
    const needKeys = part.n === part.len.length;
    // Memory beyond what is held already: a record's own chunk, or a new block if no chunk is left; bigger key arrays.
    const fresh = !needChunk ? 0 : len > this.chunkSize ? len : this.chunkAtHand() ? 0 : this.blockSize;
    const keys = needKeys ? Math.max(FIRST_KEYS, part.n) * BYTES_PER_KEY : 0;
    // (With nothing held, the record goes in whatever the budget: a run holds at least one.)
    if (this.held + fresh + keys > this.runBudget && this.held > 0) {
      if (this.n > 0) this.spill();
      else this.dropSpare();
      return;
    }
    if (needChunk) {
      part.chunks.push(len > this.chunkSize ? Buffer.allocUnsafeSlow(len) : this.takeChunk());
      part.pos = 0;
      this.held += fresh;
    }
    if (needKeys) {
      const cap = Math.max(FIRST_KEYS, part.n * 2);
      part.at = grown(part.at, cap);
      part.len = grown(part.len, cap);
      part.hi = grown(part.hi, cap);
      part.lo = grown(part.lo, cap);
      part.ts = grown(part.ts, cap);
      this.held += keys;
    }
  }

  /** Whether a chunk can be taken without allocating: a spare one, or room left in the current block. */
  private chunkAtHand(): boolean {
    return this.spare.length > 0 || (this.block !== null && this.blockPos + this.chunkSize <= this.block.length);
  }

  /** A chunk: a spare one, or the next one cut from the current block (or a new block, counted by the caller). */
  private takeChunk(): Buffer {
    if (this.spare.length > 0) return this.spare.pop()!;
    let block = this.block;
    if (!this.chunkAtHand() || block === null) {
      block = this.block = Buffer.allocUnsafeSlow(this.blockSize);
      this.blockPos = 0;
    }
    this.blockPos += this.chunkSize;
    return block.subarray(this.blockPos - this.chunkSize, this.blockPos);
  }

  /** Frees what the last run left for reuse: blocks, spare chunks and key arrays (nothing is buffered). */
  private dropSpare(): void {
    this.parts = this.parts.map(emptyPart);
    this.spare = [];
    this.block = null;
    this.held = 0;
  }

  /**
   * Whether the buffered run is near its budget, so that the next batch or two may make
   * it spill (see spillNow): within two blocks, or two of the largest batches added so
   * far, of it.
   */
  nearlyFull(): boolean {
    // What the run can still take without a spill: chunks left from an earlier run, the
    // rest of the current block, and the budget not yet held.
    const blockLeft = this.block === null ? 0 : this.block.length - this.blockPos;
    const free = this.spare.length * this.chunkSize + blockLeft + (this.runBudget - this.held);
    return this.n > 0 && free < 2 * Math.max(this.blockSize, this.largestBatch);
  }

  /**
   * Spills the buffered run now (nothing when none is buffered): a caller that sees
   * nearlyFull() can spill at a moment of its choosing, rather than inside the
   * addPacked() that would not fit.
   */
  spillNow(): void {
    if (this.n > 0) this.spill();
  }

  /** The memory a sorted run may take before it spills. */
  get runBytes(): number {
    return this.runBudget;
  }

  /** Hands the sorted records to `onChunk` as buffers of whole lines (awaiting it when it returns a promise). */
  async drain(onChunk: (chunk: Buffer) => void | Promise<void>): Promise<void> {
    try {
      for (const chunk of this.sorted()) {
        const p = onChunk(chunk);
        if (p) await p;
      }
    } finally {
      this.dispose();
    }
  }

  /** All records in order: from memory, or the runs merged (in rounds of FAN_IN first). */
  private sorted(): Iterable<Buffer> {
    if (this.runs.length === 0) return this.inOrder();
    if (this.n > 0) this.spill();
    this.release();
    while (this.runs.length > FAN_IN) {
      const group = this.runs.splice(0, FAN_IN);
      const file = this.nextRunFile();
      this.spillBuf ??= Buffer.allocUnsafeSlow(1 << 20);
      writeAll(file, merged(group, this.readBlock(group.length), this.spillBuf));
      for (const f of group) removeQuietly(f);
      // The merged run holds the earliest lines of all: it goes first, keeping ties stable.
      this.runs.unshift(file);
    }
    return merged(this.runs, this.readBlock(this.runs.length));
  }

  /** Drops everything buffered or spilled, and removes the spill directory. */
  dispose(): void {
    this.release();
    this.runs = [];
    if (this.dir !== null) {
      removeQuietly(this.dir);
      liveTempFiles.delete(this.dir);
      this.dir = null;
    }
  }

  private release(): void {
    this.dropSpare();
    this.n = 0;
    this.order = new Uint32Array(64);
  }

  /**
   * The buffered records in sorted order, partition after partition, as `Chunks`
   * hands them out. A partition is first read through in order (so that its records
   * are in the cache), then counting-sorted by the next 8 bits of the id, and each
   * such bucket sorted by (id, timestamp), ties in input order.
   */
  private *inOrder(reuse?: Buffer): Generator<Buffer> {
    const out = new Chunks(reuse);
    const counts = this.counts;
    const shift = 24 - this.partBits;
    for (const part of this.parts) {
      const m = part.n;
      if (m === 0) continue;
      const { chunks, at, len, hi, lo, ts } = part;
      // One read per cache line, in order (the prefetcher's pattern); the sum is used below so
      // that the reads are not optimized away.
      let touched = 0;
      for (let c = 0; c < chunks.length; c++) {
        const chunk = chunks[c]!;
        const used = c === chunks.length - 1 ? part.pos : chunk.length;
        for (let i = 0; i < used; i += 64) touched += chunk[i]!;
      }
      if (touched < 0) throw new Error('unreachable: bytes are not negative');
      if (this.order.length < m) this.order = new Uint32Array(Math.max(m, this.order.length * 2));
      const order = this.order;
      counts.fill(0);
      for (let k = 0; k < m; k++) counts[((hi[k]! >>> shift) & 255) + 1]!++;
      for (let b = 0; b < 256; b++) counts[b + 1]! += counts[b]!;
      for (let k = 0; k < m; k++) order[counts[(hi[k]! >>> shift) & 255]!++] = k;
      // counts[b] is now where bucket b ends.
      for (let b = 0, from = 0; b < 256; from = counts[b++]!) sortRange(order, from, counts[b]!, hi, lo, ts);
      for (let j = 0; j < m; j++) {
        const k = order[j]!;
        const a = at[k]!;
        const c = Math.floor(a / OFFSET_SCALE);
        const s = a - c * OFFSET_SCALE;
        const full = out.full(len[k]!);
        if (full) yield full;
        out.put(chunks[c]!, s, s + len[k]!);
      }
    }
    const rest = out.rest();
    if (rest) yield rest;
  }

  private readBlock(runs: number): number {
    return Math.max(1 << 16, Math.min(1 << 20, Math.floor(this.opts.memoryBytes / (8 * runs))));
  }

  private nextRunFile(): string {
    if (this.dir === null) {
      try {
        this.dir = fs.mkdtempSync(path.join(this.opts.tmpDir, ownedTempPrefix(SPILL_PREFIX)));
      } catch (err) {
        throw ioError(err, this.opts.tmpDir, 'create a temporary directory in');
      }
      liveTempFiles.add(this.dir);
    }
    return path.join(this.dir, `run-${String(this.runNo++).padStart(6, '0')}`);
  }

  private spill(): void {
    const file = this.nextRunFile();
    // One reused buffer and plain writes: a run leaves no garbage behind.
    this.spillBuf ??= Buffer.allocUnsafeSlow(1 << 20);
    writeAll(file, this.inOrder(this.spillBuf));
    this.runs.push(file);
    // Chunks and key arrays are reused by the next run: no garbage, no growth.
    for (const part of this.parts) {
      for (const c of part.chunks) {
        if (c.length === this.chunkSize) this.spare.push(c);
        else this.held -= c.length;
      }
      part.chunks = [];
      part.pos = 0;
      part.n = 0;
    }
    this.n = 0;
  }
}

/**
 * Records packed for handing between threads: bytes, record starts (n + 1 of them)
 * and keys, grouped by the top 8 bits of the id (input order within a group): group
 * g is records parts[g] to parts[g + 1].
 */
export interface PackedRecords {
  bytes: Uint8Array;
  n: number;
  starts: Uint32Array;
  hi: Uint32Array;
  lo: Uint32Array;
  ts: Float64Array;
  parts: Uint32Array;
}

const ROUND_BYTES = 1 << 19;
const ROUND_RECORDS = 1 << 13;

/**
 * A growable RecordSink that packs its records: a worker's output, one batch at a
 * time. The grouping by id is done here, on the parsing thread, so that the sorter
 * copies each group of a batch in one piece (copied one by one into 256 partitions,
 * each record cost the main thread about 0.4 µs, most of it cache misses).
 */
export class RecordBatch implements RecordSink {
  buf: Buffer;
  pos = 0;
  private n = 0;
  private starts: Uint32Array;
  private hi: Uint32Array;
  private lo: Uint32Array;
  private ts: Float64Array;
  private readonly counts = new Uint32Array((1 << MAX_PART_BITS) + 1);
  private readonly byteAt = new Uint32Array(1 << MAX_PART_BITS);

  /** Room for about `bytes` bytes and `records` records at first. */
  constructor(bytes: number, records: number) {
    this.buf = Buffer.allocUnsafeSlow(Math.max(256, bytes));
    records = Math.max(64, records);
    this.starts = new Uint32Array(records + 1);
    this.hi = new Uint32Array(records);
    this.lo = new Uint32Array(records);
    this.ts = new Float64Array(records);
  }

  reserve(max: number): void {
    if (this.pos + max <= this.buf.length) return;
    const bigger = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.pos + max));
    bigger.set(this.buf.subarray(0, this.pos));
    this.buf = bigger;
  }

  commit(end: number, hi: number, lo: number, ts: number): void {
    const i = this.n;
    if (i === this.hi.length) {
      const cap = i * 2;
      this.starts = grown(this.starts, cap + 1);
      this.hi = grown(this.hi, cap);
      this.lo = grown(this.lo, cap);
      this.ts = grown(this.ts, cap);
    }
    this.starts[i] = this.pos;
    this.hi[i] = hi;
    this.lo[i] = lo;
    this.ts[i] = ts;
    this.n = i + 1;
    this.pos = end;
  }

  /**
   * The records committed since the last take(), grouped by id (views of whole
   * buffers, ready to transfer), in `reuse`'s buffers where they fit (buffers handed
   * back from an earlier batch: recycling, not garbage). The batch is then empty.
   */
  take(reuse?: PackedRecords): PackedRecords {
    const n = this.n;
    const bytesUsed = this.pos;
    const { starts, hi, lo, ts, counts, byteAt } = this;
    starts[n] = bytesUsed;
    // Sizes are rounded up so that buffers handed back fit the next batch.
    const size = Math.ceil(Math.max(256, bytesUsed) / ROUND_BYTES) * ROUND_BYTES;
    const records = Math.ceil((n + 1) / ROUND_RECORDS) * ROUND_RECORDS;
    const fits = (a: ArrayBufferView | undefined, len: number) => a !== undefined && a.byteLength >= len;
    const p: PackedRecords = {
      bytes:
        reuse && reuse.bytes.buffer.byteLength >= size ? new Uint8Array(reuse.bytes.buffer, 0, bytesUsed) : new Uint8Array(new ArrayBuffer(size), 0, bytesUsed),
      n,
      starts: reuse && fits(reuse.starts, 4 * records) ? reuse.starts : new Uint32Array(records),
      hi: reuse && fits(reuse.hi, 4 * records) ? reuse.hi : new Uint32Array(records),
      lo: reuse && fits(reuse.lo, 4 * records) ? reuse.lo : new Uint32Array(records),
      ts: reuse && fits(reuse.ts, 8 * records) ? reuse.ts : new Float64Array(records),
      parts: reuse ? reuse.parts : new Uint32Array((1 << MAX_PART_BITS) + 1),
    };
    // A counting sort by the top 8 bits of the id: where each group starts, in records and bytes.
    const shift = 32 - MAX_PART_BITS;
    counts.fill(0);
    byteAt.fill(0);
    for (let k = 0; k < n; k++) {
      const g = hi[k]! >>> shift;
      counts[g + 1]!++;
      byteAt[g]! += starts[k + 1]! - starts[k]!;
    }
    for (let g = 0, at = 0; g < 1 << MAX_PART_BITS; g++) {
      counts[g + 1]! += counts[g]!;
      const groupBytes = byteAt[g]!;
      byteAt[g] = at;
      at += groupBytes;
    }
    p.parts.set(counts);
    const src = this.buf;
    const dst = p.bytes;
    for (let k = 0; k < n; k++) {
      const g = hi[k]! >>> shift;
      const j = counts[g]!++;
      const s = starts[k]!;
      const e = starts[k + 1]!;
      const at = byteAt[g]!;
      byteAt[g] = putBytes(dst, at, src, s, e);
      p.starts[j] = at;
      p.hi[j] = hi[k]!;
      p.lo[j] = lo[k]!;
      p.ts[j] = ts[k]!;
    }
    p.starts[n] = bytesUsed;
    this.n = 0;
    this.pos = 0;
    return p;
  }
}

/**
 * Sorts the record numbers `order[from, to)` of one bucket (records whose ids share
 * their top bits, in input order) by (hi, lo, ts), ties by number: stable. Ids are
 * hashes, so buckets are small; a big one is one id repeated, and goes to the
 * engine's stable sort.
 */
function sortRange(order: Uint32Array, from: number, to: number, hi: Uint32Array, lo: Uint32Array, ts: Float64Array): void {
  if (to - from < 2) return;
  const cmp = (x: number, y: number) => hi[x]! - hi[y]! || lo[x]! - lo[y]! || ts[x]! - ts[y]! || x - y;
  if (to - from <= 32) {
    for (let i = from + 1; i < to; i++) {
      const x = order[i]!;
      let j = i - 1;
      while (j >= from && cmp(order[j]!, x) > 0) {
        order[j + 1] = order[j]!;
        j--;
      }
      order[j + 1] = x;
    }
  } else {
    order.set(Array.from(order.subarray(from, to)).sort(cmp), from);
  }
}

/**
 * Reads a spilled run line by line in large blocks, keeping the current line as a
 * range of its buffer with its key parsed back to numbers.
 */
class RunReader {
  private fd: number;
  /** Holds the current line; replaced when a line outgrows it. */
  buf: Buffer;
  private end = 0;
  private eof = false;
  /** The current line is buf[s, e), LF included. */
  s = 0;
  e = 0;
  hi = 0;
  lo = 0;
  ts = 0;

  constructor(
    readonly file: string,
    block: number,
    /** Run number: earlier runs hold earlier input lines, so it breaks ties stably. */
    readonly run: number,
  ) {
    try {
      this.fd = fs.openSync(file, 'r');
    } catch (err) {
      throw ioError(err, file, 'open');
    }
    this.buf = Buffer.allocUnsafe(block);
  }

  /** Moves to the next line; false (and closed) at the end of the run. */
  next(): boolean {
    let from = this.e;
    let lf = from < this.end ? this.buf.indexOf(10, from) : -1;
    if (lf === -1 || lf >= this.end) {
      lf = this.refill(from);
      if (lf === -1) {
        this.close();
        return false;
      }
      from = 0;
    }
    const buf = this.buf;
    this.s = from;
    this.e = lf + 1;
    this.hi = hex8(buf, from);
    this.lo = hex8(buf, from + 8);
    let t = 0;
    for (let i = from + ID_BYTES + 1; i < from + SORT_KEY_LENGTH; i++) t = t * 10 + buf[i]! - 48;
    this.ts = t;
    return true;
  }

  /** Moves the unread bytes from `from` to the front, reads more; returns the next LF or -1 at the end. */
  private refill(from: number): number {
    for (;;) {
      const rest = this.end - from;
      if (rest > 0) this.buf.copy(this.buf, 0, from, this.end);
      this.end = rest;
      from = 0;
      if (this.eof) {
        if (rest > 0) throw new Error(`sort run ${this.file} ends inside a line`);
        return -1;
      }
      if (this.end === this.buf.length) {
        const bigger = Buffer.allocUnsafe(this.buf.length * 2);
        this.buf.copy(bigger, 0, 0, this.end);
        this.buf = bigger;
      }
      let n: number;
      try {
        n = fs.readSync(this.fd, this.buf, this.end, this.buf.length - this.end, null);
      } catch (err) {
        throw ioError(err, this.file, 'read');
      }
      if (n === 0) this.eof = true;
      const lf = this.buf.indexOf(10, this.end);
      this.end += n;
      if (lf !== -1 && lf < this.end) return lf;
    }
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }
}

/** The value of 8 lower-case hex digits at buf[at]. */
function hex8(buf: Buffer, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) {
    const c = buf[i]!;
    v = v * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return v;
}

const less = (a: RunReader, b: RunReader) => (a.hi !== b.hi ? a.hi < b.hi : a.lo !== b.lo ? a.lo < b.lo : a.ts !== b.ts ? a.ts < b.ts : a.run < b.run);

/** Merges sorted runs, handing out the merged lines as `Chunks` does. */
function* merged(files: readonly string[], block: number, reuse?: Buffer): Generator<Buffer> {
  const heap: RunReader[] = [];
  try {
    files.forEach((file, run) => {
      const r = new RunReader(file, block, run);
      heap.push(r);
      if (r.next()) siftUp(heap, heap.length - 1);
      else heap.pop();
    });
    const out = new Chunks(reuse);
    while (heap.length > 0) {
      const top = heap[0]!;
      const full = out.full(top.e - top.s);
      if (full) yield full;
      out.put(top.buf, top.s, top.e);
      if (!top.next()) {
        const last = heap.pop()!;
        if (heap.length === 0) break;
        heap[0] = last;
      }
      siftDown(heap, 0);
    }
    const rest = out.rest();
    if (rest) yield rest;
  } finally {
    for (const r of heap) r.close();
  }
}

/**
 * Gathers lines into 1 MiB buffers of whole lines: fresh ones, or `reuse` over and
 * over. Use: `const f = c.full(len); if (f) consume(f); c.put(line)`; a buffer
 * handed out must be consumed before the next `put`.
 */
class Chunks {
  private out: Buffer = Buffer.alloc(0);
  private o = 0;

  constructor(private readonly reuse?: Buffer) {}

  /** Hands out what is gathered if a line of `len` bytes does not fit after it. */
  full(len: number): Buffer | null {
    return this.o + len > this.out.length ? this.rest() : null;
  }

  put(src: Uint8Array, s: number, e: number): void {
    const l = e - s;
    if (this.o + l > this.out.length) {
      this.out = this.reuse && this.reuse.length >= l ? this.reuse : Buffer.allocUnsafe(Math.max(1 << 20, l));
    }
    this.out.set(src.subarray(s, e), this.o);
    this.o += l;
  }

  /** What is gathered and not handed out yet, or null. */
  rest(): Buffer | null {
    const o = this.o;
    if (o === 0) return null;
    const r = this.out.subarray(0, o);
    this.o = 0;
    // A fresh buffer, once handed out, is the reader's: never written again.
    if (this.out !== this.reuse) this.out = Buffer.alloc(0);
    return r;
  }
}

/** Writes the chunks to a new file (a failure leaves it to the removal of the spill directory). */
function writeAll(file: string, chunks: Iterable<Buffer>): void {
  let fd: number;
  try {
    fd = fs.openSync(file, 'w', 0o600);
  } catch (err) {
    throw ioError(err, file, 'open for writing');
  }
  try {
    for (const chunk of chunks) {
      for (let off = 0; off < chunk.length; ) {
        try {
          off += fs.writeSync(fd, chunk, off, chunk.length - off);
        } catch (err) {
          throw ioError(err, file, 'write');
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

function siftUp(heap: RunReader[], i: number): void {
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!less(heap[i]!, heap[p]!)) break;
    [heap[i], heap[p]] = [heap[p]!, heap[i]!];
    i = p;
  }
}

function siftDown(heap: RunReader[], i: number): void {
  const n = heap.length;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) return;
    const r = l + 1;
    const m = r < n && less(heap[r]!, heap[l]!) ? r : l;
    if (!less(heap[m]!, heap[i]!)) return;
    [heap[i], heap[m]] = [heap[m]!, heap[i]!];
    i = m;
  }
}

/** The buffers of packed records, for a transfer list. */
export function packedBuffers(p: PackedRecords): ArrayBuffer[] {
  return [p.bytes.buffer, p.starts.buffer, p.hi.buffer, p.lo.buffer, p.ts.buffer, p.parts.buffer] as ArrayBuffer[];
}
