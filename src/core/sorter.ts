// Stable external sort of URL records by (id, timestamp), in bounded memory. Records
// are kept as bytes in large off-heap blocks with their keys in typed arrays (no
// string per record, so almost nothing for the garbage collector); a full budget is
// sorted and spilled as a run to a private temporary directory, and the runs are
// k-way merged at the end.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { grown } from './arrays.js';
import { ioError } from './errors.js';
import { liveTempFiles, removeQuietly } from './tsv.js';

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
const SORT_KEY_LENGTH = 31;
/** Bytes per buffered record beyond its own bytes: 6 key arrays and, at worst, a bucket's share of the sort scratch. */
const BYTES_PER_KEY = 8 + 4 + 4 + 4 + 8 + 4 + 4;
/** Records are bucketed by the id's top 16 bits as they arrive. */
const BUCKETS = 1 << 16;
const MAX_BLOCK = 4 << 20;
const OFFSET_SCALE = 2 ** 32;
/** Most runs merged at once; more runs are first merged in groups of this many. */
const FAN_IN = 64;

/**
 * Collects URL records (bytes ending in LF) with their keys (the id as two 32-bit
 * halves and the timestamp as the number YYYYMMDDhhmmss) and hands them back sorted
 * by (id, timestamp), ties in input order. The key must be the record's own first
 * 31 characters: spilled runs are merged by that text. Beyond `memoryBytes`, sorted
 * runs spill to a private directory under `tmpDir`, which is removed after
 * `drain()`, by `dispose()`, and by the stage runner on any exit (`liveTempFiles`).
 */
export class RecordSorter implements RecordSink {
  buf: Buffer;
  pos = 0;
  private blocks: Buffer[] = [];
  private spare: Buffer[] = [];
  private blockBytes = 0;
  private n = 0;
  private seq = 0;
  private cap = 0;
  private at = new Float64Array(0);
  private len = new Uint32Array(0);
  private hi = new Uint32Array(0);
  private lo = new Uint32Array(0);
  private ts = new Float64Array(0);
  /**
   * Each bucket's records, linked in input order as they are committed (the next
   * record of the same bucket, or -1): the sort at the end has no counting pass,
   * and output starts as soon as the first bucket is sorted (at 1M records the
   * first byte came 230 ms after the end of input with a whole counting sort first).
   */
  private next = new Int32Array(0);
  private head = new Int32Array(BUCKETS).fill(-1);
  private tail = new Int32Array(BUCKETS);
  private scratch = new Uint32Array(64);
  private dir: string | null = null;
  private runs: string[] = [];
  private runNo = 0;
  private readonly blockSize: number;
  private spillBuf: Buffer | null = null;
  private readonly firstCap: number;
  /** 60% of the budget for the buffered run; the rest is for merge read buffers and the heap. */
  private readonly runBudget: number;

  constructor(private readonly opts: SorterOptions) {
    this.runBudget = Math.floor(opts.memoryBytes * 0.6);
    this.blockSize = Math.max(1 << 12, Math.min(MAX_BLOCK, Math.floor(this.runBudget / 8)));
    this.firstCap = Math.max(64, Math.min(4096, Math.floor(this.runBudget / (16 * BYTES_PER_KEY))));
    this.buf = Buffer.alloc(0);
  }

  /** Number of records added. */
  get count(): number {
    return this.seq;
  }

  /** Number of runs spilled to disk so far. */
  get spilledRuns(): number {
    return this.runNo;
  }

  reserve(max: number): void {
    const newBlock = this.pos + max > this.buf.length;
    const size = Math.max(this.blockSize, max);
    if (!newBlock && this.n < this.cap) return;
    // Spill first if the memory this record needs (a block, or a bigger key array) would exceed the budget.
    const blocks = this.blockBytes + (newBlock ? size : 0);
    const keys = (this.n < this.cap ? this.cap : this.nextCap()) * BYTES_PER_KEY;
    if (this.n > 0 && blocks + keys > this.runBudget) this.spill();
    if (this.n === this.cap) this.grow();
    if (this.pos + max <= this.buf.length) return;
    let block = size === this.blockSize ? this.spare.pop() : undefined;
    if (block === undefined) block = Buffer.allocUnsafeSlow(size);
    this.blocks.push(block);
    this.blockBytes += block.length;
    this.buf = block;
    this.pos = 0;
  }

  commit(end: number, hi: number, lo: number, ts: number): void {
    const i = this.n;
    this.at[i] = (this.blocks.length - 1) * OFFSET_SCALE + this.pos;
    this.len[i] = end - this.pos;
    this.hi[i] = hi;
    this.lo[i] = lo;
    this.ts[i] = ts;
    const b = hi >>> 16;
    this.next[i] = -1;
    if (this.head[b]! < 0) this.head[b] = i;
    else this.next[this.tail[b]!] = i;
    this.tail[b] = i;
    this.n = i + 1;
    this.seq++;
    this.pos = end;
  }

  /** Adds packed records (in input order, after everything added so far). */
  addPacked(p: PackedRecords): void {
    let i = 0;
    while (i < p.n) {
      // As many records as fit the current block and key arrays, in one copy.
      const from = p.starts[i]!;
      const room = this.buf.length - this.pos;
      const most = Math.min(p.n, i + this.cap - this.n);
      let j = i;
      while (j < most && p.starts[j + 1]! - from <= room) j++;
      if (j === i) {
        this.reserve(p.starts[i + 1]! - from);
        continue;
      }
      const base = this.pos - from;
      this.buf.set(p.bytes.subarray(from, p.starts[j]!), this.pos);
      for (let k = i; k < j; k++) {
        this.pos = p.starts[k]! + base;
        this.commit(p.starts[k + 1]! + base, p.hi[k]!, p.lo[k]!, p.ts[k]!);
      }
      i = j;
    }
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
    this.blocks = [];
    this.spare = [];
    this.blockBytes = 0;
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    this.n = 0;
    this.cap = 0;
    this.at = new Float64Array(0);
    this.len = this.hi = this.lo = new Uint32Array(0);
    this.ts = new Float64Array(0);
    this.next = new Int32Array(0);
    this.head.fill(-1);
    this.scratch = new Uint32Array(64);
  }

  private nextCap(): number {
    return this.cap === 0 ? this.firstCap : this.cap * 2;
  }

  private grow(): void {
    const cap = this.nextCap();
    this.at = grown(this.at, cap);
    this.len = grown(this.len, cap);
    this.hi = grown(this.hi, cap);
    this.lo = grown(this.lo, cap);
    this.ts = grown(this.ts, cap);
    this.next = grown(this.next, cap);
    this.cap = cap;
  }

  /** The buffered records in sorted order, bucket after bucket, as `Chunks` hands them out. */
  private *inOrder(reuse?: Buffer): Generator<Buffer> {
    const { blocks, at, len, head, next } = this;
    const out = new Chunks(reuse);
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      if (head[bucket]! < 0) continue;
      let m = 0;
      for (let i = head[bucket]!; i >= 0; i = next[i]!) {
        if (m === this.scratch.length) this.scratch = grown(this.scratch);
        this.scratch[m++] = i;
      }
      const order = this.scratch;
      sortBucket(order, m, this.hi, this.lo, this.ts);
      for (let k = 0; k < m; k++) {
        const i = order[k]!;
        const a = at[i]!;
        const b = Math.floor(a / OFFSET_SCALE);
        const s = a - b * OFFSET_SCALE;
        const full = out.full(len[i]!);
        if (full) yield full;
        out.put(blocks[b]!, s, s + len[i]!);
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
        this.dir = fs.mkdtempSync(path.join(this.opts.tmpDir, 'master-server-sort-'));
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
    this.head.fill(-1);
    this.runs.push(file);
    // The blocks are reused for the next run: no garbage, no growth.
    this.spare = this.blocks.filter((b) => b.length === this.blockSize);
    this.blocks = [];
    this.blockBytes = 0;
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    this.n = 0;
  }
}

/** Records packed for handing between threads: bytes, record starts (n + 1 of them) and keys. */
export interface PackedRecords {
  bytes: Uint8Array;
  n: number;
  starts: Uint32Array;
  hi: Uint32Array;
  lo: Uint32Array;
  ts: Float64Array;
}

const ROUND_BYTES = 1 << 19;
const ROUND_RECORDS = 1 << 13;

/** A growable RecordSink that packs its records (a worker's output for one batch). */
export class RecordBatch implements RecordSink {
  buf: Buffer;
  pos = 0;
  private n = 0;
  private starts: Uint32Array;
  private hi: Uint32Array;
  private lo: Uint32Array;
  private ts: Float64Array;

  /** Room for about `bytes` bytes and `records` records; `reuse` lends buffers handed back from an earlier batch. */
  constructor(bytes: number, records: number, reuse?: PackedRecords) {
    // Sizes are rounded up so that buffers handed back fit the next batch (recycling, not garbage).
    bytes = Math.ceil(Math.max(256, bytes) / ROUND_BYTES) * ROUND_BYTES;
    records = Math.ceil(Math.max(64, records) / ROUND_RECORDS) * ROUND_RECORDS;
    const fits = (a: ArrayBufferView | undefined, n: number) => a !== undefined && a.byteLength >= n;
    this.buf = reuse && fits(reuse.bytes, bytes) ? Buffer.from(reuse.bytes.buffer, reuse.bytes.byteOffset, reuse.bytes.buffer.byteLength - reuse.bytes.byteOffset) : Buffer.allocUnsafeSlow(bytes);
    this.starts = reuse && fits(reuse.starts, 4 * (records + 1)) ? reuse.starts : new Uint32Array(records + 1);
    this.hi = reuse && fits(reuse.hi, 4 * records) ? reuse.hi : new Uint32Array(records);
    this.lo = reuse && fits(reuse.lo, 4 * records) ? reuse.lo : new Uint32Array(records);
    this.ts = reuse && fits(reuse.ts, 8 * records) ? reuse.ts : new Float64Array(records);
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
      const cap = Math.max(64, i * 2);
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

  /** The packed records (views of whole buffers, ready to transfer); the batch must not be used afterwards. */
  take(): PackedRecords {
    this.starts[this.n] = this.pos;
    return { bytes: this.buf.subarray(0, this.pos), n: this.n, starts: this.starts, hi: this.hi, lo: this.lo, ts: this.ts };
  }
}

/**
 * Sorts the record indices `order[0, m)` of one bucket (records whose ids share
 * their top 16 bits, in input order) by (hi, lo, ts), ties by index: stable.
 * Ids are hashes, so buckets are small; a big one is one id repeated, and goes to
 * the engine's stable sort.
 */
function sortBucket(order: Uint32Array, m: number, hi: Uint32Array, lo: Uint32Array, ts: Float64Array): void {
  if (m < 2) return;
  const cmp = (x: number, y: number) => hi[x]! - hi[y]! || lo[x]! - lo[y]! || ts[x]! - ts[y]! || x - y;
  if (m <= 32) {
    for (let i = 1; i < m; i++) {
      const x = order[i]!;
      let j = i - 1;
      while (j >= 0 && cmp(order[j]!, x) > 0) {
        order[j + 1] = order[j]!;
        j--;
      }
      order[j + 1] = x;
    }
  } else {
    order.set(Array.from(order.subarray(0, m)).sort(cmp));
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
    for (let i = from + 17; i < from + SORT_KEY_LENGTH; i++) t = t * 10 + buf[i]! - 48;
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

const less = (a: RunReader, b: RunReader) =>
  a.hi !== b.hi ? a.hi < b.hi : a.lo !== b.lo ? a.lo < b.lo : a.ts !== b.ts ? a.ts < b.ts : a.run < b.run;

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
  return [p.bytes.buffer, p.starts.buffer, p.hi.buffer, p.lo.buffer, p.ts.buffer] as ArrayBuffer[];
}
