// Stable external sort of URL records by (id, timestamp), in bounded memory. Records
// stay in the packed batches they came in (bytes grouped by the id's top 8 bits, keys
// in typed arrays: no string per record, almost nothing for the garbage collector).
// Past the budget the batches spill, group after group, to one private temporary
// file, their keys to a second one; at the end each group is read back, sorted in
// memory with the group's batches still held, and written out: ids are hashes, so a
// group is about 1/256 of the records, and only a group far bigger than that is
// sorted by runs and a merge.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ByteSink } from './bytes.js';
import { ioError } from './errors.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly } from './temps.js';
import { GROUP_BITS, type PackedRecords } from './packed.js';
import { ChunkOut, FileOut, SinkOut, mergeRuns, readAt, writeAt, writeFile, type LineOut } from './runs.js';
import { GroupKeys } from './groupsort.js';

export { RecordBatch, packedBuffers, type PackedRecords, type RecordSink } from './packed.js';

/** The prefix of a sorter's spill directory in --tmp (see ownedTempPrefix). */
export const SPILL_PREFIX = 'master-server-sort-';

export interface SorterOptions {
  /** Budget for buffered records and their keys, in bytes. */
  memoryBytes: number;
  /** Directory for spilled runs. */
  tmpDir: string;
}

const GROUPS = 1 << GROUP_BITS;
/** Bytes of the buffer spills and runs are written through. */
const WRITE_BUFFER = 1 << 20;

/**
 * Bytes of a spilled record's key in the key file: each group of a spill is one block,
 * its c records' timestamps (Float64) then their lengths, id high halves and low halves
 * (Uint32), so that the group is read back without parsing its lines again.
 */
const KEY_BYTES = 20;

/** The memory a batch takes: its buffers, as allocated. */
function batchBytes(p: PackedRecords): number {
  return p.bytes.buffer.byteLength + p.starts.byteLength + p.hi.byteLength + p.lo.byteLength + p.ts.byteLength;
}

/**
 * Collects URL records (bytes ending in LF) with their keys (the id as two 32-bit
 * halves and the timestamp as the number YYYYMMDDhhmmss) and hands them back sorted
 * by (id, timestamp), ties in input order. The key must be the record's own first
 * 31 characters: a group too big to sort in memory is read back by that text. Beyond 50% of
 * `memoryBytes` the batches held spill (a "run" in the counts) to a private directory
 * under `tmpDir`, which is removed after `drain()`, by `dispose()`, and by the stage
 * runner on any exit (`liveTempFiles`).
 *
 * Records come in packed batches (RecordBatch.take(): grouped by the id's top byte),
 * kept as they are (`adoptPacked`) or copied (`addPacked`, for a caller that reuses
 * its batch). The output reads them group by group: each group's share of a batch is
 * one range, read through in order (read in arrival order from one arena instead,
 * every record was a cache miss: 1M records, 700 ms to hand out).
 */
export class RecordSorter {
  private batches: PackedRecords[] = [];
  /** Batches a spill freed, for reuse (takeSpare, addPacked). */
  private spare: PackedRecords[] = [];
  /** Bytes of the batches held. */
  private held = 0;
  /** Records held, and added in all. */
  private n = 0;
  private seq = 0;
  /** The memory the largest batch took. */
  private largestBatch = 0;
  /** For each spill, where each group starts in the spill file (GROUPS + 1 offsets). */
  private spills: Float64Array[] = [];
  /** For each spill, where each group's key block starts in the key file (GROUPS + 1 offsets). */
  private spillKeys: Float64Array[] = [];
  private readonly keys = new SpillKeys();
  private dir: string | null = null;
  private spillFd = -1;
  private spillFile = '';
  private spillEnd = 0;
  private runNo = 0;
  private writeBuf: Buffer | null = null;
  /** Half the budget for the batches held (and, after a spill, the spare batches kept to be filled again); the rest is for a group read back, its keys and the heap. */
  private readonly runBudget: number;

  constructor(private readonly opts: SorterOptions) {
    this.runBudget = Math.floor(opts.memoryBytes * 0.5);
  }

  /** Number of records added. */
  get count(): number {
    return this.seq;
  }

  /** Number of spills to disk so far. */
  get spilledRuns(): number {
    return this.spills.length;
  }

  /** The memory the batches held may take before they spill. */
  get runBytes(): number {
    return this.runBudget;
  }

  /** Adds a batch of packed records (as RecordBatch.take() leaves them), after everything added so far; keeps `p` itself, which the caller must not change again. */
  adoptPacked(p: PackedRecords): void {
    if (p.n === 0) return;
    const size = batchBytes(p);
    this.largestBatch = Math.max(this.largestBatch, size);
    if (this.held + size > this.runBudget && this.n > 0) this.spill();
    this.batches.push(p);
    this.held += size;
    this.n += p.n;
    this.seq += p.n;
    // A batch bigger than the budget alone goes to disk at once.
    if (this.held > this.runBudget) this.spill();
  }

  /** As adoptPacked, with a copy of `p` (in a spare batch where one fits): the caller may reuse `p`. */
  addPacked(p: PackedRecords): void {
    const n = p.n;
    if (n === 0) return;
    const used = p.starts[n]!;
    const i = this.spare.findIndex((s) => s.bytes.buffer.byteLength >= used && s.hi.length >= n && s.starts.length > n);
    const c = i >= 0 ? this.spare.splice(i, 1)[0] : undefined;
    const q: PackedRecords = {
      bytes: c ? new Uint8Array(c.bytes.buffer, 0, used) : new Uint8Array(used),
      n,
      starts: c?.starts ?? new Uint32Array(n + 1),
      hi: c?.hi ?? new Uint32Array(n),
      lo: c?.lo ?? new Uint32Array(n),
      ts: c?.ts ?? new Float64Array(n),
      parts: c?.parts ?? new Uint32Array(GROUPS + 1),
    };
    q.bytes.set(p.bytes.subarray(0, used));
    q.starts.set(p.starts.subarray(0, n + 1));
    q.hi.set(p.hi.subarray(0, n));
    q.lo.set(p.lo.subarray(0, n));
    q.ts.set(p.ts.subarray(0, n));
    q.parts.set(p.parts);
    this.adoptPacked(q);
  }

  /** A batch freed by a spill, whose buffers the caller may fill again, or undefined. */
  takeSpare(): PackedRecords | undefined {
    return this.spare.pop();
  }

  /** Whether the next batch or two may make the batches held spill: within two of the largest batches of the budget. */
  nearlyFull(): boolean {
    return this.n > 0 && this.runBudget - this.held < 2 * this.largestBatch;
  }

  /** Spills the batches held now (nothing when none is): a caller that sees nearlyFull() spills at a moment of its choosing. */
  spillNow(): void {
    if (this.n > 0) this.spill();
  }

  /** Hands the sorted records to `onChunk` as buffers of whole lines (awaiting it when it returns a promise). */
  async drain(onChunk: (chunk: Buffer) => void | Promise<void>): Promise<void> {
    const out = new ChunkOut();
    const hand = async (all: boolean) => {
      for (const chunk of out.take(all)) {
        const p = onChunk(chunk);
        if (p) await p;
      }
    };
    try {
      for (const _ of this.sorted(out)) await hand(false);
      await hand(true);
    } finally {
      this.dispose();
    }
  }

  /** Writes the sorted records to `sink`, awaiting `pause()` between groups (a stage's output: `flushIfFull`). */
  async drainTo(sink: ByteSink, pause: () => Promise<void> | undefined): Promise<void> {
    try {
      for (const _ of this.sorted(new SinkOut(sink))) {
        const p = pause();
        if (p) await p;
      }
    } finally {
      this.dispose();
    }
  }

  /** Drops everything buffered or spilled, and removes the spill directory. */
  dispose(): void {
    this.batches = [];
    this.spare = [];
    this.held = 0;
    this.n = 0;
    this.spills = [];
    this.spillKeys = [];
    if (this.spillFd >= 0) {
      fs.closeSync(this.spillFd);
      this.spillFd = -1;
    }
    this.keys.close();
    if (this.dir !== null) {
      removeQuietly(this.dir);
      liveTempFiles.delete(this.dir);
      this.dir = null;
    }
  }

  /** Every record in order into `out`, group by group, yielding after each group (and often within a merge). */
  private *sorted(out: LineOut): Generator<void> {
    this.spare = [];
    const keys = new GroupKeys();
    const limit = Math.floor(this.opts.memoryBytes * 0.3);
    const sizes = this.spilledGroupBytes();
    // One buffer for every group read back, as big as the biggest (a group of popular URLs
    // is several times the mean): grown by doubling, it reached twice that (38 MiB at 10M
    // lines) and left each smaller one to the garbage collector.
    let largest = 0;
    for (const bytes of sizes) if (bytes <= limit) largest = Math.max(largest, bytes);
    const spilled = Buffer.allocUnsafeSlow(largest);
    // A plain view: a line copied out of it costs less than out of a Buffer (whose subarray builds a Buffer).
    const spilledBytes = new Uint8Array(spilled.buffer, spilled.byteOffset, spilled.length);
    for (let g = 0; g < GROUPS; g++) {
      if (sizes[g]! > limit) {
        yield* this.byRuns(g, limit, out);
        continue;
      }
      keys.clear();
      let at = 0;
      for (const [i, o] of this.spills.entries()) {
        const from = at;
        at = this.readSpilled(o[g]!, o[g + 1]!, spilled, at);
        const k = this.spillKeys[i]!;
        this.keys.readInto(keys, k[g]!, k[g + 1]!, from, at);
      }
      for (const [i, b] of this.batches.entries()) keys.addGroup(b, g, i + 1);
      keys.writeSorted(out, [spilledBytes, ...this.batches.map((b) => b.bytes)]);
      yield;
    }
  }

  /** The bytes of each group in the spill file, all spills together. */
  private spilledGroupBytes(): Float64Array {
    const sizes = new Float64Array(GROUPS);
    for (const o of this.spills) for (let g = 0; g < GROUPS; g++) sizes[g]! += o[g + 1]! - o[g]!;
    return sizes;
  }

  /**
   * Group `g` when its spilled records alone pass `limit` bytes (one id repeated
   * without end): read back in pieces of about `limit` bytes, each sorted into a run,
   * the group's batches in memory into the last one, and the runs merged.
   */
  private *byRuns(g: number, limit: number, out: LineOut): Generator<void> {
    const keys = new GroupKeys();
    const runs: string[] = [];
    let piece = Buffer.allocUnsafeSlow(Math.max(limit, 4096));
    const sortInto = (fill: () => void, sources: Uint8Array[]) => {
      keys.clear();
      fill();
      const file = this.newRun();
      writeFile(file, this.buffer(), (o) => keys.writeSorted(o, sources));
      runs.push(file);
    };
    for (const o of this.spills) {
      for (let from = o[g]!; from < o[g + 1]!; ) {
        const end = o[g + 1]!;
        let want = Math.min(piece.length, end - from);
        let got = this.readSpilled(from, from + want, piece, 0);
        // A piece ends at a line's end; a line longer than the piece gets a piece of its own size.
        let last = piece.lastIndexOf(10, got - 1);
        while (last === -1) {
          const bigger = Buffer.allocUnsafeSlow(piece.length * 2);
          piece.copy(bigger, 0, 0, got);
          piece = bigger;
          want = Math.min(piece.length, end - from);
          got = this.readSpilled(from + got, from + want, piece, got);
          last = piece.lastIndexOf(10, got - 1);
        }
        const p = piece;
        sortInto(() => keys.addLines(p, 0, last + 1, 0), [p]);
        from += last + 1;
      }
    }
    sortInto(
      () => {
        for (const [i, b] of this.batches.entries()) keys.addGroup(b, g, i);
      },
      this.batches.map((b) => b.bytes),
    );
    yield* mergeRuns(
      runs,
      out,
      () => this.newRun(),
      (n) => Math.max(1 << 16, Math.min(1 << 20, Math.floor(this.opts.memoryBytes / (8 * n)))),
      this.buffer(),
    );
  }

  /** Reads the spill file's bytes [from, to) into `buf` at `at`; returns where they end in `buf`. */
  private readSpilled(from: number, to: number, buf: Buffer, at: number): number {
    return readAt(this.spillFd, this.spillFile, from, to, buf, at);
  }

  private buffer(): Buffer {
    return (this.writeBuf ??= Buffer.allocUnsafeSlow(WRITE_BUFFER));
  }

  private privateDir(): string {
    if (this.dir === null) {
      try {
        this.dir = fs.mkdtempSync(path.join(this.opts.tmpDir, ownedTempPrefix(SPILL_PREFIX)));
      } catch (err) {
        throw ioError(err, this.opts.tmpDir, 'create a temporary directory in');
      }
      liveTempFiles.add(this.dir);
    }
    return this.dir;
  }

  private newRun(): string {
    return path.join(this.privateDir(), `run-${String(this.runNo++).padStart(6, '0')}`);
  }

  /** Appends the batches held to the spill file, group by group (input order within a group), and frees them. */
  private spill(): void {
    if (this.spillFd < 0) {
      this.spillFile = path.join(this.privateDir(), 'spill');
      try {
        this.spillFd = fs.openSync(this.spillFile, 'w+', 0o600);
      } catch (err) {
        throw ioError(err, this.spillFile, 'open for writing');
      }
    }
    const offsets = new Float64Array(GROUPS + 1);
    const out = new FileOut(this.spillFd, this.spillFile, this.buffer(), this.spillEnd);
    const keyOffsets = new Float64Array(GROUPS + 1);
    this.keys.open(this.privateDir());
    for (let g = 0; g < GROUPS; g++) {
      offsets[g] = out.at;
      keyOffsets[g] = this.keys.at;
      for (const b of this.batches) {
        const s = b.starts[b.parts[g]!]!;
        const e = b.starts[b.parts[g + 1]!]!;
        if (e > s) out.put(b.bytes, s, e);
      }
      this.keys.write(this.batches, g);
    }
    out.flush();
    offsets[GROUPS] = this.spillEnd = out.at;
    keyOffsets[GROUPS] = this.keys.at;
    this.spills.push(offsets);
    this.spillKeys.push(keyOffsets);
    // Every batch of the run is kept to be filled again (one per batch added after it), not
    // left to the garbage collector, which let up to a run's worth of dead buffers wait
    // for a collection: batches held and spares together stay within one run's budget.
    for (const b of this.batches) this.spare.push(b);
    this.batches = [];
    this.held = 0;
    this.n = 0;
  }
}

/** The key file of a sorter's spills: each group's keys as one block (KEY_BYTES a record), written and read back. */
class SpillKeys {
  private fd = -1;
  private file = '';
  /** Where the next block goes. */
  at = 0;
  /** One block, as written or read: timestamps, then lengths, high and low halves. */
  private block = new ArrayBuffer(KEY_BYTES * 1024);

  open(dir: string): void {
    if (this.fd >= 0) return;
    this.file = path.join(dir, 'spill-keys');
    try {
      this.fd = fs.openSync(this.file, 'w+', 0o600);
    } catch (err) {
      throw ioError(err, this.file, 'open for writing');
    }
  }

  /** Appends the block of group `g` of `batches` (their records in order). */
  write(batches: readonly PackedRecords[], g: number): void {
    let c = 0;
    for (const b of batches) c += b.parts[g + 1]! - b.parts[g]!;
    if (c === 0) return;
    const { ts, len, hi, lo } = this.views(c);
    let j = 0;
    for (const b of batches) {
      const first = b.parts[g]!;
      const last = b.parts[g + 1]!;
      ts.set(b.ts.subarray(first, last), j);
      hi.set(b.hi.subarray(first, last), j);
      lo.set(b.lo.subarray(first, last), j);
      for (let k = first; k < last; k++) len[j++] = b.starts[k + 1]! - b.starts[k]!;
    }
    this.at = writeAt(this.fd, this.file, new Uint8Array(this.block), 0, KEY_BYTES * c, this.at);
  }

  /** Adds the records of the block at [from, to) to `keys`, as source 0 from `bytesFrom` (where their lines were read back) to `bytesTo`. */
  readInto(keys: GroupKeys, from: number, to: number, bytesFrom: number, bytesTo: number): void {
    const c = (to - from) / KEY_BYTES;
    if (c === 0) return;
    const { ts, len, hi, lo } = this.views(c);
    readAt(this.fd, this.file, from, to, new Uint8Array(this.block), 0);
    const end = keys.addKeys(ts, len, hi, lo, c, bytesFrom);
    if (end !== bytesTo) throw new Error(`sort spill ${this.file}: keys for ${end - bytesFrom} bytes of records, ${bytesTo - bytesFrom} read back`);
  }

  close(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
    this.at = 0;
  }

  /** Views of a block of `c` records (the buffer grown to hold it). */
  private views(c: number): { ts: Float64Array; len: Uint32Array; hi: Uint32Array; lo: Uint32Array } {
    if (KEY_BYTES * c > this.block.byteLength) this.block = new ArrayBuffer(Math.max(KEY_BYTES * c, 2 * this.block.byteLength));
    const b = this.block;
    return { ts: new Float64Array(b, 0, c), len: new Uint32Array(b, 8 * c, c), hi: new Uint32Array(b, 12 * c, c), lo: new Uint32Array(b, 16 * c, c) };
  }
}
