// The tests' own models of the streams: an independent XXH64 for URL ids, and
// fast-check generators of URL records, shared by the property tests of the stages.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkUrlRecordAt } from '../../src/core/record-checks.js';
import type { LineRef } from '../../src/core/records.js';
import { lineRef } from './bytes.js';

/** The fixed seed of every property test (a failure replays). */
export const SEED = 20110727;

// --- an independent XXH64 (seed 0), straight from the specification, in BigInt ------

const P1 = 11400714785074694791n;
const P2 = 14029467366897019727n;
const P3 = 1609587929392839161n;
const P4 = 9650029242287828579n;
const P5 = 2870177450012600261n;
const M64 = (1n << 64n) - 1n;
const rotl = (x: bigint, r: bigint) => ((x << r) | (x >> (64n - r))) & M64;
const round = (acc: bigint, lane: bigint) => (rotl((acc + lane * P2) & M64, 31n) * P1) & M64;
const mergeRound = (acc: bigint, v: bigint) => ((((acc ^ round(0n, v)) * P1) & M64) + P4) & M64;

export function xxh64(buf: Buffer): bigint {
  const len = buf.length;
  let p = 0;
  let h: bigint;
  if (len >= 32) {
    let v1 = (P1 + P2) & M64;
    let v2 = P2;
    let v3 = 0n;
    let v4 = (0n - P1) & M64;
    for (; p <= len - 32; p += 32) {
      v1 = round(v1, buf.readBigUInt64LE(p));
      v2 = round(v2, buf.readBigUInt64LE(p + 8));
      v3 = round(v3, buf.readBigUInt64LE(p + 16));
      v4 = round(v4, buf.readBigUInt64LE(p + 24));
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M64;
    for (const v of [v1, v2, v3, v4]) h = mergeRound(h, v);
  } else {
    h = P5;
  }
  h = (h + BigInt(len)) & M64;
  for (; p + 8 <= len; p += 8) h = (((rotl(h ^ round(0n, buf.readBigUInt64LE(p)), 27n) * P1) & M64) + P4) & M64;
  if (p + 4 <= len) {
    h = (((rotl(h ^ ((BigInt(buf.readUInt32LE(p)) * P1) & M64), 23n) * P2) & M64) + P3) & M64;
    p += 4;
  }
  for (; p < len; p++) h = (rotl(h ^ ((BigInt(buf[p]!) * P5) & M64), 11n) * P1) & M64;
  h ^= h >> 33n;
  h = (h * P2) & M64;
  h ^= h >> 29n;
  h = (h * P3) & M64;
  h ^= h >> 32n;
  return h;
}
/** The test's own URL id: as a bigint (what the analyzer takes) and as its 16 hex digits. */
export const idBig = (url: string) => xxh64(Buffer.from(url, 'utf8'));
export const idOf = (url: string) => idBig(url).toString(16).padStart(16, '0');

// --- shared generators ------------------------------------------------------------

export const T0 = Date.UTC(2011, 6, 27, 6, 0, 0);
export const fmt = (ms: number) => new Date(ms).toISOString().replace(/[-T:]/g, '').slice(0, 14);
export const parseTs = (ts: string) => Date.UTC(+ts.slice(0, 4), +ts.slice(4, 6) - 1, +ts.slice(6, 8), +ts.slice(8, 10), +ts.slice(10, 12), +ts.slice(12, 14));
export const tsArb = fc.integer({ min: 0, max: 48 * 3600 }).map((s) => fmt(T0 + s * 1000));
/**
 * Updatetags of every length from 0 up, in bytes: empty often; 1 to 4 bytes of a few
 * characters ('ü' is 2), so that two records often carry the same one; now and then any
 * text without TAB, CR or LF (docs/formats-and-rules.md), up to past the 64 bytes group-sum keeps at first.
 * (Its old constants had no 1-byte tag: a group-sum that dropped those passed.)
 */
export const tagArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom('v', '1', 'ü'), minLength: 1, maxLength: 2 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 80, size: 'max' }).map((s) => s.replace(/[\t\r\n]/g, '')) },
);
/** Hits as text in the record streams: small, or huge (beyond 2^53, up to 26 digits). */
export const hitsArb = fc.oneof(
  { weight: 6, arbitrary: fc.nat(20).map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 25n }).map(String) },
);
/** Hits as a reflog may have them: up to 18 significant digits (beyond 2^53), maybe after leading zeros. */
export const reflogHitsArb = fc.oneof(
  { weight: 6, arbitrary: fc.nat(20).map(String) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 18n - 1n }).map(String) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(9), fc.nat(999)).map(([z, n]) => '0'.repeat(z) + String(n)) },
);
export const ID_POOL = Array.from({ length: 24 }, (_, i) => idOf(`http://pool${i}.example/`)).sort();
export const idArb = fc.constantFrom(...ID_POOL);

export interface Rec {
  id: string;
  ts: string;
  tag: string;
  hits: string;
  domain: string;
  url: string;
}
export const recArb = fc
  .record({ id: idArb, ts: tsArb, tag: tagArb, hits: hitsArb, n: fc.nat(3) })
  .map((r): Rec => ({ id: r.id, ts: r.ts, tag: r.tag, hits: r.hits, domain: `d${r.n}.example`, url: `http://d${r.n}.example/${r.id}` }));
export const fields = (r: Rec) => [r.id, r.ts, r.tag, r.hits, r.domain, r.url];
/** A record as a line with its TAB positions, as the cores take it (checked first, as the stages do). */
export const lineOf = (r: Rec): LineRef => {
  const line = lineRef(fields(r).join('\t'), 5);
  assert.equal(checkUrlRecordAt(line), null, fields(r).join('\t'));
  return line;
};
export const text = (rs: Rec[]) => rs.map((r) => fields(r).join('\t') + '\n').join('');
/** Records sorted by id (stable: the generated order within an id is the input order). */
export const sortedRecs = (max: number) =>
  fc.array(recArb, { maxLength: max }).map((rs) =>
    rs
      .map((r, i) => ({ r, i }))
      .sort((a, b) => (a.r.id < b.r.id ? -1 : a.r.id > b.r.id ? 1 : a.i - b.i))
      .map((x) => x.r),
  );
export const uniqueSorted = (max: number) =>
  fc.uniqueArray(recArb, { maxLength: max, selector: (r) => r.id }).map((rs) => [...rs].sort((a, b) => (a.id < b.id ? -1 : 1)));
