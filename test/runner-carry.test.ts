// The runner with a per-domain cap (--max-per-domain): limit-domains in the chain only
// then, the carry kept and committed with the state, its settings stored, header-only
// hours that drain it, and every URL the uncapped job publishes published once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from '../src/runner/options/parse.js';
import type { RunnerOptions } from '../src/runner/options/types.js';
import { chainOf } from '../src/runner/run/chain.js';
import { runPaths } from '../src/runner/state/layout.js';
import { runsJsonl } from './lib/runner-state.js';
import { copyOf, fresh, keepOnly, ref, runner, RUNS, sub } from './lib/runner.js';
import { runBin, runRunner } from './lib/run.js';

/** partner-db on the job's database. */
const runRunnerTool = (dir: string, args: string[]) => runBin('partner-db', ['--db', path.join(dir, 'var/state/partner.db'), ...args], '', dir);

const options = (dir: string, ...args: string[]) => parseArgs(['--state', path.join(dir, 'state'), ...args], dir) as RunnerOptions;
const names = (o: RunnerOptions) => chainOf(o, runPaths(o, '2011072806'), '20110728070000').map((s) => s.name);
const SIX = ['analyze-dump', 'group-sum', 'join-current', 'filter-url', 'upload-domains', 'logsaver'];

test('the chain: without a cap, the six stages as always; with one, limit-domains between filter-url and upload-domains; without one while URLs wait, limit-domains sends them all', () => {
  const dir = sub('chain-');
  fs.mkdirSync(path.join(dir, 'state'));
  assert.deepEqual(names(options(dir)), SIX);
  const capped = options(dir, '--max-per-domain', '500', '--carry-keep', '1d');
  assert.deepEqual(names(capped), [...SIX.slice(0, 4), 'limit-domains', ...SIX.slice(4)]);
  const ld = chainOf(capped, runPaths(capped, 'R'), '20110728070000')[4]!.args;
  assert.deepEqual(ld.slice(0, 2), ['--max-per-domain', '500']);
  assert.equal(ld[ld.indexOf('--carry-keep') + 1], '86400');
  // An empty carry is no carry; one that holds URLs is drained by a run without a cap.
  fs.writeFileSync(path.join(dir, 'state/carry'), '');
  assert.deepEqual(names(options(dir)), SIX);
  fs.writeFileSync(path.join(dir, 'state/carry'), '0000000000000001\t20110728050000\t\t1\ta.com\thttp://a.com/\t20110728060000\n');
  const drain = chainOf(options(dir), runPaths(options(dir), 'R'), '20110728070000');
  assert.deepEqual(drain[4]!.args.slice(0, 2), ['--max-per-domain', '2147483648']);
});

/** The queue files' URLs of every run in `dir`, and the most of one domain in one run's files. */
function published(dir: string): { urls: string[]; mostPerDomainRun: number } {
  const urls: string[] = [];
  const perRun = new Map<string, Map<string, number>>();
  const q = path.join(dir, 'var/queue');
  for (const id of fs.existsSync(q) ? fs.readdirSync(q) : []) {
    for (const f of fs.readdirSync(path.join(q, id))) {
      const counts = perRun.get(f) ?? new Map<string, number>();
      perRun.set(f, counts);
      for (const line of fs
        .readFileSync(path.join(q, id, f), 'utf8')
        .split('\n')
        .filter((l) => l)) {
        const [, , , , domain, url] = line.split('\t') as [string, string, string, string, string, string];
        urls.push(url);
        counts.set(domain, (counts.get(domain) ?? 0) + 1);
      }
    }
  }
  const most = Math.max(0, ...[...perRun.values()].flatMap((m) => [...m.values()]));
  return { urls: urls.sort(), mostPerDomainRun: most };
}

/** What status, explain and the metrics file say of the carry a run with --max-per-domain 2 left. */
function seenFromOutside(dir: string, carry: string, prom: string): void {
  const [line] = runsJsonl(dir);
  const waiting = carry
    .split('\n')
    .filter((l) => l)
    .map((l) => l.split('\t'));
  assert.equal(line!.carried_out, waiting.length);
  const oldest = waiting.map((f) => f[6]!).sort()[0]!;
  assert.ok(prom.includes(`master_server_carry_urls ${waiting.length}\n`), prom);
  assert.match(prom, /master_server_carry_oldest_age_seconds \d+/);
  const st = runRunner(dir, ['status', '--json']);
  const s = JSON.parse(st.stdout);
  assert.deepEqual([s.carry.urls, s.carry.oldest_decided, s.carry.capped_domains], [waiting.length, oldest, line!.capped_domains]);
  const text = runRunner(dir, ['status']).stdout;
  assert.match(text, new RegExp(`^carry: ${waiting.length} URLs waiting for a later run, the oldest decided at ${oldest} \\(`, 'm'));
  const [, , , , domain, url] = waiting[0]!;
  const ex = runRunner(dir, ['explain', url!]);
  assert.equal(ex.status, 0, ex.stderr);
  assert.match(ex.stdout, new RegExp(`verdict: carried over since ${line!.run}: ${domain!.replaceAll('.', '\\.')} is over its cap of 2\n`));
}

/** Header-only reflogs for the hours after the fixtures' (09, 10, ...). */
function headerHours(dir: string, n: number): string[] {
  const runs = Array.from({ length: n }, (_, i) => `20110728${String(9 + i).padStart(2, '0')}`);
  for (const r of runs) fs.writeFileSync(path.join(dir, 'var/inbox', `${r}.reflog`), 'reflog-dump v2\n');
  return runs;
}

test("capped: no run publishes more than N URLs of a domain; header-only hours drain the carry; the URLs published are the uncapped job's, none more often; the settings are stored", async () => {
  const dir = fresh();
  headerHours(dir, 5);
  const r = await runner(dir, ['--max-per-domain', '8', '--carry-keep', '24h']);
  assert.equal(r.status, 0, r.stderr);
  const lines = runsJsonl(dir);
  assert.equal(lines.length, RUNS.length + 5);
  assert.ok((lines[0]!.carried_out as number) > 0, 'the first hour carried some over');
  assert.ok(Object.keys(lines[0]!.capped_domains as object).length > 0);
  assert.equal(lines.at(-1)!.carried_out, 0, 'drained');
  assert.equal(fs.readFileSync(path.join(dir, 'var/state/carry'), 'utf8'), '');
  for (const l of lines) assert.deepEqual([l.max_per_domain, l.carry_keep_ms], [8, 86_400_000]);
  const capped = published(dir);
  assert.ok(capped.mostPerDomainRun <= 8, `most of a domain in a run: ${capped.mostPerDomainRun}`);
  const uncapped = published((await ref()).dir);
  assert.ok(uncapped.mostPerDomainRun > 8, 'the uncapped job sends more of some domain in one run');
  assert.deepEqual(new Set(capped.urls), new Set(uncapped.urls));
  // A URL sent again when due goes out again in both jobs; one that waited and was decided
  // again goes out once: never more often than the uncapped job sends it.
  const times = (urls: string[]) => urls.reduce((m, u) => m.set(u, (m.get(u) ?? 0) + 1), new Map<string, number>());
  const inUncapped = times(uncapped.urls);
  for (const [u, n] of times(capped.urls)) assert.ok(n <= inUncapped.get(u)!, `${u}: ${n} times, uncapped ${inUncapped.get(u)}`);
  const settings = JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8'));
  assert.deepEqual([settings.max_per_domain, settings.carry_keep], [8, '1d']);
  // Without the cap (a run by hand without the cron's config), or with another --carry-keep: refused.
  headerHours(dir, 1);
  for (const [args, want] of [
    [[], '--max-per-domain none here, 8 stored'],
    [['--max-per-domain', '8'], '--carry-keep 10h here, 1d stored'],
  ] as const) {
    const x = await runner(dir, [...args]);
    assert.equal(x.status, 2, x.stderr);
    assert.ok(x.stderr.includes(want), x.stderr);
  }
});

test('the carry is state: a failed run leaves it as it was; the cap taken off (accepted) sends what waits, and the next chain is without limit-domains', async () => {
  const dir = fresh();
  keepOnly(dir, RUNS[0]!);
  const prom = path.join(dir, 'job.prom');
  assert.equal((await runner(dir, ['--max-per-domain', '2', '--metrics-file', prom])).status, 0);
  const carry = path.join(dir, 'var/state/carry');
  const before = fs.readFileSync(carry);
  assert.ok(before.length > 0);
  seenFromOutside(dir, before.toString(), fs.readFileSync(prom, 'utf8'));
  const failing = copyOf(dir);
  // Every line rejected: analyze-dump fails the run.
  fs.writeFileSync(
    path.join(failing, 'var/inbox/2011072807.reflog'),
    Array.from({ length: 20 }, (_, i) => `1\t5\t2011072899${i}\t7\thttp://bad.example/${i}\t1\n`).join(''),
  );
  const f = await runner(failing, ['--max-per-domain', '2']);
  assert.equal(f.status, 1, f.stderr);
  assert.deepEqual(fs.readFileSync(path.join(failing, 'var/state/carry')), before);
  headerHours(dir, 2);
  const off = await runner(dir, ['--accept-settings-change']);
  assert.equal(off.status, 0, off.stderr);
  const [, drained, after] = runsJsonl(dir);
  assert.equal(drained!.carried_in, before.toString().split('\n').length - 1);
  assert.equal(drained!.carried_out, 0);
  assert.equal(drained!.sent, drained!.carried_in);
  assert.equal((after!.stages as Record<string, unknown>)['limit-domains'], undefined, 'no limit-domains once nothing waits');
  assert.equal(after!.max_per_domain, undefined);
});

/** INBOX/RUN.reflog: a header, then one line per [timestamp, url, hits, updatetag]. */
function reflog(dir: string, run: string, lines: [string, string, number, string][]): void {
  const body = lines.map(([ts, url, hits, tag], i) => `1000\t0\t${ts}\t${i}\t${url}\t${hits}\t${tag}\n`).join('');
  fs.writeFileSync(path.join(dir, 'var/inbox', `${run}.reflog`), `reflog-dump v2\n${body}`);
}

/** The queue lines of run `run` per Yacobot id: [yacobot, the 6 fields] for each. */
function queueLines(dir: string, run: string): string[][] {
  const q = path.join(dir, 'var/queue');
  return fs.readdirSync(q).flatMap((id) => {
    const f = path.join(q, id, `${run}.tsv`);
    return fs.existsSync(f)
      ? fs
          .readFileSync(f, 'utf8')
          .split('\n')
          .filter((l) => l)
          .map((l) => [id, ...l.split('\t')])
      : [];
  });
}

test('interplay: a waiting URL seen again with a new updatetag goes out once, with the new values, to the owner its domain has by then; URLs that never waited go out as without a cap', async () => {
  const hour = (dir: string) => {
    // 06: a.com has three URLs (cap 2: the least viewed, a.com/2, waits); b.com one.
    reflog(dir, '2011072806', [
      ['20110728060100', 'http://a.com/1', 9, 'v1'],
      ['20110728060200', 'http://a.com/2', 1, 'v1'],
      ['20110728060300', 'http://a.com/3', 5, 'v1'],
      ['20110728060400', 'http://b.com/1', 1, 't'],
    ]);
    // 07: a.com/2 again with a new updatetag; b.com/1 due again (resend-after 1h), b.com/2 new.
    reflog(dir, '2011072807', [
      ['20110728070500', 'http://a.com/2', 4, 'v2'],
      ['20110728070400', 'http://b.com/1', 2, 't'],
      ['20110728070600', 'http://b.com/2', 1, ''],
    ]);
    fs.writeFileSync(path.join(dir, 'var/inbox/2011072808.reflog'), 'reflog-dump v2\n');
  };
  const [capped, uncapped] = [fresh(), fresh()];
  for (const dir of [capped, uncapped]) {
    keepOnly(dir);
    hour(dir);
    fs.renameSync(path.join(dir, 'var/inbox/2011072807.reflog'), path.join(dir, '2011072807.reflog'));
    fs.renameSync(path.join(dir, 'var/inbox/2011072808.reflog'), path.join(dir, '2011072808.reflog'));
  }
  const capArgs = ['--max-per-domain', '2', '--carry-keep', '1d'];
  assert.equal((await runner(capped, capArgs)).status, 0);
  assert.equal((await runner(uncapped)).status, 0);
  // While a.com/2 waits, its domain's Yacobot is disabled: a.com moves to another one.
  const owner = queueLines(capped, '2011072806').find((l) => l[6] === 'http://a.com/1')![0]!;
  for (const dir of [capped, uncapped]) {
    const r = runRunnerTool(dir, ['disable', owner]);
    assert.equal(r.status, 0, r.stderr);
    for (const h of ['2011072807', '2011072808']) fs.renameSync(path.join(dir, `${h}.reflog`), path.join(dir, 'var/inbox', `${h}.reflog`));
  }
  assert.equal((await runner(capped, capArgs)).status, 0);
  assert.equal((await runner(uncapped)).status, 0);
  const all = (dir: string) => ['2011072806', '2011072807', '2011072808'].map((r) => queueLines(dir, r));
  const [c, u] = [all(capped), all(uncapped)];
  const a2 = c.flat().filter((l) => l[6] === 'http://a.com/2');
  assert.equal(a2.length, 1, 'a.com/2 went out once');
  const newOwner = u[1]!.find((l) => l[6] === 'http://a.com/2')![0]!;
  assert.notEqual(newOwner, owner);
  // In run 07, with 07's values (its timestamp, updatetag v2, 07's hits), to a.com's owner by then.
  assert.deepEqual(
    c[1]!.find((l) => l[6] === 'http://a.com/2'),
    [newOwner, a2[0]![1], '20110728070500', 'v2', '4', 'a.com', 'http://a.com/2'],
  );
  assert.equal(u.flat().filter((l) => l[6] === 'http://a.com/2').length, 2, 'the uncapped job sent it in 06 and again in 07 (changed)');
  // b.com never waited: the same lines, run by run, in both jobs.
  const b = (runs: string[][][]) =>
    runs.map((lines) =>
      lines
        .filter((l) => l[5] === 'b.com')
        .map((l) => l.join(' '))
        .sort(),
    );
  assert.deepEqual(b(c), b(u));
  assert.equal(b(c)[1]!.length, 2, 'b.com/1 due again and b.com/2 new in 07');
  assert.equal(runsJsonl(capped).at(-1)!.carried_out, 0);
});
