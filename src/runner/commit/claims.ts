// The runner's side of the claims of hours (core/store/claims.ts). A run claims its hour
// (run name, reflog digest) after its chain and before its COMMIT, and confirms the
// claim after COMMIT, before its first queue file (a roll forward confirms again). An
// hour another master published is committed all the same, without its queue files:
// this master's current_log learns it, nothing is published, and the record says
// published_by. (The catch-up of the hours other masters published: invocation/catch-up.ts.)
import { DataError, formatPlace, visibleName } from '../../core/errors.js';
import { claimHour, confirmClaim, type ClaimAnswer, type ClaimRequest, type HourClaimRef } from '../../core/store/claims.js';
import { withStore } from '../../core/store/open.js';
import { formatDuration } from '../../core/time.js';
import type { ClaimOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { fencedText, readIdentity } from '../state/identity.js';
import { type Fence, stateFence } from './fence.js';
import type { CommitHooks } from './hooks.js';
import type { CommitPlan } from './marker.js';
import { removePrepared } from './queue.js';

/** How often a run asks again while another master holds its hour's claim. */
const POLL_MS = 500;

/** The master that published an hour this one remembers: its name, and its state's identity (null before schema version 4). */
export interface Publisher {
  by: string;
  byState: string | null;
}

type Settled = Extract<ClaimAnswer, { kind: 'ours' | 'published' }>;

/**
 * Asks `ask` until another master no longer holds the claim within its lease (or, for a
 * fenced state, until another confirms the hour), every POLL_MS, for at most twice the
 * lease (the holder's rerun renews it once); then a DataError HOUR_HELD or STATE_FENCED:
 * the next invocation tries again.
 */
async function untilSettled(o: ClaimOptions, f: Fence, ref: HourClaimRef, ask: (r: ClaimRequest) => Promise<ClaimAnswer>): Promise<Settled> {
  const until = Date.now() + 2 * o.claimLeaseMs + POLL_MS;
  const tried = `tried for ${formatDuration(2 * o.claimLeaseMs)} (twice --claim-lease); the next invocation tries again`;
  for (;;) {
    const a = await ask({
      run: ref.run,
      digest: ref.digest,
      master: ref.master,
      runId: ref.run_id,
      nowMs: Date.now(),
      leaseMs: o.claimLeaseMs,
      state: f.state,
    });
    if (a.kind === 'ours' || a.kind === 'published') return a;
    if (Date.now() >= until) {
      if (a.kind === 'fenced') {
        const why = f.fencedBy === null ? 'another copy of this state moved its identity during this invocation' : fencedText(f.state.id, f.fencedBy);
        throw new DataError('STATE_FENCED', `hour ${ref.run} is published by no master, and this state may not publish it: ${why}; ${tried}`);
      }
      const twin = a.by === o.masterName ? ` (another master of this master's name: give each master its own --master-name)` : '';
      throw new DataError('HOUR_HELD', `hour ${ref.run} is claimed by master ${visibleName(a.by)}${twin} since ${a.since} and not yet published; ${tried}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** What a claim of this run's hour names: the run, the reflog's digest, this master and the run's id. */
export function claimRef(o: ClaimOptions, run: string, runId: string, digest: string): HourClaimRef {
  return { run, digest, master: o.masterName, run_id: runId };
}

/**
 * Before a run's COMMIT: claims its hour. Returns null when this master is to publish
 * it, else the master that published it. Waits while another master holds the claim
 * within its lease; a DataError when it still does, or the database cannot be reached.
 */
export async function claimRunHour(o: ClaimOptions, say: Say, ref: HourClaimRef): Promise<Publisher | null> {
  const f = await stateFence(o, say);
  const a = await withStore(o, (s) => untilSettled(o, f, ref, (r) => claimHour(s, r)));
  return settled(o, say, f, ref, a, 'claim');
}

/**
 * After a run's COMMIT, before anything of it is published (and at each roll forward):
 * confirms its claim, or, when another master published the hour, turns the plan into
 * one that remembers without publishing (rememberOnly). A plan without a claim (committed
 * remembering only, or by a runner before claims) is left as it is.
 */
export async function settleClaim(o: ClaimOptions, say: Say, plan: CommitPlan, hooks: CommitHooks): Promise<void> {
  const ref = plan.claim;
  if (ref === undefined) return;
  hooks.beforeStep?.(plan.run, 'confirm');
  let by: Publisher | null;
  try {
    const f = await stateFence(o, say);
    const a = await withStore(o, (s) => untilSettled(o, f, ref, (r) => confirmClaim(s, r)));
    by = settled(o, say, f, ref, a, 'confirm');
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    throw new DataError(
      err.code,
      `${err.message}; run ${plan.run} is committed, nothing of it is lost: its publish waits for its claim to be confirmed, which the next invocation does`,
      err.place,
    );
  }
  if (by !== null) rememberOnly(plan, by);
}

/** Says what a settled claim means for the run; returns the master that published the hour, or null for this one. */
function settled(o: ClaimOptions, say: Say, f: Fence, ref: HourClaimRef, a: Settled, when: 'claim' | 'confirm'): Publisher | null {
  if (a.kind === 'ours') {
    if (a.takenFrom !== undefined) {
      say.warn(
        `${visibleName(ref.run)}: master ${visibleName(a.takenFrom)} claimed this hour and did not publish it within ${formatDuration(o.claimLeaseMs)} (--claim-lease); this master takes it over and publishes it`,
        {
          fields: { run: ref.run, from: a.takenFrom, lease_ms: o.claimLeaseMs, when },
          msg: 'took over the claim of an hour another master did not confirm within --claim-lease',
        },
      );
    }
    return null;
  }
  say.tell(
    `${visibleName(ref.run)}: master ${visibleName(a.by)} published this hour (at ${a.at})${whoElse(o, f, a)}; this master remembers it in current_log and publishes nothing`,
    {
      level: 'warn',
      fields: { run: ref.run, published_by: a.by, published_by_state: a.byState, their_run_id: a.runId, published_at: a.at },
      msg: 'another master published this hour; remembered, not published',
    },
  );
  return { by: a.by, byState: a.byState };
}

/** What the message says of a publisher that bears this master's name, or this state's identity: another master of the name, or a copy. */
function whoElse(o: ClaimOptions, f: Fence, a: Extract<ClaimAnswer, { kind: 'published' }>): string {
  if (a.byState === f.state.id) return ': a copy of this state (the same identity), which holds the identity now';
  if (a.by !== o.masterName) return '';
  const theirs = a.byState === null ? 'a claim made before state identities' : `state ${a.byState.slice(0, 8)}`;
  return `: not this state (${theirs}; this one is ${f.state.id.slice(0, 8)}): another master uses the same name ${visibleName(a.by)}; give each master its own --master-name`;
}

/** Turns a plan into one that commits the run's state and publishes no queue file: another master published the hour. */
export function rememberOnly(plan: CommitPlan, p: Publisher): void {
  removePrepared(plan.queueDir, plan.run, plan.queueName);
  const r = plan.record;
  r.not_published = plan.queue.reduce((n, q) => n + q.urls, 0);
  r.published_by = p.by;
  if (p.byState !== null) r.published_by_state = p.byState;
  r.sent = 0;
  r.sent_per_yacobot = {};
  plan.queue = [];
  delete plan.claim;
}

/**
 * Claims the hour of a run about to commit: sets `plan.claim` when this master is to
 * publish it, or makes the plan remember only (another master published it). Returns
 * the message that fails the run (nothing published, the reflog stays), or null.
 */
export async function claimForCommit(
  o: ClaimOptions,
  say: Say,
  hooks: CommitHooks,
  plan: CommitPlan,
  runId: string,
  digest: string | null,
): Promise<string | null> {
  if (digest === null) return `${plan.reflog}: its digest, which names the hour in the claims, could not be read`;
  hooks.beforeStep?.(plan.run, 'claim');
  const ref = claimRef(o, plan.run, runId, digest);
  const id = readIdentity(o.state)?.id;
  if (id !== undefined) plan.record.state_id = id;
  try {
    const by = await claimRunHour(o, say, ref);
    if (by === null) plan.claim = ref;
    else rememberOnly(plan, by);
    return null;
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return formatPlace(err.place, err.message);
  }
}
