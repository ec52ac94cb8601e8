// The per-domain cap end to end: three busy hours of the bench generator's skewed traffic
// (30,000 lines each: at 6,000 its busiest domain has under 200 URLs an hour, below the cap),
// then six hours whose reflog holds only a header, run by the cron runner uncapped and
// with --max-per-domain 500 --carry-keep 24h. No capped run publishes more than 500 URLs
// of a domain, the carry drains, and both jobs publish the same set of URLs. The figures
// are printed (test diagnostics) so that they can be quoted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { generateReflog } from '../scripts/gen-reflog.js';
import { runsJsonl } from './lib/runner-state.js';
import { fresh, keepOnly, runner } from './lib/runner.js';

const BUSY = [1, 2, 3]; // gen-reflog hours: 2011-07-28 05:00, 06:00, 07:00
const QUIET = ['2011072808', '2011072809', '2011072810', '2011072811', '2011072812', '2011072813'];
const CAP = 500;
const BUSY_LINES = 30_000;

/** A job directory with the nine reflogs in its inbox. */
function job(): string {
  const dir = fresh();
  keepOnly(dir);
  for (const h of BUSY) {
    const fd = fs.openSync(path.join(dir, 'var/inbox', `20110728${String(4 + h).padStart(2, '0')}.reflog`), 'w');
    generateReflog(fd, { lines: BUSY_LINES, hour: h, seed: 1 });
    fs.closeSync(fd);
  }
  for (const r of QUIET) fs.writeFileSync(path.join(dir, 'var/inbox', `${r}.reflog`), 'reflog-dump v2\n');
  return dir;
}

/** Per run (in order): its URLs per domain, from the queue files. */
function publishedPerRun(dir: string): Map<string, Map<string, string[]>> {
  const runs = new Map<string, Map<string, string[]>>();
  const q = path.join(dir, 'var/queue');
  for (const id of fs.readdirSync(q)) {
    for (const f of fs.readdirSync(path.join(q, id))) {
      const byDomain = runs.get(f.replace(/\.tsv$/, '')) ?? new Map<string, string[]>();
      runs.set(f.replace(/\.tsv$/, ''), byDomain);
      for (const line of fs
        .readFileSync(path.join(q, id, f), 'utf8')
        .split('\n')
        .filter((l) => l)) {
        const [, , , , domain, url] = line.split('\t') as [string, string, string, string, string, string];
        if (!byDomain.has(domain)) byDomain.set(domain, []);
        byDomain.get(domain)!.push(url);
      }
    }
  }
  return new Map([...runs].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
}

const busiest = (byDomain: Map<string, string[]> | undefined) => Math.max(0, ...[...(byDomain ?? new Map<string, string[]>()).values()].map((u) => u.length));

test('three busy hours and six header-only hours, uncapped and with --max-per-domain 500 --carry-keep 24h: at most 500 of a domain per run, the carry drained, the same URLs published', async (t) => {
  const [capped, uncapped] = [job(), job()];
  const [c, u] = await Promise.all([runner(capped, ['--max-per-domain', String(CAP), '--carry-keep', '24h']), runner(uncapped)]);
  assert.equal(c.status, 0, c.stderr);
  assert.equal(u.status, 0, u.stderr);
  const lines = runsJsonl(capped);
  assert.equal(lines.length, 9);
  const [pc, pu] = [publishedPerRun(capped), publishedPerRun(uncapped)];
  t.diagnostic('run         uncapped: sent  busiest   capped: sent  busiest  carried_in  carried_out  expired  capped_domains');
  for (const l of lines) {
    const run = l.run as string;
    const uncappedSent = [...(pu.get(run)?.values() ?? [])].reduce((n, x) => n + x.length, 0);
    t.diagnostic(
      `${run}  ${String(uncappedSent).padStart(14)}  ${String(busiest(pu.get(run))).padStart(7)}  ${String(l.sent).padStart(13)}  ${String(busiest(pc.get(run))).padStart(7)}` +
        `  ${String(l.carried_in).padStart(10)}  ${String(l.carried_out).padStart(11)}  ${String(l.carry_expired).padStart(7)}  ${JSON.stringify(l.capped_domains)}`,
    );
  }
  for (const [run, byDomain] of pc) assert.ok(busiest(byDomain) <= CAP, `run ${run}: ${busiest(byDomain)} URLs of one domain`);
  assert.ok(Math.max(...[...pu.values()].map(busiest)) > CAP, 'the uncapped job sends more than 500 of a domain in some run');
  assert.ok(
    lines.some((l) => (l.carried_out as number) > 0),
    'some URLs waited',
  );
  assert.equal(lines.at(-1)!.carried_out, 0, "the last run record's carried_out");
  assert.ok(lines.every((l) => l.carry_expired === 0));
  const urls = (p: Map<string, Map<string, string[]>>) => new Set([...p.values()].flatMap((m) => [...m.values()].flat()));
  const [uc, uu] = [urls(pc), urls(pu)];
  t.diagnostic(
    `distinct URLs published: capped ${uc.size}, uncapped ${uu.size}; queue lines: capped ${lines.reduce((n, l) => n + (l.sent as number), 0)}, uncapped ${runsJsonl(uncapped).reduce((n, l) => n + (l.sent as number), 0)}`,
  );
  assert.deepEqual(uc, uu);
});
