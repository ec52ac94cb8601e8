// A set of byte strings numbered in order of arrival: the streaming stages look a
// field up by its bytes, without decoding it to a string (measured: a fresh string
// key costs 0.3-0.6 us in a Map, about as much as all the rest of a line's work).
import { grown } from './arrays.js';
import { copyBytes, utf8 } from './bytes.js';

/**
 * This process's hash seed. Keys come from the input (URLs, domains): with a fixed
 * hash a crafted reflog can put 65,536 URLs in one probe chain (measured: analyze-dump
 * 4.4 s against 0.58 s for as many ordinary URLs), so the hash is seeded, as V8's own
 * string hashes are, and mixed before its low bits pick a slot.
 */
const SEED = globalThis.crypto.getRandomValues(new Int32Array(1))[0]!;

/** The slot hash of `b[start, end)`. */
function hashOf(b: Uint8Array, start: number, end: number): number {
  // FNV-1a from the seed, then MurmurHash3's finalizer: a slot's low bits depend on
  // every byte (FNV's low bits depend only on the bytes' and the seed's low bits).
  let h = SEED;
  for (let i = start; i < end; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * Interns byte strings: `add` gives each distinct key a dense index (0, 1, ...),
 * the same one every time; `key` decodes one back to text. Memory: the keys'
 * bytes plus about 20 bytes per key.
 */
export class BytesIndex {
  private arena = new Uint8Array(1 << 16);
  private used = 0;
  private starts: Int32Array = new Int32Array(1024);
  private ends: Int32Array = new Int32Array(1024);
  private hashes: Int32Array = new Int32Array(1024);
  /** Open addressing: index + 1 of the key in each slot, 0 when empty. */
  private slots = new Int32Array(2048);
  /** How many distinct keys there are. */
  size = 0;
  /** Whether the last `add` added its key. */
  added = false;
  /** Slots examined by every `add` so far (for tests: stays near 1.5 per add however keys are chosen). */
  probes = 0;

  /** Bytes of all keys together. */
  get bytes(): number {
    return this.used;
  }

  /** Forgets every key (memory already taken is kept for the next ones). */
  clear(): void {
    this.size = 0;
    this.used = 0;
    this.slots.fill(0);
  }

  /** The index of the key `b[start, end)`, added if it is new. */
  add(b: Uint8Array, start: number, end: number): number {
    const h = hashOf(b, start, end);
    const k = this.lookup(b, start, end, h);
    this.added = k < 0;
    return k >= 0 ? k : this.insert(b, start, end, h);
  }

  /** The index of the key `b[start, end)`, or -1 if it is not there. */
  find(b: Uint8Array, start: number, end: number): number {
    return this.lookup(b, start, end, hashOf(b, start, end));
  }

  /** Key number `k`'s bytes: a view, valid until the next `add`. */
  keyBytes(k: number): Uint8Array {
    return this.arena.subarray(this.starts[k]!, this.ends[k]!);
  }

  private lookup(b: Uint8Array, start: number, end: number, h: number): number {
    const mask = this.slots.length - 1;
    const n = end - start;
    for (let s = h & mask; ; s = (s + 1) & mask) {
      this.probes++;
      const k = this.slots[s]! - 1;
      if (k < 0) break;
      if (this.hashes[k] !== h || this.ends[k]! - this.starts[k]! !== n) continue;
      const a = this.starts[k]!;
      let same = true;
      for (let i = 0; i < n; i++) {
        if (this.arena[a + i] !== b[start + i]) {
          same = false;
          break;
        }
      }
      if (same) return k;
    }
    return -1;
  }

  /** Key number `k` as text (UTF-8). */
  key(k: number): string {
    return utf8(this.arena, this.starts[k]!, this.ends[k]!);
  }

  private insert(b: Uint8Array, start: number, end: number, h: number): number {
    const k = this.size++;
    if (k === this.starts.length) {
      this.starts = grown(this.starts);
      this.ends = grown(this.ends);
      this.hashes = grown(this.hashes);
    }
    const n = end - start;
    if (this.used + n > this.arena.length) {
      const a = new Uint8Array(Math.max(this.arena.length * 2, this.used + n));
      a.set(this.arena.subarray(0, this.used));
      this.arena = a;
    }
    copyBytes(b, start, end, this.arena, this.used);
    this.starts[k] = this.used;
    this.ends[k] = this.used + n;
    this.hashes[k] = h;
    this.used += n;
    // At most half full, so probes stay short.
    if (this.size * 2 > this.slots.length) this.rehash(this.slots.length * 2);
    else this.place(k);
    return k;
  }

  private place(k: number): void {
    const mask = this.slots.length - 1;
    let s = this.hashes[k]! & mask;
    while (this.slots[s] !== 0) s = (s + 1) & mask;
    this.slots[s] = k + 1;
  }

  private rehash(size: number): void {
    this.slots = new Int32Array(size);
    for (let k = 0; k < this.size; k++) this.place(k);
  }
}
