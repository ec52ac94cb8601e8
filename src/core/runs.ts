// Where sorted lines go (a file, a stage's output, chunks handed on), and the k-way
// merge of sorted runs on disk, for the sorter's groups too big to sort in memory.
import * as fs from 'node:fs';
import { loadAddon } from './addons.js';
import { copyBytes, type ByteSink } from './bytes.js';
import { ioError } from './errors.js';
import { removeQuietly } from './temps.js';
import { ID_BYTES, TS_BYTES } from './records.js';

/** Most runs merged at once; more runs are first merged in groups of this many. */
export const FAN_IN = 64;

/** Where lines are written, whole, in order. */
export interface LineOut {
  put(src: Uint8Array, s: number, e: number): void;
  /**
   * Puts the lines order[0, n) (line k: `len[k]` bytes at offset `at[k]` mod 2^32 of
   * `sources[floor(at[k] / 2^32)]`) as put() would, one after another; false when it
   * cannot (then nothing was put). Optional.
   */
  putSorted?(sources: readonly Uint8Array[], at: Float64Array, len: Uint32Array, order: Uint32Array, n: number): boolean;
}

type Gather = (
  dst: Uint8Array,
  pos: number,
  sources: readonly Uint8Array[],
  at: Float64Array,
  len: Uint32Array,
  order: Uint32Array,
  from: number,
  to: number,
  end: Int32Array,
) => number;

/** The native copy of lines in order (src/native/scan.c), or null when it was not built; tests may turn it off. */
export const nativeGather: { fn: Gather | null } = { fn: loadAddon<{ gather: Gather }>('scan')?.gather ?? null };

/** Lines copied into a stage's output (a ByteSink, which hands its buffer on as it fills). */
export class SinkOut implements LineOut {
  private readonly end = new Int32Array(1);

  constructor(private readonly sink: ByteSink) {}

  put(src: Uint8Array, s: number, e: number): void {
    const sink = this.sink;
    sink.reserve(e - s);
    copyBytes(src, s, e, sink.buf, sink.pos);
    sink.pos += e - s;
  }

  putSorted(sources: readonly Uint8Array[], at: Float64Array, len: Uint32Array, order: Uint32Array, n: number): boolean {
    const gather = nativeGather.fn;
    if (gather === null) return false;
    const sink = this.sink;
    for (let j = 0; j < n; ) {
      // Room for the next line at least: the native copy takes as many as then fit.
      sink.reserve(len[order[j]!]!);
      const next = gather(sink.buf, sink.pos, sources, at, len, order, j, n, this.end);
      if (next === j) throw new Error('gather: no line copied into room for one');
      j = next;
      sink.pos = this.end[0]!;
    }
    return true;
  }
}

/** Lines gathered into fresh buffers of whole lines (1 MiB, or one longer line), handed out by `take()`. */
export class ChunkOut implements LineOut {
  private out: Buffer = Buffer.alloc(0);
  private o = 0;
  private done: Buffer[] = [];

  put(src: Uint8Array, s: number, e: number): void {
    const l = e - s;
    if (this.o + l > this.out.length) {
      if (this.o > 0) this.done.push(this.out.subarray(0, this.o));
      this.out = Buffer.allocUnsafe(Math.max(1 << 20, l));
      this.o = 0;
    }
    copyBytes(src, s, e, this.out, this.o);
    this.o += l;
  }

  /** The full buffers so far, and with `all` the one being filled too. */
  take(all = false): Buffer[] {
    if (all && this.o > 0) {
      this.done.push(this.out.subarray(0, this.o));
      this.out = Buffer.alloc(0);
      this.o = 0;
    }
    const d = this.done;
    this.done = [];
    return d;
  }
}

/**
 * Lines written to a file from `position` on, gathered in one reused buffer (a long
 * stretch goes straight from its source); `flush()` before the file is read.
 */
export class FileOut implements LineOut {
  private o = 0;

  constructor(
    private readonly fd: number,
    private readonly file: string,
    private readonly buf: Buffer,
    public position = 0,
  ) {}

  put(src: Uint8Array, s: number, e: number): void {
    const l = e - s;
    const long = l >= this.buf.length >> 2;
    if (long || this.o + l > this.buf.length) this.flush();
    if (long) {
      this.write(src, s, e);
      return;
    }
    copyBytes(src, s, e, this.buf, this.o);
    this.o += l;
  }

  /** Where the next line goes in the file. */
  get at(): number {
    return this.position + this.o;
  }

  flush(): void {
    const o = this.o;
    this.o = 0;
    this.write(this.buf, 0, o);
  }

  private write(src: Uint8Array, s: number, e: number): void {
    this.position = writeAt(this.fd, this.file, src, s, e, this.position);
  }
}

/** Writes `src[s, e)` to `fd` (the file `file`, for its errors) at `position`; returns the position after it. */
export function writeAt(fd: number, file: string, src: Uint8Array, s: number, e: number, position: number): number {
  while (s < e) {
    let n: number;
    try {
      n = fs.writeSync(fd, src, s, e - s, position);
    } catch (err) {
      throw ioError(err, file, 'write');
    }
    s += n;
    position += n;
  }
  return position;
}

/** Reads the bytes [from, to) of `fd` (the file `file`, for its errors) into `buf` at `at`; returns where they end in `buf`. */
export function readAt(fd: number, file: string, from: number, to: number, buf: Uint8Array, at: number): number {
  while (from < to) {
    let n: number;
    try {
      n = fs.readSync(fd, buf, at, to - from, from);
    } catch (err) {
      throw ioError(err, file, 'read');
    }
    if (n === 0) throw new Error(`sort spill ${file} ends early`);
    from += n;
    at += n;
  }
  return at;
}

/** Writes a new file with `fill` (a failure leaves it to the removal of the spill directory). */
export function writeFile(file: string, buf: Buffer, fill: (out: FileOut) => void): void {
  let fd: number;
  try {
    fd = fs.openSync(file, 'w', 0o600);
  } catch (err) {
    throw ioError(err, file, 'open for writing');
  }
  try {
    const out = new FileOut(fd, file, buf);
    fill(out);
    out.flush();
  } finally {
    fs.closeSync(fd);
  }
}

/** The value of 8 lower-case hex digits at buf[at]. */
export function hex8(buf: Uint8Array, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) {
    const c = buf[i]!;
    v = v * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return v;
}

/** The timestamp of the record line at buf[at], as the number YYYYMMDDhhmmss. */
export function tsOfLine(buf: Uint8Array, at: number): number {
  let t = 0;
  for (let i = at + ID_BYTES + 1; i < at + ID_BYTES + 1 + TS_BYTES; i++) t = t * 10 + buf[i]! - 48;
  return t;
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
    this.s = from;
    this.e = lf + 1;
    this.hi = hex8(this.buf, from);
    this.lo = hex8(this.buf, from + 8);
    this.ts = tsOfLine(this.buf, from);
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

const less = (a: RunReader, b: RunReader) => (a.hi !== b.hi ? a.hi < b.hi : a.lo !== b.lo ? a.lo < b.lo : a.ts !== b.ts ? a.ts < b.ts : a.run < b.run);

/**
 * Merges the sorted runs `files` (earlier runs hold earlier lines: ties go to them)
 * into `out`, first in rounds of FAN_IN into new runs (`newRun()` names each), each
 * merged run removed once merged; yields every few thousand lines. `block`: read
 * buffer bytes for that many runs.
 */
export function* mergeRuns(files: string[], out: LineOut, newRun: () => string, block: (runs: number) => number, buf: Buffer): Generator<void> {
  while (files.length > FAN_IN) {
    const group = files.splice(0, FAN_IN);
    const file = newRun();
    writeFile(file, buf, (o) => {
      for (const _ of merged(group, block(group.length), o));
    });
    for (const f of group) removeQuietly(f);
    // The merged run holds the earliest lines of all: it goes first, keeping ties stable.
    files.unshift(file);
  }
  yield* merged(files, block(files.length), out);
  for (const f of files) removeQuietly(f);
}

/** Merges sorted runs into `out`, yielding every 4096 lines. */
function* merged(files: readonly string[], block: number, out: LineOut): Generator<void> {
  const heap: RunReader[] = [];
  try {
    files.forEach((file, run) => {
      const r = new RunReader(file, block, run);
      heap.push(r);
      if (r.next()) siftUp(heap, heap.length - 1);
      else heap.pop();
    });
    for (let lines = 1; heap.length > 0; lines++) {
      const top = heap[0]!;
      out.put(top.buf, top.s, top.e);
      if (!top.next()) {
        const last = heap.pop()!;
        if (heap.length === 0) break;
        heap[0] = last;
      }
      siftDown(heap, 0);
      if ((lines & 4095) === 0) yield;
    }
  } finally {
    for (const r of heap) r.close();
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
