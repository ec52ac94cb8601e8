// The claims of hours on SQLite (one master: its claims always win) and the pieces of
// the runner's side that need no second master. The two-master cases, on PostgreSQL,
// are in two-masters-claims.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deliver, newJob, runJob } from './lib/job.js';
import { runsJsonl } from './lib/runner-state.js';
import { claimHour, claimsOfRun, confirmClaim, type ClaimRequest } from '../src/core/store/claims.js';
import { openStore } from '../src/core/store/open.js';
import { sentByOther } from '../src/runner/claims.js';

/** A claim request of run 2011072806 by `master`, run id `runId`, at `nowMs`. */
function req(master: string, runId: string, nowMs = Date.parse('2026-01-01T00:00:00Z')): ClaimRequest {
  return { run: '2011072806', digest: 'ab'.repeat(32), master, runId, nowMs, leaseMs: 120_000 };
}

test("a committed run on SQLite claims and confirms its hour: the run name, the reflog's SHA-256, --master-name, its run id", async () => {
  const dir = newJob('ms-claims-sqlite-');
  deliver(dir, '2011072806');
  const digest = createHash('sha256')
    .update(fs.readFileSync(path.join(dir, 'var/inbox/2011072806.reflog')))
    .digest('hex');
  assert.equal(runJob(dir, ['--master-name', 'm1']).status, 0);
  const rec = runsJsonl(dir).at(-1) as { run_id: string; master?: string; published_by?: string; sent: number };
  assert.equal(rec.master, 'm1');
  assert.equal(rec.published_by, undefined);
  assert.ok(rec.sent > 0);
  const store = await openStore(path.join(dir, 'var/state/partner.db'), { readonly: true });
  try {
    const rows = await claimsOfRun(store, '2011072806');
    assert.equal(rows.length, 1);
    assert.deepEqual([rows[0]!.digest, rows[0]!.master, rows[0]!.run_id], [digest, 'm1', rec.run_id]);
    assert.ok(rows[0]!.published_at !== null, 'confirmed');
  } finally {
    await store.close();
  }
});

test("on SQLite every claim is this master's: another name claims and confirms an hour held or confirmed by another", async () => {
  const dir = newJob('ms-claims-sqlite-wins-');
  const store = await openStore(path.join(dir, 'var/state/partner.db'));
  try {
    assert.deepEqual(await claimHour(store, req('a', 'r1')), { kind: 'ours' });
    assert.deepEqual(await claimHour(store, req('b', 'r2')), { kind: 'ours' });
    assert.deepEqual(await confirmClaim(store, req('a', 'r1')), { kind: 'ours' });
    assert.deepEqual(await claimHour(store, req('b', 'r2')), { kind: 'ours' });
    const rows = await claimsOfRun(store, '2011072806');
    assert.deepEqual(
      rows.map((r) => [r.master, r.run_id, r.published_at]),
      [['b', 'r2', null]],
      "one row per hour and reflog, the last claimer's",
    );
  } finally {
    await store.close();
  }
});

test('sentByOther: the first committed run, by its now, not before the sighting; named only when another master published it', () => {
  const records = [
    { status: 'ok', run: 'h1', now: '20110728060000' },
    { status: 'ok', run: 'h2', now: '20110728070000', published_by: 'B' },
    { status: 'failed', run: 'h3', now: '20110728080000', published_by: 'C' },
    { status: 'ok', run: 'h3', now: '20110728080000' },
  ];
  assert.deepEqual(sentByOther(records, '20110728063000'), { run: 'h2', master: 'B' });
  assert.deepEqual(sentByOther(records, '20110728070000'), { run: 'h2', master: 'B' });
  assert.equal(sentByOther(records, '20110728055959'), null, 'sent by this master in h1');
  assert.equal(sentByOther(records, '20110728073000'), null, "h3 was this master's");
});
