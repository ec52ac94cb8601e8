// The claims of hours on SQLite: whose a claim is (a state's, by its identity), the fence
// of a copied state, and the pieces of the runner's side that need no second master. The
// two-master cases, on PostgreSQL, are in two-masters-claims.test.ts and
// two-masters-fence.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deliver, newJob, runJob } from './lib/job.js';
import { RUNNER, testEnv } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { claimHour, claimsOfRun, confirmClaim, type ClaimRequest } from '../src/core/store/claims.js';
import { openStore } from '../src/core/store/open.js';
import { moveIncarnation, type StateRef } from '../src/core/store/states.js';
import type { PartnerStore } from '../src/core/store/store.js';
import { sentByOther } from '../src/runner/state/run-history.js';

/** A claim request of run 2011072806 by `master` with state `state`, run id `runId`, at `nowMs`. */
function req(master: string, runId: string, state: StateRef, nowMs = Date.parse('2026-01-01T00:00:00Z')): ClaimRequest {
  return { run: '2011072806', digest: 'ab'.repeat(32), master, runId, nowMs, leaseMs: 120_000, state };
}

/** A state's identity moved to a first incarnation in `store`: what its claims present. */
async function registered(store: PartnerStore, id: string, master = 'm'): Promise<StateRef> {
  const token = `${id}-1`;
  assert.deepEqual(await moveIncarnation(store, { id, token: null, next: token, master, place: `host:/${id}`, nowMs: 0 }), { kind: 'current' });
  return { id, token };
}

test("a committed run on SQLite claims and confirms its hour: the run name, the reflog's SHA-256, --master-name, its run id, its state's identity", async () => {
  const dir = newJob('ms-claims-sqlite-');
  deliver(dir, '2011072806');
  const digest = createHash('sha256')
    .update(fs.readFileSync(path.join(dir, 'var/inbox/2011072806.reflog')))
    .digest('hex');
  assert.equal(runJob(dir, ['--master-name', 'm1']).status, 0);
  const rec = runsJsonl(dir).at(-1) as { run_id: string; master?: string; state_id?: string; published_by?: string; sent: number };
  const identity = JSON.parse(fs.readFileSync(path.join(dir, 'var/state/identity.json'), 'utf8')) as { id: string; token?: string; next?: string };
  assert.match(identity.id, /^[0-9a-f]{32}$/);
  assert.match(identity.token ?? '', /^[0-9a-f]{32}$/, 'the incarnation it moved to');
  assert.equal(identity.next, undefined, 'no move left half done');
  assert.equal(rec.master, 'm1');
  assert.equal(rec.state_id, identity.id);
  assert.equal(rec.published_by, undefined);
  assert.ok(rec.sent > 0);
  const store = await openStore(path.join(dir, 'var/state/partner.db'), { readonly: true });
  try {
    const rows = await claimsOfRun(store, '2011072806');
    assert.equal(rows.length, 1);
    assert.deepEqual([rows[0]!.digest, rows[0]!.master, rows[0]!.run_id, rows[0]!.state_id], [digest, 'm1', rec.run_id, identity.id]);
    assert.ok(rows[0]!.published_at !== null, 'confirmed');
  } finally {
    await store.close();
  }
});

test("a claim is a state's own, not a name's: two states of one name on one SQLite database, the second waits and remembers; a claim made before identities is any name's", async () => {
  const dir = newJob('ms-claims-sqlite-states-');
  const store = await openStore(path.join(dir, 'var/state/partner.db'));
  try {
    const a = await registered(store, 'sa');
    const b = await registered(store, 'sb');
    assert.deepEqual(await claimHour(store, req('m', 'r1', a)), { kind: 'ours' });
    assert.deepEqual(await claimHour(store, req('m', 'r2', b)), { kind: 'held', by: 'm', since: '2026-01-01T00:00:00.000Z' });
    assert.deepEqual(await confirmClaim(store, req('m', 'r1', a)), { kind: 'ours' });
    const published = await claimHour(store, req('m', 'r2', b));
    assert.deepEqual(published.kind === 'published' && [published.by, published.byState, published.runId], ['m', 'sa', 'r1']);
    const rows = await claimsOfRun(store, '2011072806');
    assert.deepEqual(
      rows.map((r) => [r.master, r.state_id, r.run_id, r.published_at !== null]),
      [['m', 'sa', 'r1', true]],
      "the first state's claim, untouched",
    );
    // A claim made before schema version 4 (no state): on SQLite, one master's database then, it is this master's whatever its name.
    await store.write((q) => q.run("UPDATE hour_claim SET state_id = NULL, master = 'old-host'"));
    assert.deepEqual(await claimHour(store, req('m', 'r3', b)), { kind: 'ours' });
    assert.deepEqual(
      (await claimsOfRun(store, '2011072806')).map((r) => [r.master, r.state_id, r.published_at]),
      [['m', 'sb', null]],
    );
  } finally {
    await store.close();
  }
});

test('a copy of a state is fenced: the copy that moves its identity second claims, confirms and takes over nothing, and learns who published', async () => {
  const dir = newJob('ms-claims-fence-');
  const store = await openStore(path.join(dir, 'var/state/partner.db'));
  try {
    const s0 = await registered(store, 'st');
    // Two copies of the state, each holding token st-1: the first to move wins.
    const move = (next: string) => moveIncarnation(store, { id: 'st', token: s0.token, next, master: 'm', place: `host:/${next}`, nowMs: 1000 });
    assert.deepEqual(await move('st-a'), { kind: 'current' });
    assert.deepEqual(await move('st-a'), { kind: 'current' }, 'the same move again (its state did not learn it): still current');
    const fenced = await move('st-b');
    assert.deepEqual(fenced.kind === 'fenced' && [fenced.holder.token, fenced.holder.place], ['st-a', 'host:/st-a']);
    const a: StateRef = { id: 'st', token: 'st-a' };
    const b: StateRef = { id: 'st', token: s0.token };
    assert.deepEqual(await claimHour(store, req('m', 'rb', b)), { kind: 'fenced' }, 'a free hour: fenced, not claimed');
    assert.deepEqual(await claimsOfRun(store, '2011072806'), []);
    assert.deepEqual(await claimHour(store, req('m', 'ra', a)), { kind: 'ours' });
    assert.deepEqual(await claimHour(store, req('m', 'rb', b, Date.parse('2026-01-02T00:00:00Z'))), { kind: 'fenced' }, 'past the lease: not taken over');
    assert.deepEqual(await confirmClaim(store, req('m', 'rb', b)), { kind: 'fenced' });
    assert.deepEqual(await confirmClaim(store, req('m', 'ra', a)), { kind: 'ours' });
    const seen = await confirmClaim(store, req('m', 'rb', b));
    assert.deepEqual(seen.kind === 'published' && [seen.by, seen.byState, seen.runId], ['m', 'st', 'ra']);
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

test('new-identity: refused while a committed run awaits its claim under an identity the state holds; then a new identity; a damaged identity.json stops the runner, naming the way out', () => {
  const dir = newJob('ms-claims-new-identity-');
  deliver(dir, '2011072806');
  const env = testEnv({ REFLOG_RUNNER_FAILPOINT: '2011072806:confirm' });
  const killed = spawnSync(RUNNER, ['--log-level', 'silent'], { cwd: dir, env, encoding: 'utf8' });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  const file = path.join(dir, 'var/state/identity.json');
  const before = fs.readFileSync(file, 'utf8');
  const newIdentity = () => spawnSync(RUNNER, ['new-identity'], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  const refused = newIdentity();
  assert.equal(refused.status, 1, refused.stderr);
  assert.match(
    refused.stderr,
    /^reflog-to-yacobot-queue new-identity: \S+identity\.json: run 2011072806 is committed and its publish awaits its claim under this state's identity, which this state still holds \(it is not fenced\): run reflog-to-yacobot-queue first, then give it a new identity; nothing changed\n$/,
  );
  assert.equal(fs.readFileSync(file, 'utf8'), before, 'nothing changed');
  assert.equal(runJob(dir).status, 0, 'the roll forward publishes the run');
  const old = (JSON.parse(before) as { id: string }).id;
  const renewed = newIdentity();
  assert.equal(renewed.status, 0, renewed.stderr);
  assert.match(
    renewed.stdout,
    new RegExp(`identity\\.json: new identity ([0-9a-f]{32}) \\(was ${old}\\): this state is a master of its own from its next invocation on`),
  );
  assert.notEqual((JSON.parse(fs.readFileSync(file, 'utf8')) as { id: string }).id, old);
  fs.writeFileSync(file, '{"id": "not hex"}\n');
  deliver(dir, '2011072807');
  const damaged = runJob(dir);
  assert.equal(damaged.status, 1, damaged.stderr);
  assert.match(
    damaged.stderr,
    /identity\.json: damaged: it holds this state's identity, which names its claims of hours in the partner database; restore it from a backup, or give the state a new identity \(reflog-to-yacobot-queue new-identity\); nothing was run\n/,
  );
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072807.reflog')), 'the reflog stays');
  assert.equal(newIdentity().status, 0);
  assert.equal(runJob(dir).status, 0);
});
