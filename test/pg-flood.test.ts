// Long honest work still commits at the default settings while a stopped server ends a
// run within 30 s (pg-waits.test.ts): an hour of a million new domains, through the
// runner, on PostgreSQL, with the default time-outs. Every request it sends is small:
// the server's log of statements slower than 200 ms gives the slowest one, which must
// stay far below the client's bound on an answer (--answer-timeout).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { generateReflog } from '../scripts/gen-reflog.js';
import { partnerDb } from './lib/run.js';
import { PgCluster, pgSkipReason } from './lib/pg.js';
import { runsJsonl } from './lib/runner-state.js';
import { fresh, keepOnly, runner } from './lib/runner.js';
import { answerTimeoutMs } from '../src/core/store/pg-waits.js';
import { DEFAULT_TIMEOUTS } from '../src/core/store/store.js';

/** The flood hour's lines: each on a new domain of its own (a few are bad lines, rejected). */
const LINES = Number(process.env.PG_FLOOD_LINES ?? 1_000_000);

/** The durations (ms) of the statements the server logged (log_min_duration_statement). */
function loggedDurations(cluster: PgCluster): { ms: number; text: string }[] {
  const log = fs.readFileSync(path.join(cluster.dir, 'log'), 'utf8');
  return [...log.matchAll(/duration: ([\d.]+) ms {2}(?:statement|execute [^:]*): (.{0,80})/g)].map((m) => ({ ms: Number(m[1]), text: m[2]! }));
}

test(`an hour of ${LINES.toLocaleString('en')} new domains commits on PostgreSQL at the default time-outs, each statement far within --answer-timeout`, {
  skip: pgSkipReason() ?? undefined,
  timeout: 1_800_000,
}, async (t) => {
  const cluster = await PgCluster.start();
  try {
    cluster.psql('postgres', 'ALTER SYSTEM SET log_min_duration_statement = 200; SELECT pg_reload_conf();');
    const dir = fresh();
    keepOnly(dir);
    const uri = cluster.newDatabase();
    partnerDb(dir, uri, 'init');
    for (const [name, w] of [
      ['alpha', '1'],
      ['beta', '1'],
      ['gamma', '2'],
    ] as const)
      partnerDb(dir, uri, 'add', name, '--weight', w);
    const fd = fs.openSync(path.join(dir, 'var/inbox/2011072807.reflog'), 'w');
    generateReflog(fd, { lines: LINES, hour: 3, seed: 1, flood: true });
    fs.closeSync(fd);

    const r = await runner(dir, ['--db', uri, '--log-level', 'warn']);
    assert.equal(r.status, 0, r.stderr);
    const rec = runsJsonl(dir).at(-1)!;
    const slow = loggedDurations(cluster).sort((a, b) => b.ms - a.ms); // before this test's own statements
    const owned = Number(cluster.psql(PgCluster.dbName(uri), 'SELECT count(*) FROM partner_domain').trim());
    assert.ok(owned > LINES * 0.9, `${owned} domains owned`);
    assert.equal(Number(rec.new_domains), owned, 'every domain owned was assigned by this run');
    const upload = (rec.stages as Record<string, { ms?: number }>)['upload-domains']?.ms ?? NaN;
    t.diagnostic(`run ${(r.ms / 1000).toFixed(1)} s, upload-domains ${(upload / 1000).toFixed(1)} s, ${owned} new domains`);
    t.diagnostic(
      `statements over 200 ms: ${slow.length}; slowest ${
        slow
          .slice(0, 3)
          .map((s) => `${s.ms.toFixed(0)} ms (${s.text})`)
          .join('; ') || 'none'
      }`,
    );
    const slowest = slow[0]?.ms ?? 0;
    assert.ok(slowest < answerTimeoutMs(DEFAULT_TIMEOUTS) / 4, `the slowest statement took ${slowest} ms`);
  } finally {
    cluster.remove();
  }
});
