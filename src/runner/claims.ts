// The runner's side of the claims of hours (core/store/claims.ts). A run claims its hour
// (run name, reflog digest) after its chain and before its COMMIT, and confirms the
// claim after COMMIT, before its first queue file (a roll forward confirms again). An
// hour another master published is committed all the same, without its queue files:
// this master's current_log learns it, nothing is published, and the record says
// published_by. Before an invocation's runs, the hours other masters published after
// this master's last run are named (catch-up).
import type { Logger } from 'pino';
import { DataError, formatPlace, visibleName } from '../core/errors.js';
import { formatDuration } from '../core/time.js';
import { claimHour, confirmClaim, publishedByOthers, type ClaimAnswer, type ClaimRequest, type HourClaimRef } from '../core/store/claims.js';
import { openStore } from '../core/store/open.js';
import { isPgUri, type PartnerStore } from '../core/store/store.js';
import { removePrepared, type CommitHooks, type CommitPlan } from './commit.js';
import { PROG, type RunnerOptions } from './options.js';

/** The options the claims use. */
type ClaimOptions = Pick<RunnerOptions, 'db' | 'dbTimeouts' | 'masterName' | 'claimLeaseMs'>;

/** How often a run asks again while another master holds its hour's claim. */
const POLL_MS = 500;

/** Runs `fn` on the partner store, opened for it and closed after. */
async function withStore<T>(o: ClaimOptions, fn: (s: PartnerStore) => Promise<T>): Promise<T> {
  const store = await openStore(o.db, { timeouts: o.dbTimeouts });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * Asks `ask` until another master no longer holds the claim within its lease, every
 * POLL_MS, for at most twice the lease (the holder's rerun renews it once); then a
 * DataError HOUR_HELD: the next invocation tries again.
 */
async function untilSettled(
  o: ClaimOptions,
  ref: HourClaimRef,
  ask: (r: ClaimRequest) => Promise<ClaimAnswer>,
): Promise<Exclude<ClaimAnswer, { kind: 'held' }>> {
  const until = Date.now() + 2 * o.claimLeaseMs + POLL_MS;
  for (;;) {
    const a = await ask({ run: ref.run, digest: ref.digest, master: ref.master, runId: ref.run_id, nowMs: Date.now(), leaseMs: o.claimLeaseMs });
    if (a.kind !== 'held') return a;
    if (Date.now() >= until) {
      throw new DataError(
        'HOUR_HELD',
        `hour ${ref.run} is claimed by master ${visibleName(a.by)} since ${a.since} and not yet published; tried for ${formatDuration(2 * o.claimLeaseMs)} (twice --claim-lease); the next invocation tries again`,
      );
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
export async function claimRunHour(o: ClaimOptions, log: Logger, ref: HourClaimRef): Promise<string | null> {
  const a = await withStore(o, (s) => untilSettled(o, ref, (r) => claimHour(s, r)));
  return settled(o, log, ref, a, 'claim');
}

/**
 * After a run's COMMIT, before anything of it is published (and at each roll forward):
 * confirms its claim, or, when another master published the hour, turns the plan into
 * one that remembers without publishing (rememberOnly). A plan without a claim (committed
 * remembering only, or by a runner before claims) is left as it is.
 */
export async function settleClaim(o: ClaimOptions, log: Logger, plan: CommitPlan, hooks: CommitHooks): Promise<void> {
  const ref = plan.claim;
  if (ref === undefined) return;
  hooks.beforeStep?.(plan.run, 'confirm');
  let by: string | null;
  try {
    const a = await withStore(o, (s) => untilSettled(o, ref, (r) => confirmClaim(s, r)));
    by = settled(o, log, ref, a, 'confirm');
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
function settled(o: ClaimOptions, log: Logger, ref: HourClaimRef, a: Exclude<ClaimAnswer, { kind: 'held' }>, when: 'claim' | 'confirm'): string | null {
  if (a.kind === 'ours') {
    if (a.takenFrom !== undefined) {
      log.warn(
        { run: ref.run, from: a.takenFrom, lease_ms: o.claimLeaseMs, when },
        'took over the claim of an hour another master did not confirm within --claim-lease',
      );
      process.stderr.write(
        `${PROG}: warning: ${visibleName(ref.run)}: master ${visibleName(a.takenFrom)} claimed this hour and did not publish it within ${formatDuration(o.claimLeaseMs)} (--claim-lease); this master takes it over and publishes it\n`,
      );
    }
    return null;
  }
  log.warn({ run: ref.run, published_by: a.by, their_run_id: a.runId, published_at: a.at }, 'another master published this hour; remembered, not published');
  process.stderr.write(
    `${PROG}: ${visibleName(ref.run)}: master ${visibleName(a.by)} published this hour (at ${a.at}); this master remembers it in current_log and publishes nothing\n`,
  );
  return a.by;
}

/** Turns a plan into one that commits the run's state and publishes no queue file: another master published the hour. */
export function rememberOnly(plan: CommitPlan, by: string): void {
  removePrepared(plan.queueDir, plan.run, plan.queueName);
  const r = plan.record;
  r.not_published = plan.queue.reduce((n, q) => n + q.urls, 0);
  r.published_by = by;
  r.sent = 0;
  r.sent_per_yacobot = {};
  plan.queue = [];
  delete plan.claim;
}

/** The hours (run names) of committed runs among `records` (runs.jsonl lines), the latest last. */
function committedRuns(records: readonly unknown[]): string[] {
  const out: string[] = [];
  for (const x of records) {
    const r = x as { status?: unknown; run?: unknown };
    if (r.status === 'ok' && typeof r.run === 'string') out.push(r.run);
  }
  return out.sort();
}

/**
 * Catch-up: on a shared (PostgreSQL) database, warns of the hours other masters
 * published after this master's last committed run (`past`: runs.jsonl's lines) that
 * are not in this invocation's `runs`: this master's current_log lacks them. Nothing
 * when it cannot tell (no committed run, the database unreachable: the run says so).
 */
export async function warnMissedHours(o: ClaimOptions, log: Logger, past: readonly unknown[], runs: readonly string[]): Promise<void> {
  if (!isPgUri(o.db)) return;
  const last = committedRuns(past).at(-1);
  if (last === undefined) return;
  let rows: { run: string; master: string }[];
  try {
    rows = await withStore(o, (s) => publishedByOthers(s, o.masterName, last));
  } catch (err) {
    log.warn({ error: err instanceof DataError ? formatPlace(err.place, err.message) : String(err) }, 'cannot read the claims of hours for catch-up');
    return;
  }
  const coming = new Set(runs);
  const missed = [...new Set(rows.filter((r) => !coming.has(r.run)).map((r) => r.run))];
  if (missed.length === 0) return;
  const masters = [...new Set(rows.filter((r) => !coming.has(r.run)).map((r) => r.master))].sort();
  const names = missed.length > 20 ? `${missed.slice(0, 20).join(', ')}, ...` : missed.join(', ');
  log.warn(
    { missed: missed.length, runs: missed.slice(0, 100), masters, last_run: last },
    "hours other masters published after this master's last run are not in its memory",
  );
  process.stderr.write(
    `${PROG}: warning: ${missed.length} hour(s) that master ${masters.map(visibleName).join(', ')} published after this master's last run ${visibleName(last)} are not in its current_log: ${names}; ` +
      `to remember them (they are not published again), copy those reflogs from that master's done/ into this inbox (see the failover runbook in docs/two-masters.md)\n`,
  );
}

/**
 * Claims the hour of a run about to commit: sets `plan.claim` when this master is to
 * publish it, or makes the plan remember only (another master published it). Returns
 * the message that fails the run (nothing published, the reflog stays), or null.
 */
export async function claimForCommit(
  o: ClaimOptions,
  log: Logger,
  hooks: CommitHooks,
  plan: CommitPlan,
  runId: string,
  digest: string | null,
): Promise<string | null> {
  if (digest === null) return `${plan.reflog}: its digest, which names the hour in the claims, could not be read`;
  hooks.beforeStep?.(plan.run, 'claim');
  const ref = claimRef(o, plan.run, runId, digest);
  try {
    const by = await claimRunHour(o, log, ref);
    if (by === null) plan.claim = ref;
    else rememberOnly(plan, by);
    return null;
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return formatPlace(err.place, err.message);
  }
}

/**
 * The committed run that sent a URL current_log holds since `timestamp` (the first run,
 * by its now, not before that sighting) when another master published that run's hour:
 * its name and that master; else null. `records`: runs.jsonl's lines.
 */
export function sentByOther(records: readonly unknown[], timestamp: string): { run: string; master: string } | null {
  let first: { now: string; run: string; by: unknown } | null = null;
  for (const x of records) {
    const r = x as { status?: unknown; now?: unknown; run?: unknown; published_by?: unknown };
    if (r.status !== 'ok' || typeof r.now !== 'string' || typeof r.run !== 'string' || r.now < timestamp) continue;
    if (first === null || r.now < first.now) first = { now: r.now, run: r.run, by: r.published_by };
  }
  return first !== null && typeof first.by === 'string' ? { run: first.run, master: first.by } : null;
}
