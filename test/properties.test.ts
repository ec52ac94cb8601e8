// Property-based tests (fast-check, fixed seeds, bounded runs) against small models
// of the contract's rules written here. The pure cores run in-process many times; the
// real binaries run fewer times (a process costs ~130 ms).
process.env.TZ = 'UTC'; // timestampToMs reads local time; the models use UTC
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { hasStackTrace, runBin, scratch, summaryOf, testEnv } from './lib/run.js';
import { decide } from '../src/stages/filter-url.js';
import { analyzeLine } from '../src/core/reflog.js';
import { checkJoinedAt } from '../src/core/record-checks.js';
import { TextSink, lineRef } from './lib/bytes.js';
import { ID_POOL, SEED, T0, fmt, idBig, idOf, parseTs, reflogHitsArb, tagArb, text, tsArb, hitsArb, type Rec } from './lib/model.js';
import { canonicalize, loadUrlHasher, type UrlOptions } from '../src/core/url.js';
import { lineCount } from '../scripts/fuzz.js';

const ROOT_DIR = scratch('ms-prop-');
let dirNo = 0;
const freshDir = () => fs.mkdtempSync(path.join(ROOT_DIR, `${dirNo++}-`));

test("the test's own XXH64 matches the specification vectors and the project's hasher", async () => {
  assert.equal(idOf(''), 'ef46db3751d8e999');
  assert.equal(idOf('a'), 'd24ec4f1a98c6e5b');
  assert.equal(idOf('abc'), '44bc2cf5ad770999');
  const hash = await loadUrlHasher();
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 100 }), (s) => hash(s) === idOf(s)),
    { seed: SEED, numRuns: 300 },
  );
});

// --- filter-url ---------------------------------------------------------------------

test('filter-url core (decide) equals the rule table of the contract (docs/formats-and-rules.md) for random joined records', () => {
  const side = fc.option(fc.record({ ts: tsArb, tag: tagArb, hits: hitsArb }));
  // Times near the boundaries (exactly resend-after / keep apart, or one second off) half of the time.
  const near = fc.option(fc.tuple(fc.integer({ min: -1, max: 1 }), fc.integer({ min: -1, max: 1 })), { freq: 2 });
  fc.assert(
    fc.property(side, side, tsArb, fc.constantFrom(60, 1800, 3600, 7200), fc.constantFrom(3600, 36000, 86400), near, (c, i, now, resend, keep, nb) => {
      fc.pre(c !== null || i !== null);
      if (nb && c) {
        if (i) i.ts = fmt(parseTs(c.ts) + (resend + nb[0]) * 1000);
        now = fmt(parseTs(c.ts) + (keep + nb[1]) * 1000);
      }
      const f = [ID_POOL[0]!, 'd.example', 'http://d.example/', c?.ts ?? '-', i?.ts ?? '-', c?.tag ?? '', i?.tag ?? '', c?.hits ?? '-', i?.hits ?? '-'];
      const jl = lineRef(f.join('\t'), 8);
      assert.equal(checkJoinedAt(jl), null, f.join('\t'));
      const sendOut = new TextSink();
      const keepOut = new TextSink();
      decide(jl, { nowMs: parseTs(now), resendAfterMs: resend * 1000, keepMs: keep * 1000 }, sendOut, keepOut);
      const line = (ts: string, tag: string, hits: string) => [f[0], ts, tag, hits, f[1], f[2]].join('\t');
      let send: string | null = null;
      let keepLine: string | null = null;
      if (!c) {
        send = keepLine = line(i!.ts, i!.tag, i!.hits);
      } else if (!i) {
        keepLine = parseTs(now) - parseTs(c.ts) < keep * 1000 ? line(c.ts, c.tag, c.hits) : null;
      } else {
        const sum = (BigInt(c.hits) + BigInt(i.hits)).toString();
        const changed = i.tag !== '' && i.tag !== c.tag && parseTs(i.ts) >= parseTs(c.ts);
        const due = parseTs(i.ts) - parseTs(c.ts) >= resend * 1000;
        if (due || changed) {
          send = line(i.ts, i.tag, i.hits);
          keepLine = line(i.ts > c.ts ? i.ts : c.ts, i.tag !== '' ? i.tag : c.tag, sum);
        } else {
          keepLine = line(c.ts, c.tag, sum);
        }
      }
      assert.equal(sendOut.take(), send === null ? '' : send + '\n');
      assert.equal(keepOut.take(), keepLine === null ? '' : keepLine + '\n');
    }),
    { seed: SEED, numRuns: 2000 },
  );
});

// --- analyze-dump -------------------------------------------------------------------

const URL_OPTS: UrlOptions = { maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode: 'registrable' };

/** URL-ish strings: valid web URLs, mangled ones, and arbitrary text. */
const urlArb = fc.oneof(
  { weight: 4, arbitrary: fc.webUrl({ validSchemes: ['http', 'https'], withQueryParameters: true, withFragments: true }) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.webUrl({ validSchemes: ['http', 'https', 'ftp'], withQueryParameters: true }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('/../', '/./', '%2e', '%41', 'É', 'Ж', ' ', ':80', '@', '#', '\\', '[::1]', 'xn--', '..', '%', '\u0000')), {
          maxLength: 3,
        }),
        fc.boolean(),
      )
      .map(([u, inserts, upper]) => {
        let s = upper ? u.toUpperCase() : u;
        for (const [at, ins] of inserts) {
          const k = at % (s.length + 1);
          s = s.slice(0, k) + ins + s.slice(k);
        }
        return s;
      }),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => s.replace(/[\t\n]/g, '')) },
);

test("analyze-dump core: a record's url is canonical (a fixed point), its id is XXH64(url), its domain ends its host", () => {
  fc.assert(
    fc.property(urlArb, tsArb, reflogHitsArb, tagArb, (url, ts, hits, tag) => {
      const line = Buffer.from(['b', '5', ts, '1', url, hits, tag].join('\t'));
      const v = analyzeLine(line, 0, line.length, false, URL_OPTS, idBig);
      if (v.kind === 'skip') {
        assert.equal(v.what, 'empty');
        return;
      }
      if (v.kind === 'reject') {
        assert.ok(v.reason.length > 0);
        return;
      }
      const f = v.record.split('\t');
      assert.equal(f.length, 6);
      const [id, ts2, tag2, hits2, domain, canon] = f as [string, string, string, string, string, string];
      assert.equal(id, idOf(canon));
      assert.equal(ts2, ts);
      assert.equal(tag2, tag);
      assert.equal(hits2, BigInt(hits).toString());
      assert.ok(/^https?:\/\/[\x21-\x7e]+$/.test(canon), `canonical url is printable ASCII: ${canon}`);
      assert.ok(!canon.includes('#'), 'fragment removed');
      const again = canonicalize(canon, URL_OPTS);
      assert.ok(!('reason' in again), `canonical url ${canon} is rejected when read again`);
      assert.equal(again.url, canon, 'canonicalization is idempotent');
      assert.equal(again.domain, domain);
      const host = new URL(canon).hostname;
      const bare = host.replace(/\.$/, '');
      assert.ok(domain === host || domain === bare || bare.endsWith(`.${domain}`), `domain ${domain} ends host ${host}`);
      assert.equal(domain, domain.toLowerCase());
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

/** Arbitrary bytes, and text made of reflog-ish pieces with the separators mixed in. */
const bytesArb = fc.oneof(
  fc.uint8Array({ maxLength: 3000 }),
  fc
    .array(
      fc.oneof(
        fc.constantFrom(
          '\t',
          '\t',
          '\n',
          '\n',
          '\r',
          '\r\n',
          'b',
          '5',
          '20110727200841',
          '20110231000000',
          '1',
          '007',
          '-1',
          'http://a.example/x',
          'https://Ж.рф/?q#f',
          'ftp://x/',
          'mailto:x',
          'unknown field',
          '\u00e9',
          '\ufffd',
        ),
        fc.webUrl(),
        fc.uint8Array({ maxLength: 6 }).map((b) => Buffer.from(b).toString('latin1')),
      ),
      { maxLength: 300 },
    )
    .map((parts) => Buffer.from(parts.join(''), 'utf8')),
  fc
    .array(fc.tuple(urlArb, tsArb, reflogHitsArb, tagArb, fc.boolean()), { maxLength: 60 })
    .map((ls) => Buffer.from(ls.map(([u, ts, h, t, seven]) => ['b', '5', ts, '1', u, h, ...(seven ? [t] : [])].join('\t')).join('\n'), 'utf8')),
);

/** Output of analyze-dump predicted from the pure core: every record, stably sorted by (id, ts). */
function predict(buf: Buffer): string {
  const recs: string[] = [];
  let start = 0;
  const n = lineCount(buf);
  for (let k = 0; k < n; k++) {
    let end = buf.indexOf(10, start);
    if (end === -1) end = buf.length;
    const v = analyzeLine(buf, start, end, false, URL_OPTS, idBig);
    if (v.kind === 'record') recs.push(v.record);
    start = end + 1;
  }
  return recs
    .map((r, i) => ({ r, i, k: r.slice(0, 31) }))
    .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.i - b.i))
    .map((x) => x.r + '\n')
    .join('');
}

test('analyze-dump binary on any bytes: sorted output, id = XXH64(url), counts add up, rejects file = rejected', () => {
  fc.assert(
    fc.property(bytesArb, (bytes) => {
      const buf = Buffer.from(bytes);
      const dir = freshDir();
      const r = runBin('analyze-dump', ['--max-reject-ratio', '1', '--rejects', 'rej'], buf, dir);
      assert.equal(r.status, 0, r.stderr);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      const out = r.stdout === '' ? [] : r.stdout.slice(0, -1).split('\n');
      let prev = '';
      for (const l of out) {
        const f = l.split('\t');
        assert.equal(f.length, 6, l);
        assert.equal(f[0], idOf(f[5]!), `id of ${f[5]}`);
        const key = `${f[0]}\t${f[1]}`;
        assert.ok(prev <= key, `sorted: ${prev} then ${key}`);
        prev = key;
      }
      const s = summaryOf(r.stderr);
      assert.equal(s.lines_in, lineCount(buf));
      assert.equal(s.records_out, out.length);
      assert.equal((s.records_out as number) + (s.rejected as number) + (s.skipped as number), s.lines_in);
      const rej = fs.readFileSync(path.join(dir, 'rej'));
      assert.equal(lineCount(rej), s.rejected);
      assert.equal(r.stdout, predict(buf), 'output = the pure core over every line, stably sorted');
    }),
    { seed: SEED, numRuns: 25 },
  );
});

// --- the chain over several batches -------------------------------------------------

/** Canonical URLs with their registrable domains (by hand), and raw spellings of each. */
const POOL: { canon: string; domain: string; raw: string[] }[] = [
  {
    canon: 'http://www.site1.com/p',
    domain: 'site1.com',
    raw: ['http://www.site1.com/p', 'HTTP://WWW.SITE1.COM/p', 'http://www.site1.com:80/p#top', 'http://www.site1.com/a/../p'],
  },
  {
    canon: 'https://shop.site2.co.uk/?q=1',
    domain: 'site2.co.uk',
    raw: ['https://shop.site2.co.uk/?q=1', 'https://Shop.Site2.co.uk:443?q=1', 'https://shop.site2.co.uk/./?q=1#x'],
  },
  {
    canon: 'http://xn--d1abbgf6aiiy.xn--p1ai/',
    domain: 'xn--d1abbgf6aiiy.xn--p1ai',
    raw: ['http://президент.рф/', 'http://ПРЕЗИДЕНТ.РФ', 'http://xn--d1abbgf6aiiy.xn--p1ai/#a'],
  },
  { canon: 'http://10.0.0.7:8080/x%20y', domain: '10.0.0.7', raw: ['http://10.0.0.7:8080/x y', 'http://10.0.0.7:8080/x%20y', 'http://0xa.0.0.7:8080/x%20y'] },
  { canon: 'http://user.github.io/', domain: 'user.github.io', raw: ['http://user.github.io/', 'http://USER.github.io:80/'] },
  { canon: 'http://[2001:db8::1]/', domain: '[2001:db8::1]', raw: ['http://[2001:DB8:0::1]/', 'http://[2001:db8::1]:80/'] },
];
const JUNK = [
  'unknown field',
  '',
  'b\t5\t20110230000000\t1\thttp://a.example/\t1',
  'b\t5\t20110727200841\t1\tftp://a.example/\t1',
  'b\t5\t20110727200841\t1\thttp://a.example/\tx',
  'too\tfew',
];

const hitArb = fc.record({
  u: fc.nat(POOL.length - 1),
  v: fc.nat(3),
  sec: fc.integer({ min: -2400, max: 3599 }),
  tag: tagArb,
  hits: reflogHitsArb,
});
const batchArb = fc.array(fc.oneof({ weight: 9, arbitrary: hitArb }, { weight: 1, arbitrary: fc.constantFrom(...JUNK) }), { maxLength: 40 });

test('the chain analyze-dump | group-sum | join-current | filter-url over random batches equals the model', () => {
  fc.assert(
    fc.property(
      fc.array(batchArb, { minLength: 1, maxLength: 4 }),
      fc.constantFrom(20, 60),
      fc.constantFrom(1800, 3600, 7200),
      fc.constantFrom(3600, 36000),
      (batches, minutes, resend, keep) => {
        const dir = freshDir();
        let model = new Map<string, Rec>();
        for (let b = 0; b < batches.length; b++) {
          const bStart = T0 + b * minutes * 60_000;
          const now = bStart + minutes * 60_000;
          const lines: string[] = [];
          const inc = new Map<string, { rec: Rec; seq: number }[]>();
          for (const [seq, h] of batches[b]!.entries()) {
            if (typeof h === 'string') {
              lines.push(h);
              continue;
            }
            const p = POOL[h.u]!;
            const ts = fmt(bStart + h.sec * 1000);
            lines.push(['b', '5', ts, '1', p.raw[h.v % p.raw.length]!, h.hits, h.tag].join('\t'));
            const id = idOf(p.canon);
            const list = inc.get(id) ?? [];
            list.push({ rec: { id, ts, tag: h.tag, hits: h.hits, domain: p.domain, url: p.canon }, seq });
            inc.set(id, list);
          }
          fs.writeFileSync(path.join(dir, 'hour.reflog'), lines.map((l) => l + '\n').join(''));
          // The model: group by (timestamp, input order), then the contract's filter rule.
          const grouped = new Map<string, Rec>();
          for (const [id, list] of inc) {
            list.sort((x, y) => (x.rec.ts < y.rec.ts ? -1 : x.rec.ts > y.rec.ts ? 1 : x.seq - y.seq));
            const tags = list.map((x) => x.rec.tag).filter((t) => t !== '');
            grouped.set(id, {
              ...list[0]!.rec,
              ts: list[list.length - 1]!.rec.ts,
              tag: tags.length ? tags[tags.length - 1]! : '',
              hits: list.reduce((a, x) => a + BigInt(x.rec.hits), 0n).toString(),
            });
          }
          const sent: Rec[] = [];
          const next = new Map<string, Rec>();
          for (const id of [...new Set([...grouped.keys(), ...model.keys()])].sort()) {
            const i = grouped.get(id);
            const c = model.get(id);
            if (i && !c) {
              sent.push(i);
              next.set(id, i);
            } else if (c && !i) {
              if (now - parseTs(c.ts) < keep * 1000) next.set(id, c);
            } else if (c && i) {
              const hits = (BigInt(c.hits) + BigInt(i.hits)).toString();
              if (parseTs(i.ts) - parseTs(c.ts) >= resend * 1000 || (i.tag !== '' && i.tag !== c.tag && parseTs(i.ts) >= parseTs(c.ts))) {
                sent.push(i);
                next.set(id, { ...i, ts: i.ts > c.ts ? i.ts : c.ts, tag: i.tag !== '' ? i.tag : c.tag, hits });
              } else {
                next.set(id, { ...c, hits });
              }
            }
          }
          model = next;
          const r = spawnSync(
            'bash',
            [
              '-c',
              'set -eo pipefail; analyze-dump --max-reject-ratio 1 hour.reflog | group-sum | join-current --current current_log ' +
                `| filter-url --now ${fmt(now)} --resend-after ${resend} --keep ${keep} --current-out current_log > filtered_log`,
            ],
            { cwd: dir, env: testEnv(), encoding: 'utf8' },
          );
          assert.equal(r.status, 0, `batch ${b}: ${r.stderr}`);
          assert.ok(!hasStackTrace(r.stderr));
          assert.equal(fs.readFileSync(path.join(dir, 'filtered_log'), 'utf8'), text(sent), `batch ${b}: filtered_log`);
          const cur = [...model.keys()].sort().map((id) => model.get(id)!);
          assert.equal(fs.readFileSync(path.join(dir, 'current_log'), 'utf8'), text(cur), `batch ${b}: current_log`);
        }
      },
    ),
    { seed: SEED, numRuns: 6 },
  );
});
