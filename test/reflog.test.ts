// The core reflog parser's one-URL API (urlIdentity): the same answer as a reflog line
// holding that URL, for every URL spelling the fixtures and a seeded fuzz hold. The
// parser's pass over a line, native and in JavaScript, the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { ROOT } from './lib/run.js';
import { SEED, idOf } from './lib/model.js';
import { DEFAULT_URL_OPTIONS, LinePass, analyzeLine, nativeReflogScan, urlIdentity } from '../src/core/reflog.js';
import { loadUrlHash, type UrlHash } from '../src/core/url.js';

/** What a reflog line holding `raw` as its URL gives, in urlIdentity's terms. */
function viaLine(raw: string, hash: UrlHash): ReturnType<typeof urlIdentity> {
  const line = Buffer.from(`0\t0\t20000101000000\t0\t${raw}\t1`);
  const v = analyzeLine(line, 0, line.length, false, DEFAULT_URL_OPTIONS, hash);
  if (v.kind === 'reject') return { invalid: v.detail ? `${v.reason}: ${v.detail}` : v.reason };
  assert.equal(v.kind, 'record', raw);
  const f = v.kind === 'record' ? v.record.split('\t') : [];
  return { id: f[0]!, domain: f[4]!, url: f[5]! };
}

/** The URL field of every reflog line of the analyze-dump fixtures. */
function fixtureUrls(): string[] {
  const dir = path.join(ROOT, 'fixtures', 'analyze-dump');
  const urls: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    const stdin = path.join(dir, name, 'stdin');
    if (!fs.existsSync(stdin)) continue;
    for (const line of fs.readFileSync(stdin, 'utf8').split('\n')) {
      const f = line.split('\t');
      if (f.length >= 6 && !f[4]!.includes('\r')) urls.push(f[4]!);
    }
  }
  return urls;
}

test('urlIdentity answers as a reflog line holding the URL does: fixtures, odd strings and a seeded fuzz', async () => {
  const hash = await loadUrlHash();
  const odd = [
    '',
    'x',
    'http://',
    'http://a.b/\u{1F600}',
    'http://\ud800.com/',
    `http://a.com/${'x'.repeat(8200)}`,
    'ftp://a.com/',
    'HTTP://WWW.Example.CO.UK/a/../b#f',
  ];
  const urls = [...fixtureUrls(), ...odd];
  assert.ok(urls.length > 100, `${urls.length} fixture URLs`);
  for (const raw of urls) assert.deepEqual(urlIdentity(raw, hash), viaLine(raw, hash), raw);
  const part = fc.constantFrom('http://', 'https://', 'HTTP://', 'a.com', 'xn--', 'ß', '%41', '/', '..', ':80', '?', '#', '@', '[::1]', '\\', ' ', 'é', '.');
  fc.assert(
    fc.property(fc.array(fc.oneof(part, fc.string({ maxLength: 4 })), { maxLength: 8 }), (parts) => {
      const raw = parts.join('').replace(/[\t\r\n]/g, '');
      assert.deepEqual(urlIdentity(raw, hash), viaLine(raw, hash), raw);
    }),
    { seed: 49, numRuns: 3000 },
  );
});

test('urlIdentity refuses a URL that a reflog line could not hold', async () => {
  const hash = await loadUrlHash();
  for (const raw of ['http://a.com/\tb', 'http://a.com/\r', 'http://a.com/\nb']) {
    assert.deepEqual(urlIdentity(raw, hash), { invalid: 'bad URL: contains a TAB or a line break' });
  }
  assert.deepEqual(urlIdentity('http://WWW.Example.COM/a/./b#x', hash), {
    id: idOf('http://www.example.com/a/b'),
    domain: 'example.com',
    url: 'http://www.example.com/a/b',
  });
});

// ReflogAnalyzer.lineAt's pass over a line (LinePass) from the native addon
// (src/native/scan.c), a block of lines ahead, held to the same pass in JavaScript.

/** Each line's pass, as analyze-dump takes the lines of a batch: where it ends, its TABs, whether it has a high byte, its CRs. */
function passes(batch: Uint8Array): string[] {
  const tabs = new Int32Array(7);
  const pass = new LinePass(tabs);
  const out: string[] = [];
  for (let s = 0; s < batch.length; s = pass.end + 1) {
    tabs.fill(-7);
    pass.over(batch, s, batch.length);
    const t = [...tabs.subarray(0, Math.min(pass.nt, 7))];
    out.push(`${s} ${pass.end} ${pass.nt} ${pass.high >= 128} ${pass.cr} ${pass.crBefore} ${t.join(',')}`);
  }
  return out;
}

/** Reflog-like lines: fields of bytes that matter to the pass (TAB, CR, LF, high bytes), some long. */
const reflogBytes = fc
  .array(
    fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...'0123456789abc/:.?=h').map((c) => c.charCodeAt(0)) },
      { weight: 2, arbitrary: fc.constantFrom(9, 10, 13) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) },
    ),
    { maxLength: 4000, size: 'max' },
  )
  .map((a) => Uint8Array.from(a));

test('the native pass over reflog lines gives what the JavaScript pass gives, line by line', () => {
  const native = nativeReflogScan.fn;
  assert.ok(native, 'the scan addon is built (npm install)');
  const good = Buffer.from('1000\t1\t20110728060000\t65433\thttp://s14.xn--e1afmkfd.xn--p1ai/item/aa\t1\r\n\u00fc\t\t\t\t\t\t\t\t\r\r\n\n\nno tab\n');
  // One buffer for every batch, as analyze-dump reuses its batches' buffers.
  const reused = Buffer.alloc(1 << 16);
  fc.assert(
    fc.property(fc.oneof(reflogBytes, fc.constant(good)), (bytes) => {
      const batch = reused.subarray(0, bytes.length);
      batch.set(bytes);
      const got = passes(batch);
      nativeReflogScan.fn = null;
      try {
        assert.deepEqual(got, passes(batch));
      } finally {
        nativeReflogScan.fn = native;
      }
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

test('the native pass over reflog lines refuses what is not a buffer, a range in it and an Int32Array', () => {
  const native = nativeReflogScan.fn as unknown as (...args: unknown[]) => number;
  assert.ok(native, 'the scan addon is built (npm install)');
  const b = Buffer.from('a\tb\nc\n');
  const out = new Int32Array(30);
  for (const args of [
    [b, 0, b.length],
    ['text', 0, 4, out],
    [b, -1, 2, out],
    [b, 0, b.length + 1, out],
    [b, 3, 2, out],
    [b, NaN, 2, out],
    [b, 0, 2, new Float64Array(30)],
  ]) {
    assert.throws(() => native(...args), TypeError, String(args.slice(1)));
  }
  assert.equal(native(b, 0, b.length, out), 2);
  assert.deepEqual([...out.subarray(0, 6)], [3, 1, 0, -1, -1, 1]);
  assert.equal(out[12], -2, 'no URL field: no canonicalEnd');
  assert.equal(native(b, 0, b.length, new Int32Array(15)), 1, 'room for one line');
  assert.equal(native(b, 0, b.length, new Int32Array(14)), 0, 'no room for one');
});
