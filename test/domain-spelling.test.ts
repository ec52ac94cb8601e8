// The domains records carry and the domains an operator types: every domain that
// analyze-dump can put in a record is one partner-db assign and import take under that
// exact spelling, and routes there; a host typed by hand becomes the spelling records
// carry (case, IDN, trailing dot, IPv4 forms, IPv6).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ROOT, madeDb, partnerDb, runBin, scratch, summaryOf } from './lib/run.js';
import { prng } from '../scripts/prng.js';
import { PARSER, byParser } from './lib/parser.js';
import { normalizeDomain } from '../src/core/store/domains.js';
import { canonicalize, domainOfHost, type DomainMode, type UrlOptions } from '../src/core/url.js';

const opts = (domainMode: DomainMode): UrlOptions => ({ maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode });

/** Labels a host may be made of: sub-delimiters, label-edge hyphens, 63/64 characters, IDN, case, punycode, numbers, percent-escapes, empty. */
const LABELS = [
  'a',
  'WWW',
  'Ex',
  '*',
  'a*b',
  '!',
  'a!b',
  '$',
  "a'b",
  '~x',
  'x~',
  '_',
  '_dmarc',
  'a_b',
  '-a',
  'a-',
  '-',
  '--',
  'a--b',
  '-a-',
  '"',
  'a`b',
  '{a}',
  'a;b',
  'a,b',
  'a=b',
  'a+b',
  'a&b',
  '(a)',
  'x'.repeat(63),
  'y'.repeat(64),
  'Z'.repeat(100),
  'xn--e1afmkfd',
  'XN--P1AI',
  'xn--zca',
  'xn--ls8h',
  'пример',
  'STRAẞE',
  'ß',
  'Faß',
  'ＡＢ',
  'a\u00adb',
  '123',
  '0x1f',
  '1a',
  '0',
  '%41',
  'a%2ab',
  '%21',
  '',
];
/** Ends of a host: real suffixes (ICANN, private, multi-label), single labels, digits-only and hex-looking last labels. */
const ENDS = ['com', 'co.uk', 'рф', 'github.io', 'blogspot.com', 'uk', 'localhost', '123abc', 'a1', 'com.', 'co.uk.', 'x..', '.'];
/** Hosts written out: IPv4 in odd forms, IPv6, long names, empty labels, public suffixes themselves. */
const FIXED = [
  '1.2.3.4',
  '0x7f.1',
  '017700000001',
  '4294967295',
  '127.1.',
  '0300.0250.0.1',
  '0X7F.0.0.1',
  '1.2.3',
  '0',
  '0x',
  '[::1]',
  '[0:0::1]',
  '[2001:DB8::1]',
  '[::FFFF:1.2.3.4]',
  '[1:2:3:4:5:6:7:8]',
  `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`, // 253
  `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`, // 254
  `www.${'q'.repeat(300)}.com`,
  `${'a'.repeat(64)}.com`,
  'co.uk',
  'www.co.uk',
  'com',
  'github.io',
  'x.github.io',
  'a..example.com',
  '.example.com',
  'example.com..',
  '.',
  '..',
  'a.',
  'localhost',
  'LOCALHOST.',
  'a*b.com',
  'www.a*b.com',
  'x.-a-.com',
  'foo.bar.123abc',
  'xn--e1afmkfd.xn--p1ai',
  'пример.рф',
  'STRAẞE.de',
  'example.com。',
  'Example.COM.',
];

/** Hosts as typed in URLs: the fixed ones and `n` random ones from the labels and ends. */
function hosts(n: number, seed: number): string[] {
  const next = prng(seed);
  const pick = <T>(a: readonly T[]) => a[Math.floor(next() * a.length)]!;
  const out = [...FIXED];
  for (let i = 0; i < n; i++) {
    const k = Math.floor(next() * 4);
    out.push([...Array.from({ length: k }, () => pick(LABELS)), pick(ENDS)].join('.'));
  }
  return out;
}

/** Each host the URL parser accepts, with the domain records carry in each mode. */
function recordDomains(typed: string[]): { typed: string; registrable: string; host: string }[] {
  const out: { typed: string; registrable: string; host: string }[] = [];
  for (const h of typed) {
    const r = canonicalize(`http://${h}/p`, opts('registrable'));
    const w = canonicalize(`http://${h}/p`, opts('host'));
    // A host past 253 bytes is a reject in host mode only, where it is the domain.
    if ('domain' in r && 'reason' in w && w.reason === 'domain too long') continue;
    assert.equal('domain' in r, 'domain' in w, h);
    if ('domain' in r && 'domain' in w) out.push({ typed: h, registrable: r.domain, host: w.domain });
  }
  return out;
}

test('every domain a record can carry is taken by normalizeDomain unchanged, and a typed host becomes the one host-mode records carry', () => {
  const all = recordDomains(hosts(5000, 49));
  assert.ok(all.length > 2500, `only ${all.length} hosts parsed: the generator makes too few URLs`);
  const refused: string[] = [];
  const changed: string[] = [];
  const typedWrong: string[] = [];
  const notRegistrable: string[] = [];
  for (const { typed, registrable, host } of all) {
    for (const d of [registrable, host]) {
      const n = normalizeDomain(d);
      if ('error' in n) refused.push(`${JSON.stringify(d)}: ${n.error}`);
      else if (n.domain !== d) changed.push(`${JSON.stringify(d)} -> ${JSON.stringify(n.domain)}`);
    }
    // What an operator copies from a URL is the host: it is stored as records of that host carry it.
    const t = normalizeDomain(typed);
    if (!('domain' in t && t.domain === host)) typedWrong.push(`${JSON.stringify(typed)}: ${JSON.stringify(t)}, records carry ${JSON.stringify(host)}`);
    // assign warns "not a registrable domain" when domainOfHost changes it: never for a registrable-mode record's own domain.
    if (domainOfHost(registrable) !== registrable) notRegistrable.push(`${JSON.stringify(registrable)} -> ${domainOfHost(registrable)}`);
  }
  assert.deepEqual(refused.slice(0, 20), [], `${refused.length} record domains refused`);
  assert.deepEqual(changed.slice(0, 20), [], `${changed.length} record domains changed`);
  assert.deepEqual(typedWrong.slice(0, 20), [], `${typedWrong.length} typed hosts not stored as records carry them`);
  assert.deepEqual(notRegistrable.slice(0, 20), [], `${notRegistrable.length} record domains warned about`);
});

test('host mode: a host with and without its one trailing dot has one domain, as in registrable mode', () => {
  for (const host of ['www.example.com', 'co.uk', 'localhost', 'a..example.com', '.example.com', 'a*b.example.com']) {
    const plain = canonicalize(`http://${host}/x`, opts('host'));
    const dotted = canonicalize(`http://${host}./x`, opts('host'));
    assert.ok('domain' in plain && 'domain' in dotted, host);
    assert.equal(dotted.domain, plain.domain, host);
    assert.equal(plain.domain, host);
  }
  // Two trailing dots are an empty label, not a spelling of the host with one.
  const two = canonicalize('http://www.example.com../x', opts('host'));
  assert.ok('domain' in two && two.domain === 'www.example.com..', JSON.stringify(two));
});

test(`normalizeDomain still refuses what is no host: empty, spaces and controls, a path, a port, userinfo, what the URL parser refuses (${PARSER})`, () => {
  for (const [typed, error] of [
    ['', 'empty domain'],
    ['  ', 'empty domain'],
    ['a b.com', "bad domain 'a b.com' (space or control character)"],
    ['a\tb', "bad domain 'a\tb' (space or control character)"],
    ['a/b', "bad domain 'a/b'"],
    ['a.com:80', "bad domain 'a.com:80'"],
    ['user@a.com', "bad domain 'user@a.com'"],
    ['a<b', "bad domain 'a<b'"],
    ['a%2fb', "bad domain 'a%2fb'"],
    ['example.123', "bad domain 'example.123'"],
    ['1.2.3.09', "bad domain '1.2.3.09'"],
    ['[1::2::3]', "bad domain '[1::2::3]'"],
  ] as const) {
    assert.deepEqual(normalizeDomain(typed), { error }, JSON.stringify(typed));
  }
  // An empty punycode label: refused by ada 2 (Node 20, 22), a host to ada 4 (Node 24, 26).
  const xn = byParser({ 2: { error: "bad domain 'xn--zz.com'" }, 4: { domain: 'xn--zz.com' } });
  assert.deepEqual(normalizeDomain('xn--zz.com'), xn);
});

test('partner-db assign and import take every domain analyze-dump writes, exactly, and upload-domains then routes its records there', () => {
  const typed = hosts(150, 4949);
  for (const mode of ['registrable', 'host'] as const) {
    const work = scratch('ms-dspell-');
    const reflog = typed.map((h, i) => `1\t5\t20110727200841\t${i}\thttp://${h}/p${i}\t1\tv\n`).join('');
    const ad = runBin('analyze-dump', ['--domain-mode', mode, '--max-reject-ratio', '1', '--threads', '0'], 'hdr\n' + reflog, work);
    assert.equal(ad.status, 0, ad.stderr);
    const records = ad.stdout.split('\n').filter((l) => l !== '');
    const domains = [...new Set(records.map((l) => l.split('\t')[4]!))].sort();
    assert.ok(domains.length > 100, `${mode}: only ${domains.length} domains`);
    // The hard ones by assign, one process each; the rest by import.
    const hard = domains.filter((d) => /[^a-z0-9.-]|^-|-$|\.\.|^\.|[^.]{64}|^.{254}/.test(d) || /(^|\.)-|-(\.|$)/.test(d));
    assert.ok(hard.length > 20, `${mode}: only ${hard.length} unusual domains: ${hard.join(' ')}`);
    const byHand = hard.filter((_, i) => i % Math.ceil(hard.length / 16) === 0);
    // fresh, the least-loaded: where a domain the database does not match would go.
    madeDb(work, 'p.db', [
      ['add', 'fresh'],
      ['add', 'chosen'],
    ]);
    for (const d of byHand) {
      // A domain that starts with '-' goes after '--', as any such argument of a command.
      const r = runBin('partner-db', ['--db', 'p.db', 'assign', ...(d.startsWith('-') ? ['--'] : []), d, 'chosen'], '', work);
      assert.equal(r.status, 0, `${mode}: assign ${JSON.stringify(d)}: ${r.stderr}`);
      assert.equal(r.stdout, `assigned ${d} to Yacobot 2 (chosen)\n`, `${mode}: assign ${JSON.stringify(d)}`);
      if (mode === 'registrable') assert.equal(r.stderr, '', `${mode}: a record's own domain needs no warning`);
    }
    const rest = domains.filter((d) => !byHand.includes(d));
    const csv = 'domain,yacobot\n' + rest.map((d) => `"${d.replace(/"/g, '""')}",chosen\n`).join('');
    fs.writeFileSync(path.join(work, 'in.csv'), csv);
    const im = runBin('partner-db', ['--db', 'p.db', 'import', 'in.csv'], '', work);
    assert.equal(im.status, 0, `${mode}: import: ${im.stderr}`);
    assert.equal(im.stdout, `imported ${rest.length} domain(s) from in.csv: ${rest.length} new, 0 moved, 0 unchanged\n`);
    if (mode === 'registrable') assert.equal(im.stderr, '');
    // Routed by the database alone, and by the map domains-from-db writes of it.
    const map = runBin('domains-from-db', ['--db', 'p.db'], '', work);
    assert.equal(map.status, 0, map.stderr);
    assert.equal(map.stdout.split('\n').length - 1, domains.length);
    fs.writeFileSync(path.join(work, 'map'), map.stdout);
    for (const args of [[], ['--map', 'map']]) {
      const up = runBin('upload-domains', ['--db', 'p.db', '--now', '20110728070000', ...args], ad.stdout, work);
      assert.equal(up.status, 0, up.stderr);
      const s = summaryOf(up.stderr);
      assert.equal(s.domains_new, 0, `${mode} ${args.join(' ')}: domains the database did not match`);
      const elsewhere = up.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('2\t'));
      assert.deepEqual(elsewhere.slice(0, 5), [], `${mode} ${args.join(' ')}: records not routed to the chosen Yacobot`);
      assert.equal(up.stdout.split('\n').length - 1, records.length);
    }
  }
});

test("a domain that starts with '-' is taken after '--'; without it, the usage error says so", () => {
  const work = scratch('ms-dspell-');
  madeDb(work, 'p.db', [['add', 'a']]);
  const r = runBin('partner-db', ['--db', 'p.db', 'assign', '-a-.com', 'a'], '', work);
  assert.equal(r.status, 2);
  assert.equal(
    r.stderr,
    "partner-db: unknown option '-a-.com' (an argument that starts with '-' goes after '--', e.g. '-- -a-.com')\nTry 'partner-db --help' for more information.\n",
  );
  assert.equal(partnerDb(work, 'p.db', 'assign', '--', '-a-.com', 'a'), 'assigned -a-.com to Yacobot 1 (a)\n');
  // An option misspelt is told as before.
  const b = runBin('partner-db', ['--db', 'p.db', '--bogus', 'list'], '', work);
  assert.equal(b.stderr, "partner-db: unknown option '--bogus'\nTry 'partner-db --help' for more information.\n");
  // Only where an argument may start with '-': add refuses such a name, and a command
  // without arguments (list, or a script) has no argument to put after '--'.
  const hintOf = (bin: string, args: string[]) => runBin(bin, args, '', work).stderr.split('\n')[0];
  assert.equal(hintOf('partner-db', ['--db', 'p.db', 'add', '-x']), "partner-db: unknown option '-x' (a Yacobot name must not start with '-')");
  assert.equal(hintOf('partner-db', ['--db', 'p.db', 'list', '-x']), "partner-db: unknown option '-x'");
  assert.equal(
    hintOf('partner-db', ['--db', 'p.db', 'disable', '-x']),
    "partner-db: unknown option '-x' (an argument that starts with '-' goes after '--', e.g. '-- -x')",
  );
  const gen = spawnSync(process.execPath, [path.join(ROOT, 'dist/scripts/gen-reflog.js'), '-x'], { encoding: 'utf8' });
  assert.equal(gen.status, 2);
  assert.equal(gen.stderr.split('\n')[0], "gen-reflog: unknown option '-x'");
});
