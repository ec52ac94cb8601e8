// The keys of one group of records (ids sharing their top 8 bits), sorted in memory:
// a radix sort on the id's next bytes, then by timestamp, ties in the order added.
import type { PackedRecords } from './packed.js';
import { hex8, tsOfLine, type LineOut } from './runs.js';

/** A record's place: source number * 2^32 + offset in that source. */
const SOURCE_SCALE = 2 ** 32;
/** Buckets this small are sorted by insertion. */
const SMALL = 32;
/** The widest span of timestamps (as numbers YYYYMMDDhhmmss) one id's records are counting-sorted over: an hour's is 5959. */
const MAX_TS_RANGE = 1 << 16;

/**
 * The records of one group, from several sources (byte arrays): where each is and
 * its key; `writeSorted` writes them in (id, timestamp) order, ties in the order they
 * were added. The arrays are kept for the next group.
 */
export class GroupKeys {
  private at = new Float64Array(1024);
  private len = new Uint32Array(1024);
  private hi = new Uint32Array(1024);
  private lo = new Uint32Array(1024);
  private ts = new Float64Array(1024);
  private order = new Uint32Array(1024);
  private tmp = new Uint32Array(1024);
  /** One 257-count table per radix level (bytes 1 to 7 of the id). */
  private readonly counts = new Int32Array(8 * 257);
  /** Counts by timestamp for byTimestampCount, made on first use. */
  private tsCounts: Int32Array | null = null;
  private n = 0;

  clear(): void {
    this.n = 0;
  }

  /** Adds each record line (LF-terminated, key first) of `buf[from, to)`, which is source `src`. */
  addLines(buf: Uint8Array, from: number, to: number, src: number): void {
    while (from < to) {
      let e = from + 31;
      while (buf[e] !== 10) e++;
      this.push(src * SOURCE_SCALE + from, e + 1 - from, hex8(buf, from), hex8(buf, from + 8), tsOfLine(buf, from));
      from = e + 1;
    }
  }

  /**
   * Adds `c` records whose keys and lengths are given, lying back to back in source 0
   * from `at` on; returns where the last one ends.
   */
  addKeys(ts: Float64Array, len: Uint32Array, hi: Uint32Array, lo: Uint32Array, c: number, at: number): number {
    for (let k = 0; k < c; k++) {
      this.push(at, len[k]!, hi[k]!, lo[k]!, ts[k]!);
      at += len[k]!;
    }
    return at;
  }

  /** Adds group `g` of a packed batch, which is source `src`, reading its bytes through once in order (so that they are in the cache). */
  addGroup(b: PackedRecords, g: number, src: number): void {
    const first = b.parts[g]!;
    const last = b.parts[g + 1]!;
    if (first === last) return;
    const { starts, hi, lo, ts, bytes } = b;
    let touched = 0;
    for (let i = starts[first]!; i < starts[last]!; i += 64) touched += bytes[i]!;
    if (touched < 0) throw new Error('unreachable: bytes are not negative');
    const base = src * SOURCE_SCALE;
    for (let k = first; k < last; k++) this.push(base + starts[k]!, starts[k + 1]! - starts[k]!, hi[k]!, lo[k]!, ts[k]!);
  }

  /** Writes the records in order to `out`; `sources[s]` holds source s. */
  writeSorted(out: LineOut, sources: readonly Uint8Array[]): void {
    const n = this.n;
    const order = this.order;
    for (let k = 0; k < n; k++) order[k] = k;
    this.sortRange(0, n, 1);
    const { at, len } = this;
    if (out.putSorted?.(sources, at, len, order, n)) return;
    for (let j = 0; j < n; j++) {
      const k = order[j]!;
      const a = at[k]!;
      const src = Math.floor(a / SOURCE_SCALE);
      const s = a - src * SOURCE_SCALE;
      out.put(sources[src]!, s, s + len[k]!);
    }
  }

  private push(at: number, len: number, hi: number, lo: number, ts: number): void {
    const k = this.n++;
    if (k === this.at.length) this.grow();
    this.at[k] = at;
    this.len[k] = len;
    this.hi[k] = hi;
    this.lo[k] = lo;
    this.ts[k] = ts;
  }

  private grow(): void {
    const size = this.at.length * 2;
    const more = <T extends Float64Array | Uint32Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(size);
      b.set(a);
      return b;
    };
    this.at = more(this.at);
    this.len = more(this.len);
    this.hi = more(this.hi);
    this.lo = more(this.lo);
    this.ts = more(this.ts);
    this.order = new Uint32Array(size);
    this.tmp = new Uint32Array(size);
  }

  /**
   * Sorts order[from, to), whose ids share their bytes before `byte` (0 to 7, the high
   * half first), by (id, timestamp, number): a stable counting sort on byte `byte`,
   * then each bucket on the next; small buckets, and one id's records, by comparison.
   */
  private sortRange(from: number, to: number, byte: number): void {
    if (to - from < 2) return;
    if (to - from <= SMALL || byte === 8) {
      this.byComparison(from, to);
      return;
    }
    const { order, tmp } = this;
    const key = byte < 4 ? this.hi : this.lo;
    const shift = 24 - 8 * (byte & 3);
    const c = this.counts.subarray(byte * 257, byte * 257 + 257);
    c.fill(0);
    for (let j = from; j < to; j++) c[((key[order[j]!]! >>> shift) & 255) + 1]!++;
    c[0] = from;
    for (let b = 0; b < 256; b++) c[b + 1]! += c[b]!;
    for (let j = from; j < to; j++) {
      const k = order[j]!;
      tmp[c[(key[k]! >>> shift) & 255]!++] = k;
    }
    order.set(tmp.subarray(from, to), from);
    // c[b] is now where bucket b ends.
    for (let b = 0, start = from; b < 256; start = c[b++]!) this.sortRange(start, c[b]!, byte + 1);
  }

  private byComparison(from: number, to: number): void {
    const { order, hi, lo, ts } = this;
    const cmp = (x: number, y: number) => hi[x]! - hi[y]! || lo[x]! - lo[y]! || ts[x]! - ts[y]! || x - y;
    if (to - from <= SMALL) {
      for (let i = from + 1; i < to; i++) {
        const x = order[i]!;
        let j = i - 1;
        while (j >= from && cmp(order[j]!, x) > 0) {
          order[j + 1] = order[j]!;
          j--;
        }
        order[j + 1] = x;
      }
    } else if (!this.byTimestampCount(from, to)) {
      order.set(Array.from(order.subarray(from, to)).sort(cmp), from);
    }
  }

  /**
   * Sorts order[from, to), one id's records in the order added, by timestamp with a
   * stable counting sort, when their timestamps span a range small enough (one hour's
   * span a few thousand); returns whether it did. (A popular URL has thousands of
   * records in an hour: a comparison sort took a closure call per comparison.)
   */
  private byTimestampCount(from: number, to: number): boolean {
    const { order, ts, tmp } = this;
    let min = Infinity;
    let max = -Infinity;
    for (let j = from; j < to; j++) {
      const t = ts[order[j]!]!;
      if (t < min) min = t;
      if (t > max) max = t;
    }
    // Keys are whole numbers (14 digits at most); written so that a NaN declines too.
    const range = max - min + 1;
    if (!(range <= MAX_TS_RANGE && range <= 8 * (to - from))) return false;
    const c = (this.tsCounts ??= new Int32Array(MAX_TS_RANGE + 1));
    c.fill(0, 0, range + 1);
    for (let j = from; j < to; j++) c[ts[order[j]!]! - min + 1]!++;
    c[0] = from;
    for (let v = 0; v < range; v++) c[v + 1]! += c[v]!;
    for (let j = from; j < to; j++) {
      const k = order[j]!;
      tmp[c[ts[k]! - min]!++] = k;
    }
    order.set(tmp.subarray(from, to), from);
    return true;
  }
}
