// reflog-to-yacobot-queue caps: its play of the cap against limit-domains' rule written
// plainly (and, on hours whose URLs are all new, against the stage itself in a real job),
// its counts against analyze-dump | group-sum, its bounded structures, and that it writes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { generateReflog } from '../scripts/gen-reflog.js';
import { DEFAULT_URL_OPTIONS } from '../src/core/reflog.js';
import { formatTimestamp, timestampToMs } from '../src/core/time.js';
import { loadUrlHash } from '../src/core/url.js';
import { DomainTally, IdSet, countReflog } from '../src/runner/views/caps-count.js';
import { CapModel, type CapRun } from '../src/runner/views/caps-model.js';
import type { Caps } from '../src/runner/views/caps-report.js';
import { type Carried, type Url, model } from './lib/carry-model.js';
import { SEED } from './lib/model.js';
import { RUNNER, runBin, scratch, summaryOf, testEnv } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { fresh, keepOnly, runner } from './lib/runner.js';

process.env.TZ = 'UTC';
const H = 3600_000;
const T0 = timestampToMs('20110728050000');

/** Runs `caps ARGS` in `dir`. */
function caps(dir: string, args: string[]) {
  return spawnSync(RUNNER, ['caps', ...args], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 120_000 });
}

/** Per run: what the rule written plainly sends, carries and expires of `hours` (URLs per hour, ids never repeated). */
function plainRuns(hours: { now: string; urls: Url[] }[], cap: number, keepMs: number): Omit<CapRun, 'run'>[] {
  let carry: Carried[] = [];
  return hours.map(({ now, urls }) => {
    const filtered = [...urls].sort((a, b) => (a.id < b.id ? -1 : 1));
    const m = model(filtered, carry, cap, now, keepMs);
    const decided = new Map(carry.map((c) => [c.id, c.decided]));
    const sentIds = m.out.split('\n').filter((l) => l !== '');
    const waits = sentIds.map((l) => decided.get(l.slice(0, 16))).map((d) => (d === undefined ? 0 : timestampToMs(now) - timestampToMs(d)));
    carry = m.carry
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const [id, ts, tag, hits, domain, url, dec] = l.split('\t') as [string, string, string, string, string, string, string];
        return { id, ts, tag, hits, domain, url, decided: dec };
      });
    const oldest = carry.reduce((o, c) => (c.decided < o ? c.decided : o), '99999999999999');
    return {
      sent: sentIds.length,
      carried: carry.length,
      expired: m.expired,
      capped_domains: m.capped.length,
      longest_wait_seconds: Math.max(0, ...waits) / 1000,
      oldest_waiting_seconds: carry.length === 0 ? null : (timestampToMs(now) - timestampToMs(oldest)) / 1000,
    };
  });
}

test("the cap played over counts per domain: run after run, what limit-domains' rule does URL by URL", () => {
  const hourArb = fc.record({ gap: fc.integer({ min: 1, max: 3 }), counts: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 4, maxLength: 4 }) });
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 4 }), fc.array(hourArb, { minLength: 1, maxLength: 10 }), (cap, keepH, spec) => {
      let next = 0;
      let at = T0;
      const hours = spec.map(({ gap, counts }) => {
        at += gap * H;
        const urls: Url[] = [];
        counts.forEach((n, d) => {
          for (let k = 0; k < n; k++, next++) {
            const id = (next * 2654435761 + 17).toString(16).padStart(16, '0');
            urls.push({
              id,
              ts: formatTimestamp(new Date(at - H)),
              tag: '',
              hits: String((next * 7) % 5),
              domain: `d${d}.example`,
              url: `http://d${d}.example/${next}`,
            });
          }
        });
        return { now: formatTimestamp(new Date(at)), urls };
      });
      const want = plainRuns(hours, cap, keepH * H);
      const m = new CapModel(cap, keepH * H);
      const got = hours.map(({ now, urls }) => {
        const counts = new Map<string, number>();
        for (const u of urls) counts.set(u.domain, (counts.get(u.domain) ?? 0) + 1);
        const { run: _, ...r } = m.run(now, timestampToMs(now), urls.length, counts);
        return r;
      });
      assert.deepEqual(got, want);
    }),
    { seed: SEED, numRuns: 200 },
  );
});

test('the set of ids: each id new once; past its size, ids it does not hold count as new every time', () => {
  const ids = new IdSet(1 << 17);
  const id = (n: number) => [Math.imul(n, 0x9e3779b1) >>> 0, Math.imul(n ^ 0x5bd1e995, 0x85ebca6b) >>> 0] as const;
  let fresh = 0;
  for (let n = 0; n < 90_000; n++) if (ids.add(...id(n))) fresh++;
  for (let n = 0; n < 90_000; n++) assert.equal(ids.add(...id(n)), false, `id ${n} again`);
  assert.equal(fresh, 90_000);
  assert.equal(ids.full, false);
  assert.equal(ids.add(0, 0), true);
  assert.equal(ids.add(0, 0), false);
  for (let n = 90_000; n < 100_000; n++) ids.add(...id(n));
  assert.equal(ids.full, true, 'three quarters of 2^17 slots taken');
  assert.equal(ids.add(...id(5)), false, 'an id it holds is still no news');
  assert.equal(ids.add(...id(200_000)), true);
  assert.equal(ids.add(...id(200_000)), true, 'an id it could not take is new every time');
});

test('the domain table: exact within its size; past it, lossy counting keeps the busy domains within its error and its size bounded', () => {
  const busy = ['a.example', 'b.example', 'c.example'];
  const truth = new Map<string, number>();
  const exact = new DomainTally();
  const lossy = new DomainTally(2_000, 1_000);
  let largest = 0;
  let x = 7;
  for (let i = 0; i < 100_000; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const d = x % 10 < 3 ? busy[x % 3]! : x % 10 < 5 ? `m${x % 500}.example` : `flood${i}.example`;
    truth.set(d, (truth.get(d) ?? 0) + 1);
    exact.add(d);
    lossy.add(d);
    largest = Math.max(largest, lossy.size);
  }
  assert.deepEqual(exact.counts(), truth);
  assert.equal(exact.error, 0);
  assert.ok(lossy.error > 0 && lossy.error <= 100, `error ${lossy.error}`);
  assert.ok(largest <= 2_000 + 1_000, `at most ${largest} domains held`);
  const held = lossy.counts();
  for (const [d, n] of truth) {
    const got = held.get(d) ?? 0;
    assert.ok(got <= n && got >= n - lossy.error, `${d}: ${got} of ${n}`);
  }
  for (const d of busy) assert.ok(held.has(d), d);
});

test('an hour counted as analyze-dump | group-sum make it: distinct URLs per domain, lines, rejects (bench and messy hours)', async () => {
  const dir = scratch('ms-caps-count-');
  const hash = await loadUrlHash();
  for (const [name, messy] of [
    ['bench', false],
    ['messy', true],
  ] as const) {
    const file = path.join(dir, `${name}.reflog`);
    const fd = fs.openSync(file, 'w');
    generateReflog(fd, { lines: 20_000, hour: 2, seed: 5, messy });
    fs.closeSync(fd);
    const ad = runBin('analyze-dump', ['--tmp', dir, '--max-reject-ratio', '1'], fs.readFileSync(file), dir);
    assert.equal(ad.status, 0, ad.stderr);
    const gs = runBin('group-sum', [], ad.stdoutBytes, dir);
    assert.equal(gs.status, 0, gs.stderr);
    const want = new Map<string, number>();
    const records = gs.stdout.split('\n').filter((l) => l !== '');
    for (const l of records) want.set(l.split('\t')[4]!, (want.get(l.split('\t')[4]!) ?? 0) + 1);
    const got = countReflog(file, DEFAULT_URL_OPTIONS, hash);
    const s = summaryOf(ad.stderr);
    assert.equal(got.urls, records.length, `${name}: distinct URLs`);
    assert.deepEqual(got.counts, want, `${name}: per domain`);
    assert.equal(got.lines, s.lines_in, `${name}: lines`);
    assert.equal(got.rejected, s.rejected, `${name}: rejects`);
    assert.equal(got.count_error, 0);
  }
});

/** Hour `h` (1-based, 2011-07-28 05:00 on): busy.example 60 + 25h URLs, mid.example 40, ten small ones 5; some lines twice, some spelled otherwise, a bad line. */
function syntheticHour(h: number): string {
  const ts = `20110728${String(4 + h).padStart(2, '0')}1500`;
  const lines = ['reflog-dump v2'];
  const add = (url: string, k: number) => lines.push(`1\t0\t${ts}\t${k}\t${url}\t${(k * 7) % 11}`);
  const domains: [string, number][] = [
    ['busy.example', 60 + 25 * h],
    ['mid.example', 40],
    ...Array.from({ length: 10 }, (_, k) => [`small${k}.example`, 5] as [string, number]),
  ];
  for (const [d, n] of domains) {
    for (let k = 0; k < n; k++) {
      add(`http://${d}/h${h}/p${k}`, k);
      if (k % 4 === 0) add(`http://${d.toUpperCase()}:80/h${h}/./p${k}#again`, k);
    }
  }
  lines.push(`1\t0\tnot-a-time\t0\thttp://busy.example/bad\t1`);
  return lines.join('\n') + '\n';
}

test('caps in a job capped at 30 (carry-keep 2h), three hours and an empty one, whose hours bring only new URLs: its counts and its play of the cap are what the runs did; it writes nothing', async () => {
  const dir = fresh();
  keepOnly(dir);
  for (let h = 1; h <= 3; h++) fs.writeFileSync(path.join(dir, 'var/inbox', `20110728${String(4 + h).padStart(2, '0')}.reflog`), syntheticHour(h));
  for (const r of ['2011072808']) fs.writeFileSync(path.join(dir, 'var/inbox', `${r}.reflog`), 'reflog-dump v2\n');
  const done = await runner(dir, ['--max-per-domain', '30', '--carry-keep', '2h']);
  assert.equal(done.status, 0, done.stderr);
  const records = runsJsonl(dir);
  const before = listing(dir);
  const r = caps(dir, ['--json', '--max-per-domain', '30,1000', '--top', '3']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(listing(dir), before, 'caps changed nothing under var/');
  const c = JSON.parse(r.stdout) as Caps;
  assert.equal(c.carry_keep_ms, 2 * H);
  assert.equal(c.carry_keep_from, 'state');
  assert.deepEqual(
    c.hours.map((h) => h.run),
    records.map((x) => x.run),
  );
  const stage = (x: Record<string, unknown>, s: string, k: string) => (x.stages as Record<string, Record<string, unknown>>)[s]![k];
  c.hours.forEach((h, i) => {
    const x = records[i]!;
    assert.equal(h.urls, stage(x, 'group-sum', 'records_out'), `${h.run}: urls`);
    assert.equal(h.filtered, stage(x, 'filter-url', 'sent'), `${h.run}: filtered`);
    assert.equal(h.lines, stage(x, 'analyze-dump', 'lines_in'), `${h.run}: lines`);
    assert.equal(h.busiest[0]?.urls ?? 0, i < 3 ? 60 + 25 * (i + 1) : 0, `${h.run}: busy.example`);
  });
  assert.deepEqual(
    c.busiest.map((b) => [b.domain, b.peak]),
    [
      ['busy.example', 135],
      ['mid.example', 40],
      ['small0.example', 5],
    ],
  );
  const [at30, at1000] = c.caps;
  assert.deepEqual(
    at30!.runs.map((x) => [x.run, x.sent, x.carried, x.expired, x.capped_domains]),
    records.map((x) => [x.run, x.sent, x.carried_out, x.carry_expired, stage(x, 'limit-domains', 'capped_domains_total')]),
  );
  assert.ok(at30!.runs.some((x) => x.expired > 0) && at30!.runs.some((x) => x.longest_wait_seconds === 3600));
  assert.deepEqual(
    at1000!.runs.map((x) => [x.sent, x.carried, x.expired]),
    c.hours.map((h) => [h.urls, 0, 0]),
  );
  const text = caps(dir, ['--top', '2']);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /^4 hour\(s\) in STATE\/done\/, 2011072805 to 2011072808; carry-keep 2h \(the state's\)$/m);
  assert.match(text.stdout, /^2011072807 +\d+ +\d+ +\d+ +135 +40$/m);
  assert.match(text.stdout, /^--max-per-domain 30, --carry-keep 2h:$/m, "the state's cap");
  assert.match(text.stdout, /^ {2}#1 busy\.example: 135 in its busiest hour$/m);
  const last = JSON.parse(caps(dir, ['--json', '--hours', '2']).stdout) as Caps;
  assert.deepEqual(
    [last.hours.length, last.hours_kept, last.caps[0]!.max_per_domain, last.caps[0]!.runs[0]!.expired],
    [2, 4, 30, 0],
    '--hours 2: the play starts with an empty carry',
  );
  fs.symlinkSync(path.join(dir, 'gone.reflog'), path.join(dir, 'var/state/done/2011072812.reflog'));
  const dangling = caps(dir, ['--json']);
  assert.equal(dangling.status, 0, dangling.stderr);
  assert.deepEqual((JSON.parse(dangling.stdout) as Caps).unreadable, [
    `2011072812: ${dir}/var/state/done/2011072812.reflog: cannot open: ENOENT: no such file or directory`,
  ]);
  fs.rmSync(path.join(dir, 'var/state/done/2011072812.reflog'));
  fs.rmSync(path.join(dir, 'var/state/done/2011072805.reflog'));
  const gone = JSON.parse(caps(dir, ['--json']).stdout) as Caps;
  assert.deepEqual([gone.hours.length, gone.runs_without_reflog], [3, 1]);
  fs.writeFileSync(path.join(dir, 'runner.conf'), 'state = var/state\nmax-per-domain = 1000\n');
  const conf = JSON.parse(caps(dir, ['--config', 'runner.conf', '--json']).stdout) as Caps;
  assert.deepEqual([conf.caps.map((x) => x.max_per_domain), conf.carry_keep_from], [[1000], 'state'], "the config's cap, the state's carry-keep");
  const none = caps(dir, ['--state', 'var/elsewhere']);
  assert.equal(none.status, 1);
  assert.match(none.stdout, /^no reflog in .*var\/elsewhere\/done\/ to count: no run was committed here \(a wrong --state, or no --config\?\)$/m);
  for (const bad of [['--top', '0'], ['--hours', '0'], ['--max-per-domain', '10,x'], ['--carry-keep', 'soon'], ['extra']]) {
    const u = caps(dir, bad);
    assert.equal(u.status, 2, `${bad.join(' ')}: ${u.stderr}`);
    assert.match(u.stderr, /^reflog-to-yacobot-queue caps: /);
  }
});

/** Every file under DIR/var with its size, mtime and bytes. */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (abs: string) => {
    for (const e of fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const f = path.join(abs, e.name);
      const st = fs.lstatSync(f);
      out.push(`${f} ${st.size} ${st.mtimeMs}`);
      if (e.isDirectory()) walk(f);
      else if (e.isFile()) out.push(fs.readFileSync(f, 'latin1'));
    }
  };
  walk(path.join(dir, 'var'));
  return out;
}
