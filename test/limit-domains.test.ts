// limit-domains against a model of its rule (docs/formats-and-rules.md, "Politeness"),
// over random inputs small and large (spilling), and its errors and carry file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { spawn } from 'node:child_process';
import { BIN, runBin, scratch, summaryOf, failedOutput, hasStackTrace, testEnv } from './lib/run.js';
import { generateFiltered } from '../scripts/gen-filtered.js';
import { SPOOL_PREFIX } from '../src/core/spool.js';
import { SEED } from './lib/model.js';
import { FAST_SUITE } from './lib/pg.js';
import { type Carried, type Url, carryLine, model, urlLine } from './lib/carry-model.js';
import { carriedRank, freshRank } from '../src/stages/limit-domains-rank.js';
import { timestampToMs } from '../src/core/time.js';

process.env.TZ = 'UTC';
const NOW = '20110727210000';
const H = 3600_000;

const id = (n: number) => n.toString(16).padStart(16, '0');

function run(dir: string, filtered: Url[], carry: Carried[] | null, cap: number, extra: string[] = [], now = NOW) {
  const c = path.join(dir, 'carry');
  if (carry === null) fs.rmSync(c, { force: true });
  else fs.writeFileSync(c, carry.map(carryLine).join(''));
  const r = runBin(
    'limit-domains',
    ['--max-per-domain', String(cap), '--carry', c, '--carry-out', c, '--now', now, '--tmp', dir, ...extra],
    filtered.map(urlLine).join(''),
    dir,
  );
  return { ...r, carryOut: fs.existsSync(c) ? fs.readFileSync(c, 'utf8') : null, summary: summaryOf(r.stderr) };
}

const hour = (h: number) => `201107${String(27 + Math.floor(h / 24)).padStart(2, '0')}${String(h % 24).padStart(2, '0')}0000`;
const scenarioArb = fc.record({
  cap: fc.integer({ min: 1, max: 4 }),
  // ids 1..40, each either filtered this hour, carried, both or neither
  recs: fc.array(
    fc.record({
      n: fc.integer({ min: 1, max: 40 }),
      domain: fc.constantFrom('a.com', 'b.org', 'c.net', 'x.y.example'),
      hits: fc.constantFrom('0', '1', '3', '7', '1000000000000000000000', '99999999999999'),
      tag: fc.constantFrom('', 'v1', 'v2'),
      inFiltered: fc.boolean(),
      decidedHour: fc.option(fc.integer({ min: 0, max: 20 }), { nil: null }),
    }),
    { maxLength: 40 },
  ),
});

test('random hours: the stage sends and carries what the model does', () => {
  const dir = scratch('ms-ld-');
  fc.assert(
    fc.property(scenarioArb, ({ cap, recs }) => {
      const seen = new Map<number, (typeof recs)[number]>();
      for (const r of recs) seen.set(r.n, r);
      const filtered: Url[] = [];
      const carry: Carried[] = [];
      for (const [n, r] of [...seen].sort((a, b) => a[0] - b[0])) {
        const u: Url = { id: id(n), ts: '20110727200000', tag: r.tag, hits: r.hits, domain: r.domain, url: `http://${r.domain}/${n}` };
        if (r.inFiltered) filtered.push(u);
        if (r.decidedHour !== null) carry.push({ ...u, ts: '20110727100000', tag: 'old', hits: '5', decided: hour(r.decidedHour) });
      }
      const got = run(dir, filtered, carry, cap, ['--carry-keep', '6h']);
      const want = model(filtered, carry, cap, NOW, 6 * H);
      assert.equal(got.status, 0, got.stderr);
      assert.equal(got.stdout, want.out);
      assert.equal(got.carryOut, want.carry);
      assert.equal(got.summary.carry_expired, want.expired);
      const s = got.summary as Record<string, number>;
      assert.equal(s.filtered_in! + s.carried_in! - s.carried_again!, s.sent! + s.carried_out! + s.carry_expired!);
    }),
    // A representative few in the fast suite, all 30 in npm run test:all.
    { seed: SEED, numRuns: FAST_SUITE ? 6 : 30 },
  );
});

test("a big hour, one domain holding half of it, in 1M of memory: the spool and the sorts spill to --tmp, and the result is the model's", () => {
  const dir = scratch('ms-ld-big-');
  const filtered: Url[] = [];
  const carry: Carried[] = [];
  let x = 12345;
  const rnd = (m: number) => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) % m;
  for (let n = 1; n <= 30_000; n++) {
    const domain = n % 2 === 0 ? 'big.com' : `d${rnd(300)}.com`;
    const u: Url = { id: id(n * 7919), ts: '20110727200000', tag: '', hits: String(rnd(50)), domain, url: `http://${domain}/${n}` };
    if (rnd(4) > 0) filtered.push(u);
    else carry.push({ ...u, decided: hour(15 + rnd(6)) });
  }
  filtered.sort((a, b) => (a.id < b.id ? -1 : 1));
  carry.sort((a, b) => (a.id < b.id ? -1 : 1));
  const got = run(dir, filtered, carry, 100, ['--memory', '1M', '--carry-keep', '24h', '--log-level', 'debug']);
  const want = model(filtered, carry, 100, NOW, 24 * H);
  assert.equal(got.status, 0, got.stderr);
  assert.ok(got.stdout === want.out, "stdout is the model's");
  assert.ok(got.carryOut === want.carry, "the carry is the model's");
  const s = got.summary;
  assert.equal(s.spool_spilled, true);
  assert.ok((s.sort_runs as number) > 1, `sort runs: ${s.sort_runs}`);
  assert.equal(s.capped_domains_total, want.capped.length);
  assert.ok(want.capped.length > 10, 'more domains over the cap than the summary names');
  const top = Object.entries(s.capped_domains as Record<string, number>);
  assert.equal(top.length, 10);
  assert.deepEqual(top[0], ['big.com', 15_000 - 100]);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['carry'], 'no temporary file left in --tmp');
});

test('no domain over its cap: the input goes out as it came, and the carry is empty', () => {
  const dir = scratch('ms-ld-');
  const filtered = [1, 2, 3].map((n): Url => ({ id: id(n), ts: '20110727200000', tag: '', hits: '1', domain: `d${n}.com`, url: `http://d${n}.com/` }));
  const got = run(dir, filtered, null, 1);
  assert.equal(got.status, 0, got.stderr);
  assert.equal(got.stdout, filtered.map(urlLine).join(''));
  assert.equal(got.carryOut, '');
  assert.deepEqual([got.summary.carried_in, got.summary.sent, got.summary.carried_out], [0, 3, 0]);
});

test("a URL decided again while it waits goes out once, with the new values and its first decision's place in line", () => {
  const dir = scratch('ms-ld-');
  const u = (n: number, tag: string, hits: string): Url => ({ id: id(n), ts: '20110727200000', tag, hits, domain: 'a.com', url: `http://a.com/${n}` });
  // Carried since 18:00 with tag v1; decided again now with v2; a fresh one with more hits.
  const carry = [{ ...u(2, 'v1', '1'), ts: '20110727170000', decided: '20110727180000' }];
  const got = run(dir, [u(1, '', '500'), u(2, 'v2', '3')], carry, 1);
  assert.equal(got.status, 0, got.stderr);
  assert.equal(got.stdout, urlLine(u(2, 'v2', '3')));
  assert.equal(got.carryOut, carryLine({ ...u(1, '', '500'), decided: NOW }));
  assert.equal(got.summary.carried_again, 1);
});

test('a carried record --carry-keep old is dropped and counted, unless decided again', () => {
  const dir = scratch('ms-ld-');
  const c = (n: number, decided: string): Carried => ({
    id: id(n),
    ts: '20110727000000',
    tag: '',
    hits: '1',
    domain: 'a.com',
    url: `http://a.com/${n}`,
    decided,
  });
  const carry = [c(1, '20110727110000'), c(2, '20110727110001'), c(3, '20110727100000')];
  const again: Url = { ...c(3, ''), ts: '20110727200000' };
  const got = run(dir, [again], carry, 5, ['--carry-keep', '10h']);
  assert.equal(got.status, 0, got.stderr);
  // 1 is exactly 10h old: dropped; 2 is a second younger; 3 is older but decided again.
  assert.equal(got.stdout, urlLine(c(2, '')) + urlLine(again));
  assert.equal(got.summary.carry_expired, 1);
});

test('ranks: carried before fresh, older before newer; fresh by hits, most first', () => {
  const b = (s: string) => Buffer.from(s);
  const early = carriedRank(timestampToMs('20110727100000'));
  const late = carriedRank(timestampToMs('20110727110000'));
  assert.ok(early < late);
  const hits = (h: string) => freshRank(b(h), 0, h.length);
  assert.ok(late < hits('999999999999999999999'));
  assert.ok(hits('10') < hits('9'));
  assert.ok(hits('0') <= 1e14 - 1);
  assert.equal(hits('99000000000000'), hits('1000000000000000000000000'));
});

test('errors name the place: a bad carry line, unsorted input; the carry is left as it was and no temporary file stays', () => {
  const dir = scratch('ms-ld-');
  const good: Url = { id: id(1), ts: '20110727200000', tag: '', hits: '1', domain: 'a.com', url: 'http://a.com/' };
  const c = path.join(dir, 'carry');
  fs.writeFileSync(c, carryLine({ ...good, decided: '20110727200000' }) + urlLine({ ...good, id: id(2) }));
  const before = fs.readFileSync(c);
  const r = runBin('limit-domains', ['--max-per-domain', '1', '--carry', c, '--carry-out', c, '--now', NOW, '--tmp', dir], urlLine(good), dir);
  assert.equal(r.status, 1);
  assert.match(r.stderr, new RegExp(`^limit-domains: ${c}:2: expected 7 fields`, 'm'));
  assert.ok(!hasStackTrace(r.stderr));
  assert.equal(r.stdout, failedOutput('limit-domains'));
  assert.deepEqual(fs.readFileSync(c), before);
  const u = runBin(
    'limit-domains',
    ['--max-per-domain', '1', '--carry', 'none', '--carry-out', c, '--now', NOW, '--tmp', dir],
    urlLine({ ...good, id: id(2) }) + urlLine(good),
    dir,
  );
  assert.equal(u.status, 1);
  assert.match(u.stderr, /^limit-domains: -:2: id 0000000000000001 is out of order after 0000000000000002/m);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['carry']);
});

test('usage errors: --max-per-domain 0, a bad --carry-keep, a missing --carry-out', () => {
  for (const [args, msg] of [
    [['--max-per-domain', '0', '--carry', 'c', '--carry-out', 'c'], '--max-per-domain'],
    [['--max-per-domain', '5', '--carry', 'c', '--carry-out', 'c', '--carry-keep', 'soon'], '--carry-keep wants a duration'],
    [['--max-per-domain', '5', '--carry', 'c'], "required option '--carry-out"],
  ] as const) {
    const r = runBin('limit-domains', [...args], '', scratch());
    assert.equal(r.status, 2, r.stderr);
    assert.ok(r.stderr.includes(msg), r.stderr);
  }
});

test('properties over random multi-hour scenarios: no run sends more than N of a domain; once the carry drains, every URL decided was sent, and none that was not', () => {
  const dir = scratch('ms-ld-hours-');
  const hoursArb = fc.array(
    fc.array(
      fc.record({
        n: fc.integer({ min: 1, max: 30 }),
        domain: fc.constantFrom('a.com', 'b.org', 'c.net'),
        hits: fc.nat(20),
        tag: fc.constantFrom('', 'v1', 'v2'),
      }),
      { maxLength: 14 },
    ),
    { minLength: 1, maxLength: 4 },
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 3 }), hoursArb, (cap, hours) => {
      const c = path.join(dir, 'carry');
      fs.rmSync(c, { force: true });
      const decided = new Set<string>();
      const sent: string[] = [];
      // The busy hours, then empty ones until nothing waits.
      for (let h = 0; h < 40; h++) {
        const recs = new Map<string, Url>();
        for (const r of hours[h] ?? []) {
          // A URL keeps its domain: the id is the URL's.
          const u = `http://${r.domain}/${r.n}`;
          recs.set(id(r.n * 4 + ['a.com', 'b.org', 'c.net'].indexOf(r.domain)), {
            id: '',
            ts: hour(h).slice(0, 10) + '3000',
            tag: r.tag,
            hits: String(r.hits),
            domain: r.domain,
            url: u,
          });
        }
        const filtered = [...recs].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([k, r]) => ({ ...r, id: k }));
        for (const r of filtered) decided.add(r.id);
        const got = runBin(
          'limit-domains',
          ['--max-per-domain', String(cap), '--carry', c, '--carry-out', c, '--now', hour(h + 1), '--carry-keep', '10d', '--tmp', dir],
          filtered.map(urlLine).join(''),
          dir,
        );
        assert.equal(got.status, 0, got.stderr);
        const out = got.stdout.split('\n').filter((l) => l);
        const perDomain = new Map<string, number>();
        for (const l of out) perDomain.set(l.split('\t')[4]!, (perDomain.get(l.split('\t')[4]!) ?? 0) + 1);
        assert.ok(
          [...perDomain.values()].every((n) => n <= cap),
          `hour ${h}: ${[...perDomain]}`,
        );
        sent.push(...out.map((l) => l.split('\t')[0]!));
        if (h >= hours.length && fs.readFileSync(c, 'utf8') === '') break;
      }
      assert.equal(fs.readFileSync(c, 'utf8'), '', 'the carry drained');
      assert.deepEqual(new Set(sent), decided);
    }),
    // A representative few in the fast suite, all 12 in npm run test:all.
    { seed: SEED, numRuns: FAST_SUITE ? 3 : 12 },
  );
});

test('stopped by SIGTERM in the middle of a big hour: exit 143, no temporary file (spool, sort runs) left in --tmp, no carry written', async () => {
  const dir = scratch('ms-ld-term-');
  const input = path.join(dir, 'in.tsv');
  const fd = fs.openSync(input, 'w');
  generateFiltered(fd, 400_000);
  fs.closeSync(fd);
  const tmp = fs.mkdtempSync(path.join(dir, 'tmp-'));
  const child = spawn(
    path.join(BIN, 'limit-domains'),
    ['--max-per-domain', '5', '--carry', 'none', '--carry-out', path.join(dir, 'carry'), '--now', NOW, '--memory', '1M', '--tmp', tmp, input],
    { env: testEnv(), stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  // Once the merged records went to a file, the long passes have begun.
  while (!fs.readdirSync(tmp).some((f) => f.startsWith(SPOOL_PREFIX))) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));
  child.kill('SIGTERM');
  const code = await done;
  assert.equal(code, 143, err);
  assert.deepEqual(fs.readdirSync(tmp), [], 'no spool or sort run left');
  assert.ok(!fs.existsSync(path.join(dir, 'carry')));
});
