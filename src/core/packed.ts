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
    const size = Math.ceil(Math.max(256, bytesUsed) / ROUND_BYTES) * ROUND_BYTES;
    const records = Math.ceil((n + 1) / ROUND_RECORDS) * ROUND_RECORDS;
    const fits = (a: ArrayBufferView | undefined, len: number) => a !== undefined && a.byteLength >= len;
    const p: PackedRecords = {
      bytes: reuse && reuse.bytes.buffer.byteLength >= size ? new Uint8Array(reuse.bytes.buffer, 0, bytesUsed) : new Uint8Array(new ArrayBuffer(size), 0, bytesUsed),
      n,
      starts: reuse && fits(reuse.starts, 4 * records) ? reuse.starts : new Uint32Array(records),
      hi: reuse && fits(reuse.hi, 4 * records) ? reuse.hi : new Uint32Array(records),
      lo: reuse && fits(reuse.lo, 4 * records) ? reuse.lo : new Uint32Array(records),
      ts: reuse && fits(reuse.ts, 8 * records) ? reuse.ts : new Float64Array(records),
      parts: reuse ? reuse.parts : new Uint32Array((1 << GROUP_BITS) + 1),
    };
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

/** The buffers of packed records, for a transfer list. */
export function packedBuffers(p: PackedRecords): ArrayBuffer[] {
  return [p.bytes.buffer, p.starts.buffer, p.hi.buffer, p.lo.buffer, p.ts.buffer, p.parts.buffer] as ArrayBuffer[];
}
