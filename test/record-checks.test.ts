// The one-pass record checks of src/core/record-checks.ts, and timestampKey, held to the
// ones they replaced (test/lib/record-checks-before.ts): the same answer (null or the
// same message) and the same TAB positions for every line of the fixtures, for faults
// made by hand in each field, and for seeded random mutations of good lines. The
// splitter's scans (scanUrlRecord, scanJoined) held to the checks: a line's LF and its
// TABs exactly when the check passes the line up to its first LF.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { LineRef } from '../src/core/records.js';
import {
  RecordScanner,
  checkCarryRecordAt,
  checkJoinedAt,
  checkUrlRecordAt,
  isDomainAt,
  nativeScan,
  scanJoined,
  scanRouted,
  scanUrlRecord,
  type ScanKind,
} from '../src/core/record-checks.js';
import type { LineScan } from '../src/core/lines.js';
import { timestampKey } from '../src/core/time.js';
import { ROOT, listFiles } from './lib/run.js';
import { SEED, hitsArb, tagArb, tsArb } from './lib/model.js';
import * as before from './lib/record-checks-before.js';

type Check = (l: LineRef) => string | null;
interface Kind {
  name: string;
  tabs: number;
  now: Check;
  before: Check;
  /** A good line's fields, and for each field values to put in its place. */
  good: string[][];
  edges: string[][];
}

const ID = '0123456789abcdef';
const TS = '20110728064406';
const ID_EDGES = ['', ID.slice(1), ID + '0', ID.toUpperCase(), '0123456789abcdeA', '0123456789abcdeg', '012345678-abcdef', '0123456789abcde\u00e9', '-'];
const TS_EDGES = [
  '',
  '-',
  TS.slice(1),
  TS + '0',
  '2011072806440a',
  '20110230120000', // Feb 30
  '20120229120000',
  '21000229120000',
  '20000229120000',
  '20110728240000',
  '20110728236000',
  '20110728235960',
  '20111328000000',
  '20110001000000',
  '20110100000000',
  '20110431000000',
  '00000101000000',
];
const TAG_EDGES = ['', 'v', 'a b', '\u00fc', '\u0001', '-', 'x'.repeat(300), '0'];
const HITS_EDGES = ['', '0', '007', '1'.repeat(19), '9'.repeat(30), '9'.repeat(31), '-1', '1a', ' 1', '+1', '-', '1.5'];
const DOMAIN_EDGES = ['', 'Example.com', 'a b', 'ex\u007fample', 'ex\u00e4mple', '!', '~', '@', '[', '`', 'A', 'Z', '-', 'x'.repeat(300)];
const URL_EDGES = ['', 'a', 'http://x/\u00fc', 'http://x/ y', '-', 'http://x/' + 'y'.repeat(300)];

const URL_GOOD = [
  [ID, TS, '', '1', 'example.com', 'http://example.com/a'],
  [ID, TS, 'v1', '12345678901234567890', 'xn--80ak6aa92e.com', 'https://xn--80ak6aa92e.com/?q=\u00fc'],
];
const URL_FIELD_EDGES = [ID_EDGES, TS_EDGES, TAG_EDGES, HITS_EDGES, DOMAIN_EDGES, URL_EDGES];
const DECIDED = '20110728070000';

const KINDS: Kind[] = [
  { name: 'URL record', tabs: 5, now: checkUrlRecordAt, before: before.checkUrlRecordAt, good: URL_GOOD, edges: URL_FIELD_EDGES },
  {
    name: 'joined record',
    tabs: 8,
    now: checkJoinedAt,
    before: before.checkJoinedAt,
    good: [
      [ID, 'example.com', 'http://example.com/a', TS, '20110728070000', 'c', 'i', '3', '4'],
      [ID, 'example.com', 'http://example.com/a', '-', TS, '', 'v', '-', '1'],
      [ID, 'example.com', 'http://example.com/a', TS, '-', 'v', '', '1', '-'],
    ],
    edges: [ID_EDGES, DOMAIN_EDGES, URL_EDGES, TS_EDGES, TS_EDGES, TAG_EDGES, TAG_EDGES, HITS_EDGES, HITS_EDGES],
  },
  {
    name: 'carry record',
    tabs: 5,
    now: checkCarryRecordAt,
    before: before.checkCarryRecordAt,
    good: URL_GOOD.map((f) => [...f, DECIDED]),
    edges: [...URL_FIELD_EDGES, TS_EDGES],
  },
];

/** Bytes that make or break a field, for the mutations. */
const SPECIAL = [0x09, 0x0d, 0x0a, 0x2d, 0x30, 0x39, 0x61, 0x66, 0x67, 0x41, 0x5a, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xc3, 0xff, 0x00];
/** Bytes around a line in its buffer: the check must not read them (a carry's URL record is followed by a TAB). */
const AROUND = [0x0a, 0x09, 0x30, 0x2d];

/** What a check answers for `line`, placed in a buffer between `around` bytes, and the TAB positions it leaves. */
function answer(check: Check, tabs: number, line: Uint8Array, around: number): { answer: string | null; tabs: number[]; end: number } {
  const buf = Buffer.alloc(line.length + 6, around);
  buf.set(line, 3);
  const l = new LineRef(tabs).set(buf, 3, 3 + line.length);
  l.tabs.fill(-7); // what an earlier line left there
  return { answer: check(l), tabs: [...l.tabs], end: l.end };
}

/** Asserts that the check of `kind` answers for `line` as the one before it did; returns whether the line passed. */
function agrees(kind: Kind, line: Uint8Array | string, around = AROUND[0]!): boolean {
  const bytes = typeof line === 'string' ? Buffer.from(line, 'utf8') : line;
  const got = answer(kind.now, kind.tabs, bytes, around);
  assert.deepEqual(got, answer(kind.before, kind.tabs, bytes, around), `${kind.name} ${JSON.stringify(Buffer.from(bytes).toString('latin1'))}`);
  return got.answer === null;
}

test('every line of the fixtures gets the same answer and TABs as before, as each kind of record', () => {
  const files = listFiles(path.join(ROOT, 'fixtures')).map((f) => path.join(ROOT, 'fixtures', f));
  const passed = new Map(KINDS.map((k) => [k.name, 0]));
  for (const file of files) {
    const data = fs.readFileSync(file);
    for (let from = 0; from < data.length; ) {
      const nl = data.indexOf(0x0a, from);
      const end = nl === -1 ? data.length : nl;
      const line = data.subarray(from, end);
      for (const kind of KINDS) if (agrees(kind, line)) passed.set(kind.name, passed.get(kind.name)! + 1);
      from = end + 1;
    }
  }
  // The fixtures hold good records of each kind, not only faults.
  for (const [name, n] of passed) assert.ok(n >= 50, `${name}: ${n} good lines in the fixtures`);
});

test('each field empty, too long, of a wrong byte or at an edge gets the same answer as before', () => {
  for (const kind of KINDS) {
    for (const good of kind.good) {
      assert.equal(agrees(kind, good.join('\t')), true, `${kind.name} good line`);
      kind.edges.forEach((values, k) => {
        for (const v of values) for (const around of AROUND) agrees(kind, good.map((f, j) => (j === k ? v : f)).join('\t'), around);
      });
    }
  }
});

test('a line with a CR, a TAB too many or too few, or cut anywhere gets the same answer as before', () => {
  for (const kind of KINDS) {
    for (const good of kind.good) {
      const line = good.join('\t');
      for (const edit of [`${line}\r`, `\r${line}`, `${line}\t`, `${line}\tx`, `\t${line}`, line.replaceAll('\t', '\t\t'), '', '\t'.repeat(kind.tabs)]) {
        for (const around of AROUND) agrees(kind, edit, around);
      }
      for (let k = 0; k < good.length; k++) agrees(kind, [...good.slice(0, k), ...good.slice(k + 1)].join('\t'));
      const bytes = Buffer.from(line, 'utf8');
      for (let at = 0; at <= bytes.length; at++) {
        for (const around of AROUND) agrees(kind, bytes.subarray(0, at), around);
        for (const b of SPECIAL) {
          agrees(kind, Buffer.concat([bytes.subarray(0, at), Buffer.of(b), bytes.subarray(at)]));
          if (at < bytes.length) agrees(kind, Buffer.concat([bytes.subarray(0, at), Buffer.of(b), bytes.subarray(at + 1)]));
        }
      }
    }
  }
});

/** Good lines of each kind, made of the model's fields. */
function goodLine(kind: Kind): fc.Arbitrary<string> {
  const id = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 16, maxLength: 16 });
  const domain = fc.string({ unit: fc.constantFrom(...'abcxyz0189.-!~'), minLength: 1, maxLength: 20 });
  const url = fc.string({ unit: fc.constantFrom('h', '/', ':', '\u00fc', ' ', '-', '0'), minLength: 1, maxLength: 40 });
  const urlRecord = fc.tuple(id, tsArb, tagArb, hitsArb, domain, url).map((f) => f.join('\t'));
  if (kind.name === 'URL record') return urlRecord;
  if (kind.name === 'carry record') return fc.tuple(urlRecord, tsArb).map(([r, d]) => `${r}\t${d}`);
  const side = fc.option(fc.tuple(tsArb, tagArb, hitsArb));
  return fc
    .tuple(id, domain, url, side, side)
    .filter(([, , , c, i]) => c !== null || i !== null)
    .map(([i0, d, u, c, i]) => [i0, d, u, c?.[0] ?? '-', i?.[0] ?? '-', c?.[1] ?? '', i?.[1] ?? '', c?.[2] ?? '-', i?.[2] ?? '-'].join('\t'));
}

/** A mutation of a line's bytes: a byte set, put in or taken out at a place given as a fraction of the line. */
const mutation = fc.record({
  op: fc.constantFrom('set', 'insert', 'delete'),
  at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
  byte: fc.oneof(fc.constantFrom(...SPECIAL), fc.integer({ min: 0, max: 255 })),
});

function mutate(line: string, edits: { op: string; at: number; byte: number }[]): Buffer {
  let b = Buffer.from(line, 'utf8');
  for (const { op, at, byte } of edits) {
    const i = Math.floor(at * (b.length + (op === 'insert' ? 1 : 0)));
    if (op === 'insert') b = Buffer.concat([b.subarray(0, i), Buffer.of(byte), b.subarray(i)]);
    else if (i < b.length)
      b = op === 'set' ? Buffer.concat([b.subarray(0, i), Buffer.of(byte), b.subarray(i + 1)]) : Buffer.concat([b.subarray(0, i), b.subarray(i + 1)]);
  }
  return b;
}

test('seeded random mutations of good lines get the same answer and TABs as before', () => {
  for (const kind of KINDS) {
    fc.assert(
      fc.property(goodLine(kind), fc.array(mutation, { maxLength: 3 }), fc.constantFrom(...AROUND), (line, edits, around) => {
        agrees(kind, mutate(line, edits), around);
      }),
      { seed: SEED, numRuns: 20_000 },
    );
  }
});

test('timestampKey gives what it gave before for every date and time at an edge, and for random bytes', () => {
  const pad = (n: number, w: number) => String(n).padStart(w, '0');
  const old = (b: Uint8Array, end = b.length) => before.timestampKey(b, 0, end);
  for (const y of [0, 1900, 2000, 2011, 2012, 2100, 2400, 9999]) {
    for (let mo = 0; mo <= 13; mo++) {
      for (const d of [0, 1, 28, 29, 30, 31, 32]) {
        for (const h of [0, 23, 24, 99]) {
          for (const ms of ['0000', '5959', '6000', '0060', '9999']) {
            const b = Buffer.from(`${pad(y, 4)}${pad(mo, 2)}${pad(d, 2)}${pad(h, 2)}${ms}`, 'latin1');
            assert.equal(timestampKey(b, 0, 14), old(b, 14), b.toString('latin1'));
          }
        }
      }
    }
  }
  const bytes = fc.uint8Array({ minLength: 12, maxLength: 16 });
  const digits = fc.string({ unit: fc.constantFrom(...'0123456789/:'), minLength: 13, maxLength: 15 }).map((s) => Buffer.from(s, 'latin1'));
  fc.assert(
    fc.property(
      fc.oneof(
        bytes,
        digits,
        tsArb.map((s) => Buffer.from(s, 'latin1')),
      ),
      (b) => timestampKey(b, 0, b.length) === old(b),
    ),
    { seed: SEED, numRuns: 20_000 },
  );
});

test('isDomainAt gives what it gave before for every byte, and for the empty range', () => {
  const b = Buffer.from('ab?cd');
  for (let c = 0; c < 256; c++) {
    b[2] = c;
    assert.equal(isDomainAt(b, 0, 5), before.isDomainAt(b, 0, 5), `byte ${c}`);
    assert.equal(isDomainAt(b, 2, 3), before.isDomainAt(b, 2, 3), `byte ${c} alone`);
  }
  assert.equal(isDomainAt(b, 2, 2), false);
});

/** The kinds a stream's splitter scans, with their scan. */
const SCANS = [
  { kind: KINDS[0]!, scan: scanUrlRecord },
  { kind: KINDS[1]!, scan: scanJoined },
];

/**
 * Asserts that `scan` over `bytes` from 0 to `limit` answers as the splitter needs: the
 * first LF before `limit`, with the TABs the check leaves, when the check passes the
 * line up to that LF; else -1. Returns whether it found the line.
 */
function scanAgrees(kind: Kind, scan: (b: Uint8Array, s: number, limit: number, T: Int32Array) => number, bytes: Uint8Array, limit: number): boolean {
  const buf = Buffer.alloc(bytes.length + 3, 0x30);
  buf.set(bytes, 1);
  const tabs = new Int32Array(kind.tabs).fill(-7);
  const got = scan(buf, 1, 1 + limit, tabs);
  const nl = buf.subarray(0, 1 + limit).indexOf(0x0a, 1);
  const l = new LineRef(kind.tabs).set(buf, 1, nl < 0 ? 1 + limit : nl);
  const passes = nl >= 0 && kind.now(l) === null;
  const what = `${kind.name} ${JSON.stringify(Buffer.from(bytes).toString('latin1'))} to ${limit}`;
  assert.equal(got, passes ? nl : -1, what);
  if (passes) assert.deepEqual([...tabs], [...l.tabs], what);
  return passes;
}

test('a scan finds the LF of exactly the lines its check passes, with the same TABs', () => {
  const next = fc.constantFrom('', '\n', '\nx', '\t\n', '\r\n', '\n0123456789abcdef\t');
  for (const { kind, scan } of SCANS) {
    let found = 0;
    fc.assert(
      fc.property(goodLine(kind), fc.array(mutation, { maxLength: 3 }), next, fc.double({ min: 0, max: 1, noNaN: true }), (line, edits, after, cut) => {
        const bytes = Buffer.concat([mutate(line, edits), Buffer.from(after, 'latin1')]);
        // Most at the whole buffer, some cut short (a line that goes on in the next chunk).
        const limit = cut < 0.8 ? bytes.length : Math.floor(cut * bytes.length);
        if (scanAgrees(kind, scan, bytes, limit)) found++;
      }),
      { seed: SEED, numRuns: 20_000 },
    );
    // Most good lines keep passing after their mutations: the scan's positive answer is tested too.
    assert.ok(found > 2000, `${kind.name}: ${found} lines found`);
    for (const good of kind.good) {
      const line = Buffer.from(good.join('\t'), 'utf8');
      for (const after of ['\n', '\n\n', '\r\n', '\t\n', '']) {
        const bytes = Buffer.concat([line, Buffer.from(after, 'latin1')]);
        for (let limit = 0; limit <= bytes.length; limit++) scanAgrees(kind, scan, bytes, limit);
      }
      kind.edges.forEach((values, k) => {
        for (const v of values) {
          const bytes = Buffer.from(`${good.map((f, j) => (j === k ? v : f)).join('\t')}\n`, 'utf8');
          scanAgrees(kind, scan, bytes, bytes.length);
        }
      });
    }
  }
});

// The native scanner (src/native/scan.c) through RecordScanner, held to the JavaScript
// scans above: the same LF and TABs for every line, alone, one after another in a
// chunk, and in a buffer that a new chunk overwrote.

const native = nativeScan.fn;

/** A RecordScanner of `kind` asked for one line, as a splitter asks at a chunk's first. */
function scannerOf(kind: ScanKind, lead?: Int32Array) {
  return (b: Uint8Array, s: number, limit: number, T: Int32Array) => new RecordScanner(kind, T, lead).scan(b, s, limit, true);
}

test('the native scan finds the LF of exactly the lines its check passes, with the same TABs', () => {
  assert.ok(native, 'the scan addon is built (npm install)');
  const next = fc.constantFrom('', '\n', '\nx', '\t\n', '\r\n', '\n0123456789abcdef\t');
  for (const { kind, scanKind } of [
    { kind: KINDS[0]!, scanKind: 'url' as const },
    { kind: KINDS[1]!, scanKind: 'joined' as const },
  ]) {
    let found = 0;
    fc.assert(
      fc.property(goodLine(kind), fc.array(mutation, { maxLength: 3 }), next, fc.double({ min: 0, max: 1, noNaN: true }), (line, edits, after, cut) => {
        const bytes = Buffer.concat([mutate(line, edits), Buffer.from(after, 'latin1')]);
        const limit = cut < 0.8 ? bytes.length : Math.floor(cut * bytes.length);
        if (scanAgrees(kind, scannerOf(scanKind), bytes, limit)) found++;
      }),
      { seed: SEED, numRuns: 20_000 },
    );
    assert.ok(found > 2000, `${kind.name}: ${found} lines found`);
    for (const good of kind.good) {
      kind.edges.forEach((values, k) => {
        for (const v of values) {
          const bytes = Buffer.from(`${good.map((f, j) => (j === k ? v : f)).join('\t')}\n`, 'utf8');
          for (let limit = bytes.length - 2; limit <= bytes.length; limit++) scanAgrees(kind, scannerOf(scanKind), bytes, limit);
        }
      });
    }
  }
});

/** What scanRouted (JavaScript) or a RecordScanner answers for the routed line at `b[1..]`: its LF, and its TABs when found. */
function routedAnswer(b: Uint8Array, limit: number, viaScanner: boolean): { end: number; tabs: number[] } {
  const lead = new Int32Array(1).fill(-7);
  const T = new Int32Array(5).fill(-7);
  const end = viaScanner ? new RecordScanner('routed', T, lead).scan(b, 1, limit, true) : scanRouted(b, 1, limit, lead, T);
  return { end, tabs: end < 0 ? [] : [lead[0]!, ...T] };
}

test('the native scan of a routed line (yacobot_id TAB URL record) answers as scanRouted does', () => {
  assert.ok(native, 'the scan addon is built (npm install)');
  const yacobot = fc.oneof(fc.constantFrom('1', '7', '10', '0', '01', '', '-1', '1a', '9'.repeat(18), '9'.repeat(19), '1 '), fc.nat().map(String));
  let found = 0;
  fc.assert(
    fc.property(yacobot, goodLine(KINDS[0]!), fc.array(mutation, { maxLength: 2 }), fc.constantFrom('\n', '', '\t\n', '\nx'), (y, line, edits, after) => {
      const bytes = Buffer.concat([Buffer.of(0x30), mutate(`${y}\t${line}`, edits), Buffer.from(after, 'latin1')]);
      const js = routedAnswer(bytes, bytes.length, false);
      assert.deepEqual(routedAnswer(bytes, bytes.length, true), js, JSON.stringify(bytes.toString('latin1')));
      if (js.end >= 0) found++;
    }),
    { seed: SEED, numRuns: 20_000 },
  );
  assert.ok(found > 2000, `${found} routed lines found`);
});

/**
 * The lines of `chunk` as a splitter takes them with `scan` (a line the scan does not
 * pass is taken up to its LF by hand): each line's start, LF (or -1: the rest waits
 * for the next chunk) and the TABs the scan gave (none for a line it did not pass).
 */
function splitWith(chunk: Uint8Array, scan: LineScan, T: Int32Array): string[] {
  const lines: string[] = [];
  const first = 0;
  for (let from = 0; from < chunk.length; ) {
    T.fill(-7);
    const got = scan(chunk, from, chunk.length, from === first);
    const nl = got >= 0 ? got : chunk.indexOf(0x0a, from);
    lines.push(`${from} ${nl} ${got >= 0 ? [...T].join(',') : '-'}`);
    if (nl < 0) break;
    from = nl + 1;
  }
  return lines;
}

test('a chunk of many lines, good and bad, is split the same with the native scan ahead and without it', () => {
  assert.ok(native, 'the scan addon is built (npm install)');
  const kind = KINDS[0]!;
  const T = new Int32Array(5);
  const scanner = new RecordScanner('url', T);
  const js: LineScan = (b, s, limit) => scanUrlRecord(b, s, limit, T);
  const lines = fc.array(fc.tuple(goodLine(kind), fc.array(mutation, { maxLength: 1 }), fc.boolean()), { minLength: 1, maxLength: 3000, size: 'max' });
  // One buffer for every chunk, as a pipe's reader reuses its own: what the scanner read ahead in one chunk is stale in the next.
  const reused = Buffer.alloc(1 << 20);
  fc.assert(
    fc.property(lines, fc.boolean(), (ls, cutLast) => {
      const text = Buffer.concat(ls.map(([l, edits, bad]) => Buffer.concat([bad ? mutate(l, edits) : Buffer.from(l, 'utf8'), Buffer.of(0x0a)])));
      const chunk = reused.subarray(0, cutLast ? text.length - 3 : text.length);
      text.copy(reused, 0, 0, chunk.length);
      const want = splitWith(chunk, js, T);
      assert.deepEqual(splitWith(chunk, scanner.scan, T), want);
      // Without the addon (not built), the scanner is the JavaScript scan.
      nativeScan.fn = null;
      try {
        assert.deepEqual(splitWith(chunk, new RecordScanner('url', T).scan, T), want);
      } finally {
        nativeScan.fn = native;
      }
    }),
    { seed: SEED, numRuns: 100 },
  );
});

test('a scanner asked for the first line of a chunk forgets what it read ahead in the buffer before', () => {
  assert.ok(native, 'the scan addon is built (npm install)');
  const T = new Int32Array(5);
  const scanner = new RecordScanner('url', T);
  const good = `${URL_GOOD[0]!.join('\t')}\n`;
  const buf = Buffer.from(good.repeat(4));
  assert.equal(scanner.scan(buf, 0, buf.length, true), good.length - 1);
  // The next chunk, read into the same buffer, goes on from the same place (after a line
  // carried over): its second line is not a record.
  buf.write('x', good.length + 3, 'latin1');
  assert.equal(scanner.scan(buf, good.length, buf.length, true), -1);
  assert.equal(scanner.scan(buf, 2 * good.length, buf.length, false), 3 * good.length - 1, 'the lines after it');
});

test('the native scan refuses what is not a buffer, a range in it, a kind and an Int32Array', () => {
  assert.ok(native, 'the scan addon is built (npm install)');
  const scan = native as unknown as (...args: unknown[]) => number;
  const b = Buffer.from(`${URL_GOOD[0]!.join('\t')}\n`);
  const out = new Int32Array(60);
  for (const args of [
    [b, 0, b.length, 0],
    ['text', 0, 4, 0, out],
    [b, -1, b.length, 0, out],
    [b, 0, b.length + 1, 0, out],
    [b, 5, 4, 0, out],
    [b, NaN, b.length, 0, out],
    [b, 0.5, b.length, 0, out],
    [b, 0, b.length, 3, out],
    [b, 0, b.length, -1, out],
    [b, 0, b.length, 0, new Uint32Array(60)],
    [b, 0, b.length, 0, [0, 0, 0, 0, 0, 0]],
  ]) {
    assert.throws(() => scan(...args), TypeError, String(args.slice(1)));
  }
  assert.equal(scan(b, 0, b.length, 0, out), 1);
  assert.equal(scan(b, 0, b.length, 0, new Int32Array(5)), 0, 'no room for one line');
  assert.equal(scan(b, 0, b.length - 1, 0, out), 0, 'the LF past the limit');
});
