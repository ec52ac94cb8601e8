// Records packed for handing between threads and to the sorter: bytes grouped by the
// top 8 bits of the id, with their keys in typed arrays.
import { grown } from './arrays.js';
import { putBytes } from './bytes.js';

/** Records are grouped by the id's top 8 bits. */
export const GROUP_BITS = 8;

/** Where a record is written: the caller fills `buf` from `pos`, then calls `commit()`. */
export interface RecordSink {
  buf: Buffer;
  pos: number;
  /** Makes room for a record of up to `max` bytes at `buf[pos]` (may replace `buf`). */
  reserve(max: number): void;
  /** As reserve, for a record whose id's high half is `hi`, where a sink that groups records by id has it. */
  reserveFor?(hi: number, max: number): void;
  /** Adds the record written at `buf[pos, end)` (LF included) with its sort key. */
  commit(end: number, hi: number, lo: number, ts: number): void;
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

/**
 * Sizes are rounded up to these, so that buffers handed back fit a later batch, while
 * a batch the sorter keeps wastes little (about 32 KiB of 1.3 MiB, 10 KiB of keys).
 */
const ROUND_BYTES = 1 << 16;
const ROUND_RECORDS = 1 << 9;

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
  private readonly counts = new Uint32Array((1 << GROUP_BITS) + 1);
  private readonly byteAt = new Uint32Array(1 << GROUP_BITS);

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
    const p = packedFor(bytesUsed, n, reuse);
    // A counting sort by the top 8 bits of the id: where each group starts, in records and bytes.
    const shift = 32 - GROUP_BITS;
    counts.fill(0);
    byteAt.fill(0);
    for (let k = 0; k < n; k++) {
      const g = hi[k]! >>> shift;
      counts[g + 1]!++;
      byteAt[g]! += starts[k + 1]! - starts[k]!;
    }
    for (let g = 0, at = 0; g < 1 << GROUP_BITS; g++) {
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

/** Packed records for `n` records of `bytesUsed` bytes, in `reuse`'s buffers where they fit (sizes rounded up, so that buffers handed back fit a later batch). */
function packedFor(bytesUsed: number, n: number, reuse: PackedRecords | undefined): PackedRecords {
  const size = Math.ceil(Math.max(256, bytesUsed) / ROUND_BYTES) * ROUND_BYTES;
  const records = Math.ceil((n + 1) / ROUND_RECORDS) * ROUND_RECORDS;
  const fits = (a: ArrayBufferView | undefined, len: number) => a !== undefined && a.byteLength >= len;
  return {
    bytes:
      reuse && reuse.bytes.buffer.byteLength >= size ? new Uint8Array(reuse.bytes.buffer, 0, bytesUsed) : new Uint8Array(new ArrayBuffer(size), 0, bytesUsed),
    n,
    starts: reuse && fits(reuse.starts, 4 * records) ? reuse.starts : new Uint32Array(records),
    hi: reuse && fits(reuse.hi, 4 * records) ? reuse.hi : new Uint32Array(records),
    lo: reuse && fits(reuse.lo, 4 * records) ? reuse.lo : new Uint32Array(records),
    ts: reuse && fits(reuse.ts, 8 * records) ? reuse.ts : new Float64Array(records),
    parts: reuse ? reuse.parts : new Uint32Array((1 << GROUP_BITS) + 1),
  };
}

/** The buffers of packed records, for a transfer list. */
export function packedBuffers(p: PackedRecords): ArrayBuffer[] {
  return [p.bytes.buffer, p.starts.buffer, p.hi.buffer, p.lo.buffer, p.ts.buffer, p.parts.buffer] as ArrayBuffer[];
}

const EMPTY = Buffer.alloc(0);

/**
 * A RecordSink that writes each record straight into its group's own buffer (the
 * writer names the id first: reserveFor), so that take() packs a batch with one copy
 * per group instead of one per record. The group buffers are kept for the next batch.
 */
export class GroupedBatch implements RecordSink {
  buf: Buffer = EMPTY;
  pos = 0;
  private readonly groups: Buffer[] = Array.from({ length: 1 << GROUP_BITS }, () => EMPTY);
  private readonly used = new Uint32Array(1 << GROUP_BITS);
  private g = 0;
  private n = 0;
  /** For each record, in input order: its group, where it starts in its group buffer, its key. */
  private group: Uint8Array<ArrayBuffer> = new Uint8Array(1024);
  private at = new Uint32Array(1024);
  private hi = new Uint32Array(1024);
  private lo = new Uint32Array(1024);
  private ts = new Float64Array(1024);
  private readonly counts = new Uint32Array((1 << GROUP_BITS) + 1);
  private readonly base = new Uint32Array(1 << GROUP_BITS);

  reserve(): void {
    throw new Error('GroupedBatch: reserveFor names the group');
  }

  reserveFor(hi: number, max: number): void {
    const g = hi >>> (32 - GROUP_BITS);
    let b = this.groups[g]!;
    const at = this.used[g]!;
    if (at + max > b.length) {
      const bigger = Buffer.allocUnsafe(Math.max(4096, 2 * b.length, at + max));
      b.copy(bigger, 0, 0, at);
      b = this.groups[g] = bigger;
    }
    this.g = g;
    this.buf = b;
    this.pos = at;
  }

  commit(end: number, hi: number, lo: number, ts: number): void {
    const k = this.n;
    if (k === this.hi.length) {
      this.group = grown8(this.group);
      this.at = grown(this.at);
      this.hi = grown(this.hi);
      this.lo = grown(this.lo);
      this.ts = grown(this.ts);
    }
    const g = this.g;
    this.group[k] = g;
    this.at[k] = this.used[g]!;
    this.hi[k] = hi;
    this.lo[k] = lo;
    this.ts[k] = ts;
    this.used[g] = end;
    this.n = k + 1;
  }

  /** The records committed since the last take(), packed as RecordBatch.take() packs them, in `reuse`'s buffers where they fit. */
  take(reuse?: PackedRecords): PackedRecords {
    const n = this.n;
    const { counts, base, used, group } = this;
    let bytesUsed = 0;
    for (let g = 0; g < 1 << GROUP_BITS; g++) {
      base[g] = bytesUsed;
      bytesUsed += used[g]!;
    }
    const p = packedFor(bytesUsed, n, reuse);
    counts.fill(0);
    for (let k = 0; k < n; k++) counts[group[k]! + 1]!++;
    for (let g = 0; g < 1 << GROUP_BITS; g++) {
      counts[g + 1]! += counts[g]!;
      if (used[g]! > 0) p.bytes.set(this.groups[g]!.subarray(0, used[g]!), base[g]!);
    }
    p.parts.set(counts);
    for (let k = 0; k < n; k++) {
      const g = group[k]!;
      const j = counts[g]!++;
      p.starts[j] = base[g]! + this.at[k]!;
      p.hi[j] = this.hi[k]!;
      p.lo[j] = this.lo[k]!;
      p.ts[j] = this.ts[k]!;
    }
    p.starts[n] = bytesUsed;
    used.fill(0);
    this.n = 0;
    return p;
  }
}

function grown8(a: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(a.length * 2);
  b.set(a);
  return b;
}
