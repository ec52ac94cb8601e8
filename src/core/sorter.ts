// Stable external sort of TSV lines by a fixed-width key prefix, in bounded memory:
// lines are buffered up to a byte budget, each full buffer is sorted and spilled as a
// run to a private temporary directory, and the runs are k-way merged at the end.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { ioError } from './errors.js';
import { FileLineReader, FileWriter, liveTempFiles, removeQuietly } from './tsv.js';

export interface SorterOptions {
  /** Length of the sort key: the line's first `keyLength` characters (ASCII). */
  keyLength: number;
  /** Budget for buffered lines, in bytes (estimated). */
  memoryBytes: number;
  /** Directory for spilled runs. */
  tmpDir: string;
}

/**
 * Estimated heap bytes per buffered line beyond its characters and the sort's own
 * arrays (`sortBytesPerLine`). Measured with process.memoryUsage() after gc() on
 * 300k analyze-dump records (90 characters on average): 34 bytes (string header,
 * array slot and growth); the rest is headroom for garbage between collections.
 */
export const LINE_OVERHEAD = 40;

// Packed sort keys hold a digit of 4 key characters (7 bits each) above a 25-bit
// line index, exactly representable in a double; so a run holds at most 2^25 lines.
const INDEX_BITS = 25;
const INDEX_SCALE = 2 ** INDEX_BITS;
const MAX_RUN_LINES = INDEX_SCALE - 1;
/** Most runs merged at once; more runs are first merged in groups of this many. */
const FAN_IN = 64;

/**
 * Collects lines (without LF) and hands them back sorted by their key prefix,
 * ties in input order. Beyond `memoryBytes` (estimated), sorted runs spill to a
 * private directory under `tmpDir`, which is removed after `drain()`, by
 * `dispose()`, and by the stage runner on any exit (it is in `liveTempFiles`).
 */
export class LineSorter {
  private lines: string[] = [];
  private bytes = 0;
  private seq = 0;
  private dir: string | null = null;
  private runs: string[] = [];
  private runNo = 0;

  private readonly perLine: number;
  /** Half the budget for the buffered run: the rest is for merge read buffers and the garbage V8 keeps between collections (measured: RSS ~ baseline + 2x run). */
  private readonly runBudget: number;

  constructor(private readonly opts: SorterOptions) {
    this.perLine = LINE_OVERHEAD + sortBytesPerLine(opts.keyLength);
    this.runBudget = Math.floor(opts.memoryBytes * 0.5);
  }

  /** Number of lines added. */
  get count(): number {
    return this.seq;
  }

  /** Number of runs spilled to disk so far. */
  get spilledRuns(): number {
    return this.runNo;
  }

  add(line: string): void {
    // charCodeAt flattens a built-up (cons) string now, so the buffer does not keep
    // its pieces, or the whole input line they were sliced from, alive.
    line.charCodeAt(0);
    this.lines.push(line);
    this.bytes += line.length + this.perLine;
    this.seq++;
    if (this.bytes >= this.runBudget || this.lines.length >= MAX_RUN_LINES) this.spill();
  }

  /** Calls `onLine` for every line in sorted order (awaiting it when it returns a promise). */
  async drain(onLine: (line: string) => void | Promise<void>): Promise<void> {
    if (this.runs.length === 0) {
      const lines = this.lines;
      this.lines = [];
      this.bytes = 0;
      const order = sortOrder(lines, this.opts.keyLength);
      for (let i = 0; i < order.length; i++) {
        const p = onLine(lines[order[i]!]!);
        if (p) await p;
      }
      return;
    }
    if (this.lines.length > 0) this.spill();
    try {
      while (this.runs.length > FAN_IN) {
        const group = this.runs.splice(0, FAN_IN);
        const file = this.nextRunFile();
        const w = new FileWriter(file, 'w', 1 << 20);
        const batch: string[] = [];
        mergeRuns(group, this.opts.keyLength, this.readBlock(group.length), (line) => {
          batch.push(line);
          if (batch.length === 4096) {
            w.write(batch.join('\n') + '\n');
            batch.length = 0;
          }
        });
        if (batch.length) w.write(batch.join('\n') + '\n');
        w.close();
        for (const f of group) removeQuietly(f);
        // The merged run holds the earliest lines of all: it goes first, keeping ties stable.
        this.runs.unshift(file);
      }
      await mergeRunsAsync(this.runs, this.opts.keyLength, this.readBlock(this.runs.length), onLine);
    } finally {
      this.dispose();
    }
  }

  /** Drops everything buffered or spilled, and removes the spill directory. */
  dispose(): void {
    this.lines = [];
    this.bytes = 0;
    this.runs = [];
    if (this.dir !== null) {
      removeQuietly(this.dir);
      liveTempFiles.delete(this.dir);
      this.dir = null;
    }
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
    const lines = this.lines;
    this.lines = [];
    this.bytes = 0;
    const order = sortOrder(lines, this.opts.keyLength);
    const file = this.nextRunFile();
    const w = new FileWriter(file, 'w', 1 << 20);
    try {
      const n = order.length;
      for (let i = 0; i < n; i += 4096) {
        const end = Math.min(n, i + 4096);
        let text = '';
        for (let j = i; j < end; j++) text += lines[order[j]!]! + '\n';
        w.write(text);
      }
      w.close();
    } catch (err) {
      w.abandon();
      throw err;
    }
    this.runs.push(file);
    // The spilled run is garbage now, hundreds of MiB of it. V8 would let the heap
    // grow to a multiple of the budget before collecting it; a full collection here
    // keeps peak RSS near the budget whatever the input size (~0.1 s per run).
    fullGc();
  }
}

let gcFn: (() => void) | null | undefined;

/** Runs a full garbage collection if the engine lets us (it does in Node 20). */
function fullGc(): void {
  if (gcFn === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      gcFn = vm.runInNewContext('gc') as () => void;
    } catch {
      gcFn = null;
    }
  }
  gcFn?.();
}

/** Compares the key prefixes of `a` and `b` from character `from` on (UTF-16 units; keys are ASCII). */
function compareKeys(a: string, b: string, from: number, k: number): number {
  for (let i = from; i < k; i++) {
    const ca = i < a.length ? a.charCodeAt(i) : -1;
    const cb = i < b.length ? b.charCodeAt(i) : -1;
    if (ca !== cb) return ca - cb;
    if (ca === -1) return 0;
  }
  return 0;
}

/**
 * Key characters from..from+3 of `s` (those below k) packed into 28 bits, 7 bits
 * each, 0 past the end; -1 if one of them is >= 126 (does not fit 7 bits).
 */
function pack4(s: string, from: number, k: number): number {
  let v = 0;
  for (let i = from; i < from + 4; i++) {
    let c = 0;
    if (i < k && i < s.length) {
      c = s.charCodeAt(i) + 1;
      if (c > 126) return -1;
    }
    v = (v << 7) | c;
  }
  return v;
}

/** Bytes per line that `sortOrder` allocates for a key of `k` characters. */
export function sortBytesPerLine(k: number): number {
  return 4 * Math.max(1, Math.ceil(k / 4)) + 16;
}

/**
 * The stable sorted order of `lines` by key prefix, as indices: an MSD radix sort
 * whose digits are 4 key characters (7 bits each), each level sorted by the
 * engine's native numeric sort over packed (digit, position) doubles, so ties stay
 * in input order. The digits are extracted once, in line order, into one typed
 * array: later levels touch lines in sorted (random) order, and reading a compact
 * row there is much cheaper than reading the string again (cache misses dominated
 * an earlier version). Keys with a character >= 126 fall back to a comparison sort.
 */
export function sortOrder(lines: readonly string[], k: number): Int32Array {
  const n = lines.length;
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  if (n < 2) return order;
  const D = Math.max(1, Math.ceil(k / 4));
  const digits = new Int32Array(n * D);
  let ascii = true;
  for (let i = 0; i < n && ascii; i++) {
    const s = lines[i]!;
    for (let d = 0; d < D; d++) {
      const v = pack4(s, d * 4, k);
      if (v < 0) ascii = false;
      digits[i * D + d] = v;
    }
  }
  if (!ascii) {
    order.set(Array.from(order).sort((a, b) => compareKeys(lines[a]!, lines[b]!, 0, k) || a - b));
    return order;
  }
  refine(digits, D, order, 0, n, 0, new Float64Array(n), new Int32Array(n));
  return order;
}

/** Sorts order[start, end), whose keys agree on digits [0, level), by the remaining digits, then index. */
function refine(
  digits: Int32Array,
  D: number,
  order: Int32Array,
  start: number,
  end: number,
  level: number,
  packed: Float64Array,
  tmp: Int32Array,
): void {
  for (;;) {
    const len = end - start;
    if (len <= 16) {
      for (let i = start + 1; i < end; i++) {
        const x = order[i]!;
        let j = i - 1;
        while (j >= start) {
          const y = order[j]!;
          let c = 0;
          for (let d = level; d < D && c === 0; d++) c = digits[y * D + d]! - digits[x * D + d]!;
          if (c < 0 || (c === 0 && y < x)) break;
          order[j + 1] = y;
          j--;
        }
        order[j + 1] = x;
      }
      return;
    }
    if (level >= D) return; // equal keys, already in index order
    let same = true;
    const first = digits[order[start]! * D + level]!;
    for (let j = 0; j < len; j++) {
      const v = digits[order[start + j]! * D + level]!;
      if (v !== first) same = false;
      packed[start + j] = v * INDEX_SCALE + j;
    }
    if (!same) break;
    level++; // one digit for the whole group (say, one id repeated): nothing to reorder
  }
  const len = end - start;
  const view = packed.subarray(start, end);
  view.sort();
  for (let j = 0; j < len; j++) tmp[start + j] = order[start + (view[j]! % INDEX_SCALE)]!;
  order.set(tmp.subarray(start, end), start);
  let gs = start;
  let g = Math.floor(view[0]! / INDEX_SCALE);
  for (let j = 1; j <= len; j++) {
    const h = j < len ? Math.floor(view[j]! / INDEX_SCALE) : -1;
    if (h !== g) {
      if (start + j - gs > 1) refine(digits, D, order, gs, start + j, level + 1, packed, tmp);
      gs = start + j;
      g = h;
    }
  }
}

/** One run being merged: its reader, current line and that line's key. */
interface RunCursor {
  reader: FileLineReader;
  line: string;
  key: string;
  /** Run number: earlier runs hold earlier input lines, so it breaks ties stably. */
  run: number;
}

function openCursors(files: readonly string[], k: number, block: number): RunCursor[] {
  const heap: RunCursor[] = [];
  files.forEach((file, run) => {
    const reader = new FileLineReader(file, block);
    const line = reader.next();
    if (line !== null) heapPush(heap, { reader, line, key: line.slice(0, k), run });
    else reader.close();
  });
  return heap;
}

/** Advances the top cursor; closes it at the end of its run. */
function advance(heap: RunCursor[], k: number): void {
  const top = heap[0]!;
  const next = top.reader.next();
  if (next === null) {
    top.reader.close();
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      siftDown(heap, 0);
    }
  } else {
    top.line = next;
    top.key = next.slice(0, k);
    siftDown(heap, 0);
  }
}

function mergeRuns(files: readonly string[], k: number, block: number, onLine: (line: string) => void): void {
  const heap = openCursors(files, k, block);
  try {
    while (heap.length > 0) {
      onLine(heap[0]!.line);
      advance(heap, k);
    }
  } finally {
    for (const c of heap) c.reader.close();
  }
}

async function mergeRunsAsync(
  files: readonly string[],
  k: number,
  block: number,
  onLine: (line: string) => void | Promise<void>,
): Promise<void> {
  const heap = openCursors(files, k, block);
  try {
    while (heap.length > 0) {
      const p = onLine(heap[0]!.line);
      advance(heap, k);
      if (p) await p;
    }
  } finally {
    for (const c of heap) c.reader.close();
  }
}

const less = (a: RunCursor, b: RunCursor) => (a.key < b.key ? true : a.key > b.key ? false : a.run < b.run);

function heapPush(heap: RunCursor[], c: RunCursor): void {
  heap.push(c);
  let i = heap.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!less(heap[i]!, heap[p]!)) break;
    [heap[i], heap[p]] = [heap[p]!, heap[i]!];
    i = p;
  }
}

function siftDown(heap: RunCursor[], i: number): void {
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
