// The fast path for URLs already in canonical form (src/core/urlfast.ts), held to the
// runtime's WHATWG parser: every URL it takes must be one `new URL` serializes as the
// same bytes (fragment removed), with the same host; and the URL memory's answers
// (id, domain, URL, or the reject) must be the parser's path's, fast path or not. The
// native canonicalEnd (src/native/scan.c) must answer as the JavaScript one.
// Run on each runtime CI has (ada 2 on Node 22, ada 4 on Node 24 and 26).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { ROOT, scratch } from './lib/run.js';
import { PARSER } from './lib/parser.js';
import { canonicalEnd } from '../src/core/urlfast.js';
import { LinePass, nativeReflogScan } from '../src/core/reflog.js';
import { UrlResolver, canonicalize, idText, loadUrlHash, type UrlHash, type UrlOptions } from '../src/core/url.js';
import { generateReflog } from '../scripts/gen-reflog.js';

const OPTS: UrlOptions = { maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode: 'registrable' };

/** What is wrong with the fast path's answer on `raw`, or null (also when it declines). */
function fastPathFault(raw: string): string | null {
  const b = Buffer.from(raw);
  const host = new Int32Array(2);
  const cut = canonicalEnd(b, 0, b.length, host);
  if (cut < 0) return null;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return `taken, but the parser refuses it`;
  }
  const href = u.href.includes('#') ? u.href.slice(0, u.href.indexOf('#')) : u.href;
  if (href !== b.toString('latin1', 0, cut)) return `taken as ${b.toString('latin1', 0, cut)}, the parser says ${href}`;
  if (u.hostname !== b.toString('latin1', host[0], host[1])) return `host ${b.toString('latin1', host[0], host[1])}, the parser says ${u.hostname}`;
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `scheme ${u.protocol}`;
  return null;
}

/** The parser's path: canonicalize and the id of its text, as the resolver answered before the fast path. */
function slowAnswer(raw: string, hash: UrlHash, o: UrlOptions): string {
  const c = canonicalize(raw, o);
  return 'reason' in c ? `reject ${c.reason}: ${c.detail}` : `${idText(hash(c.url))} ${c.domain} ${c.url}`;
}

/** The resolver's answer (with its fast path), in slowAnswer's terms. */
function resolverAnswer(r: UrlResolver, raw: string): string {
  const b = Buffer.from(raw);
  const k = r.resolve(b, 0, b.length, b.length !== raw.length);
  const bad = r.rejected(k);
  if (bad) return `reject ${bad.reason}: ${bad.detail}`;
  const s = r.start[k]!;
  const [domain, url] = r.bytes.toString('latin1', s + 16, r.end[k]!).split('\t');
  return `${r.bytes.toString('latin1', s, s + 16)} ${domain} ${url}`;
}

/** Every http(s) URL quoted in the test sources and the reflog fixtures (the repository's URL suites). */
function repositoryUrls(): string[] {
  const urls = new Set<string>();
  for (const f of fs.readdirSync(path.join(ROOT, 'test')).filter((n) => n.endsWith('.ts'))) {
    for (const m of fs.readFileSync(path.join(ROOT, 'test', f), 'utf8').matchAll(/[hH][tT][tT][pP][sS]?:[^'"`\s)\]]*/g)) urls.add(m[0]);
  }
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/stdin|\.reflog$/.test(e.name)) for (const line of fs.readFileSync(p, 'utf8').split('\n')) urls.add(line.split('\t')[4] ?? '');
    }
  };
  walk(path.join(ROOT, 'fixtures'));
  return [...urls].filter((u) => u && !/[\t\r\n]/.test(u));
}

/** The URLs of a generated reflog (`messy`: spelled every way parsers may disagree). */
function generatedUrls(lines: number, messy: boolean): string[] {
  const file = path.join(scratch('ms-urlfast-'), 'r.reflog');
  const fd = fs.openSync(file, 'w');
  generateReflog(fd, { lines, hour: 2, seed: 3, messy });
  fs.closeSync(fd);
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.split('\t')[4] ?? '')
    .filter((u) => u && !u.includes('\r'));
}

/** URL-like strings near canonical form, with the spellings the fast path must decline. */
const urlLike = (() => {
  const pick = (...xs: string[]) => fc.constantFrom(...xs);
  const label = fc.oneof(
    { weight: 12, arbitrary: fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/) },
    { weight: 4, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,10}[a-z0-9]$/) },
    {
      weight: 1,
      arbitrary: pick(
        'xn--p1ai',
        'xn--zca',
        'xn--',
        'xn--a',
        'xn--1',
        'xn--abc',
        'xn--ls8h',
        'a--b',
        '-a',
        'a-',
        '0x1f',
        '0X1F',
        '123',
        '1e3',
        'A',
        'a_b',
        '%41',
        'ß',
        'é',
        '',
        'x'.repeat(64),
        'x'.repeat(63),
        'localhost',
        'blogspot',
        'co',
      ),
    },
  );
  const host = fc.oneof(
    { weight: 8, arbitrary: fc.array(label, { minLength: 1, maxLength: 4 }).map((ls) => ls.join('.')) },
    { weight: 1, arbitrary: pick('127.0.0.1', '1.2.3', '[::1]', 'a.b.', '.a.b', 'a..b', 'EXAMPLE.com', 'a.0', 'a.09', 'a.0x', `${'a.'.repeat(127)}com`) },
  );
  const pathChar = fc.oneof(
    { weight: 16, arbitrary: fc.stringMatching(/^[a-z0-9_~][a-z0-9._~-]{0,6}$/) },
    { weight: 3, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
    { weight: 1, arbitrary: pick('%41', '%2e', '%2E', '%2f', '%', '%4', '%zz', '.', '..', '\u00e9', '\u0001', '\u007f', '%7E', '%7e') },
  );
  const segment = fc.array(pathChar, { maxLength: 4 }).map((cs) => cs.join(''));
  const urlPath = fc.array(segment, { maxLength: 4 }).map((ss) => ss.map((s) => `/${s}`).join(''));
  const query = fc.option(
    fc.array(fc.oneof(pathChar, pick('=', '&', '?', '/', "'", '^')), { maxLength: 6 }).map((cs) => `?${cs.join('')}`),
    { nil: '' },
  );
  const fragment = fc.option(
    fc.array(pathChar, { maxLength: 3 }).map((cs) => `#${cs.join('')}`),
    { nil: '' },
  );
  return fc
    .tuple(
      fc.oneof(
        { weight: 8, arbitrary: pick('http://', 'https://') },
        { weight: 1, arbitrary: pick('HTTP://', 'http:/', 'http:\\\\', 'ftp://', 'https:', 'http://u@', 'http://u:p@') },
      ),
      host,
      fc.oneof({ weight: 8, arbitrary: fc.constant('') }, { weight: 1, arbitrary: pick(':80', ':443', ':8080', ':', ':0080', ':x') }),
      fc.oneof({ weight: 8, arbitrary: urlPath.map((p) => p || '/') }, { weight: 1, arbitrary: urlPath }),
      query,
      fragment,
    )
    .map((parts) => parts.join(''));
})();

test(`the fast path takes only URLs the parser serializes as the same bytes: repository URLs, generated reflogs, ${PARSER}`, () => {
  const urls = [...repositoryUrls(), ...generatedUrls(20_000, false), ...generatedUrls(20_000, true)];
  let taken = 0;
  for (const raw of urls) {
    assert.equal(fastPathFault(raw), null, raw);
    const b = Buffer.from(raw);
    if (canonicalEnd(b, 0, b.length, new Int32Array(2)) >= 0) taken++;
  }
  // The check means something only if the fast path takes many of them.
  assert.ok(taken > urls.length / 3, `${taken} of ${urls.length} taken`);
});

test(`the fast path on a seeded fuzz of URL-like strings: what it takes, the parser serializes as the same bytes (${PARSER})`, () => {
  let taken = 0;
  fc.assert(
    fc.property(urlLike, (raw) => {
      const b = Buffer.from(raw);
      if (canonicalEnd(b, 0, b.length, new Int32Array(2)) >= 0) taken++;
      return fastPathFault(raw) === null;
    }),
    { seed: 51, numRuns: 60_000 },
  );
  assert.ok(taken > 12_000, `${taken} of 60000 taken`);
  process.stdout.write(`# taken ${taken}\n`);
});

test('the URL memory answers as the parser path does, fast path or not: with and without memory, in host mode, at a small --max-url-bytes, with the query rewritten', async () => {
  const hash = await loadUrlHash();
  const urls = [...repositoryUrls(), ...generatedUrls(5_000, false), ...generatedUrls(5_000, true), ...fc.sample(urlLike, { seed: 7, numRuns: 20_000 })];
  const rewriting: UrlOptions = { ...OPTS, dropParams: ['utm_*', 'sid'], sortQuery: true };
  for (const o of [OPTS, { ...OPTS, domainMode: 'host' as const }, { ...OPTS, maxUrlBytes: 40 }, rewriting]) {
    const remembering = new UrlResolver(o, hash);
    const forgetting = new UrlResolver(o, hash, 0, 0);
    // Twice over: the second time the remembering one answers from its memory.
    for (const raw of [...urls, ...urls]) {
      const want = slowAnswer(raw, hash, o);
      assert.equal(resolverAnswer(remembering, raw), want, raw);
      assert.equal(resolverAnswer(forgetting, raw), want, raw);
    }
  }
});

/** canonicalEnd of `raw` as the reflog's native pass over a line holding it finds it (LinePass): the end and host, from the URL's start. */
function nativeCanonicalEnd(raw: string): number[] {
  const prefix = '0\t0\t20110728060000\t0\t';
  const line = Buffer.from(`${prefix}${raw}\t1\n`);
  const pass = new LinePass(new Int32Array(7));
  pass.over(line, 0, line.length);
  return pass.cut < 0 ? [pass.cut] : [pass.cut - prefix.length, pass.host[0]! - prefix.length, pass.host[1]! - prefix.length];
}

/** canonicalEnd of `raw` in JavaScript, as nativeCanonicalEnd gives it. */
function jsCanonicalEnd(raw: string): number[] {
  const b = Buffer.from(raw);
  const host = new Int32Array(2);
  const cut = canonicalEnd(b, 0, b.length, host);
  return cut < 0 ? [cut] : [cut, host[0]!, host[1]!];
}

test('the native canonicalEnd (the reflog pass) answers as the JavaScript one: repository URLs, generated reflogs, a seeded fuzz', () => {
  assert.ok(nativeReflogScan.fn, 'the scan addon is built (npm install)');
  let taken = 0;
  const urls = [...repositoryUrls(), ...generatedUrls(20_000, false), ...generatedUrls(20_000, true)];
  for (const raw of urls) {
    const want = jsCanonicalEnd(raw);
    assert.deepEqual(nativeCanonicalEnd(raw), want, raw);
    if (want[0]! >= 0) taken++;
  }
  assert.ok(taken > urls.length / 3, `${taken} of ${urls.length} taken`);
  fc.assert(
    fc.property(urlLike, (raw) => {
      assert.deepEqual(nativeCanonicalEnd(raw), jsCanonicalEnd(raw), raw);
    }),
    { seed: 52, numRuns: 60_000 },
  );
});
