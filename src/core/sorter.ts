// Stable external sort of TSV lines by a fixed-width key prefix, in bounded memory:
// lines are buffered up to a byte budget, each full buffer is sorted and spilled as a
// run to a private temporary directory, and the runs are k-way merged at the end.
import * as fs from 'node:fs';
import * as path from 'node:path';
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
 * Estimated heap bytes per buffered line beyond its characters. Measured with
 * process.memoryUsage() after gc() on 300k analyze-dump records (90 characters on
 * average): 34 bytes (string header, array slot and growth); the sort adds 24 bytes
 * of typed arrays per line; the rest is headroom for garbage between collections.
 */
export const LINE_OVERHEAD = 64;

// Packed sort keys hold 4 key characters (7 bits each) above a 25-bit line index,
// exactly representable in a double; so a run holds at most 2^25 lines.
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

  constructor(private readonly opts: SorterOptions) {}

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
    this.bytes += line.length + LINE_OVERHEAD;
    this.seq++;
    if (this.bytes >= this.opts.memoryBytes || this.lines.length >= MAX_RUN_LINES) this.spill();
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
    return Math.max(1 << 16, Math.min(1 << 20, Math.floor(this.opts.memoryBytes / (4 * runs))));
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
  }
}

/** 7-bit code of character `i` of `s`: monotone in the character, 0 past the end of the line or key. */
function code7(s: string, i: number, k: number): number {
  if (i >= k) return 0;
  const c = s.charCodeAt(i);
  return c !== c ? 0 : c >= 126 ? 127 : c + 1;
}

/**
 * Key characters from..from+3 of `s` packed into 28 bits. A clamped character ends
 * the packed key (the rest counts as 0), so the packed head of the first 8 characters
 * is a non-decreasing function of the true key order: equal heads may hide different
 * keys, which the fix-up pass sorts, but a smaller head is always a smaller key.
 */
function pack4(s: string, from: number, key: number): number {
  let k = key < 8 ? key : 8;
  for (let i = 0; i < k; i++) {
    if (s.charCodeAt(i) >= 126) {
      k = i + 1;
      break;
    }
  }
  return ((code7(s, from, k) << 21) | (code7(s, from + 1, k) << 14) | (code7(s, from + 2, k) << 7) | code7(s, from + 3, k)) >>> 0;
}

/** Compares the key prefixes of `a` and `b` bytewise (UTF-16 units; keys are ASCII). */
function compareKeys(a: string, b: string, k: number): number {
  for (let i = 0; i < k; i++) {
    const ca = i < a.length ? a.charCodeAt(i) : -1;
    const cb = i < b.length ? b.charCodeAt(i) : -1;
    if (ca !== cb) return ca - cb;
    if (ca === -1) return 0;
  }
  return 0;
}

/**
 * The stable sorted order of `lines` by key prefix, as indices. Two LSD passes of
 * the engine's native numeric sort over packed (4 key chars, position) doubles order
 * by the first 8 characters; the (short) stretches equal there are then sorted by
 * the whole key, ties by index.
 */
export function sortOrder(lines: readonly string[], k: number): Int32Array {
  const n = lines.length;
  const order = new Int32Array(n);
  if (n === 0) return order;
  const packed = new Float64Array(n);
  if (k > 4) {
    for (let i = 0; i < n; i++) packed[i] = pack4(lines[i]!, 4, k) * INDEX_SCALE + i;
    packed.sort();
    for (let r = 0; r < n; r++) order[r] = packed[r]! % INDEX_SCALE;
    // rank-of-line, so the second pass keeps the first pass's order among equal heads
    const rank = new Int32Array(n);
    for (let r = 0; r < n; r++) rank[order[r]!] = r;
    for (let i = 0; i < n; i++) packed[i] = pack4(lines[i]!, 0, k) * INDEX_SCALE + rank[i]!;
    packed.sort();
    const byRank = order.slice();
    for (let r = 0; r < n; r++) order[r] = byRank[packed[r]! % INDEX_SCALE]!;
  } else {
    for (let i = 0; i < n; i++) packed[i] = pack4(lines[i]!, 0, k) * INDEX_SCALE + i;
    packed.sort();
    for (let r = 0; r < n; r++) order[r] = packed[r]! % INDEX_SCALE;
  }
  if (k <= 8 && k % 4 === 0) {
    // The packed characters are the whole key, unless a character was clamped (>= 127).
    let plain = true;
    for (let i = 0; i < n && plain; i++) {
      const s = lines[i]!;
      for (let j = 0; j < k; j++) if (s.charCodeAt(j) >= 126) plain = false;
    }
    if (plain) return order;
  }
  // Fix up stretches whose first 8 key characters pack equally.
  const cmp = (a: number, b: number) => compareKeys(lines[a]!, lines[b]!, k) || a - b;
  let start = 0;
  let h0 = pack4(lines[order[0]!]!, 0, k);
  let h1 = k > 4 ? pack4(lines[order[0]!]!, 4, k) : 0;
  for (let r = 1; r <= n; r++) {
    let a0 = -1;
    let a1 = -1;
    if (r < n) {
      const s = lines[order[r]!]!;
      a0 = pack4(s, 0, k);
      a1 = k > 4 ? pack4(s, 4, k) : 0;
    }
    if (a0 !== h0 || a1 !== h1) {
      const len = r - start;
      if (len > 16) {
        order.set(Array.from(order.subarray(start, r)).sort(cmp), start);
      } else if (len > 1) {
        for (let i = start + 1; i < r; i++) {
          const x = order[i]!;
          let j = i - 1;
          while (j >= start && cmp(order[j]!, x) > 0) {
            order[j + 1] = order[j]!;
            j--;
          }
          order[j + 1] = x;
        }
      }
      start = r;
      h0 = a0;
      h1 = a1;
    }
  }
  return order;
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
