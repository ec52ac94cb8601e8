// Growth of the typed arrays that hold per-record and per-key numbers off the JS heap.

type Numeric = Int32Array | Uint32Array | Float64Array;

/** A copy of `a` in a new array of `size` elements (twice its length by default). */
export function grown<T extends Numeric>(a: T, size = a.length * 2): T {
  const b = new (a.constructor as new (n: number) => T)(size);
  b.set(a);
  return b;
}
