// Whether the job is healthy: the one verdict that status and the metrics file both give.
// Beside how the last invocation ended, it looks at what is there now: a lock held past
// --max-run-time (stuck), and a run a killed invocation left in STATE/staging/.
import * as fs from 'node:fs';
import { formatDuration } from '../../core/time.js';
import { fencedText } from '../state/identity.js';
import type { Fenced, LastInvocation, LastSuccess } from '../state/last-invocation.js';
import { stagingDir, stagingLayout, stateLayout } from '../state/layout.js';
import type { LockState } from '../state/lock.js';

/** --max-run-time's default: a run that has not finished within it is stuck. */
export const DEFAULT_MAX_RUN_MS = 50 * 60_000;

/** A run a dead invocation left in STATE/staging/: committed (COMMIT there: rolled forward next) or not (run again). */
export interface Interrupted {
  run: string;
  committed: boolean;
}

/** What the verdict is made of. */
export interface HealthInput {
  last: LastInvocation | null;
  success: LastSuccess | null;
  lock: LockState;
  interrupted: Interrupted[];
  maxAgeMs: number | null;
  maxRunMs: number;
  now: number;
  /** Why the state holds no trace of this job (views/no-state.ts), when it holds none. */
  noState?: string | null;
  /** The state is a copy that another copy outran (last-invocation.ts fencedNow), or null. */
  fenced: Fenced | null;
}

/** The --max-run-time of options `o` (once the runner has that option), else its default. */
export function maxRunTimeOf(o: object): number {
  const ms = (o as { maxRunTimeMs?: unknown }).maxRunTimeMs;
  return typeof ms === 'number' && ms > 0 ? ms : DEFAULT_MAX_RUN_MS;
}

/** The runs left in `state`/staging/ (a directory with run.json or COMMIT), by name. */
export function interruptedRuns(state: string): Interrupted[] {
  const dir = stateLayout(state).staging;
  let names: string[];
  try {
    names = fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: Interrupted[] = [];
  for (const run of names) {
    const staged = stagingLayout(stagingDir(state, run));
    if (fs.existsSync(staged.commit)) out.push({ run, committed: true });
    else if (fs.existsSync(staged.runJson)) out.push({ run, committed: false });
  }
  return out;
}

/** How long the lock's holder has held it (ms, from the lock file's start time), or null when it is free or says no time. */
export function lockAgeMs(lock: LockState, now: number): number | null {
  if (!lock.held || lock.since === null) return null;
  const t = Date.parse(lock.since);
  return Number.isNaN(t) ? null : Math.max(0, now - t);
}

/** Whether the lock is held past --max-run-time. */
export function isStuck(h: Pick<HealthInput, 'lock' | 'maxRunMs' | 'now'>): boolean {
  const age = lockAgeMs(h.lock, h.now);
  return age !== null && age > h.maxRunMs;
}

/** Why the job is not healthy, or null when it is. */
export function unhealthy(h: HealthInput): string | null {
  return deadHolderVerdict(h) ?? stuckVerdict(h) ?? interruptedVerdict(h) ?? fencedVerdict(h) ?? lastVerdict(h) ?? ageVerdict(h);
}

// The chain's stages by their programs' names (run/chain.ts runs them): what a runner killed alone leaves holding its lock.
const STAGES = new Set(['analyze-dump', 'group-sum', 'join-current', 'filter-url', 'limit-domains', 'upload-domains', 'logsaver']);

/**
 * A lock held on by the stages of a runner that died (a kill -9 of the runner alone):
 * what still runs, and what to do. Not so of a lock some other process holds (a flock
 * by hand, a runner that has just taken it and not yet written its pid).
 */
function deadHolderVerdict(h: HealthInput): string | null {
  const l = h.lock;
  // Their bash and tee end with them.
  const stages = (l.left ?? []).filter((p) => STAGES.has(p.name));
  if (!l.held || l.holder_alive !== false || stages.length === 0) return null;
  const run = h.interrupted[0]?.run;
  return (
    `the runner (process ${l.pid}) has ended (killed?), and the stages it started still run and hold the lock: ` +
    `${stages.map((p) => `${p.pid} ${p.name}`).join(', ')}. Nothing of ${run === undefined ? 'its run' : `run ${run}`} was published, ` +
    `and nothing of it will be: stop them (\`kill ${stages.map((p) => p.pid).join(' ')}\`) or let them end; the next invocation then runs the hour again`
  );
}

/** A lock held past --max-run-time, with its holder and age. */
function stuckVerdict(h: HealthInput): string | null {
  if (!isStuck(h)) return null;
  const { pid, host, since } = h.lock;
  return (
    `stuck: process ${pid ?? '?'}${host ? ` on ${host}` : ''} has held the lock for ${formatDuration(lockAgeMs(h.lock, h.now)!)} (since ${since}), ` +
    `more than --max-run-time ${formatDuration(h.maxRunMs)}`
  );
}

/** A run left in staging/ by an invocation that is gone (a live one's own runs are there while the lock is held). */
function interruptedVerdict(h: HealthInput): string | null {
  const first = h.interrupted[0];
  if (h.lock.held || first === undefined) return null;
  const more = h.interrupted.length > 1 ? ` (and ${h.interrupted.length - 1} more)` : '';
  return first.committed
    ? `run ${first.run}${more} is committed but not fully published (its invocation was killed, or a publish step failed): the next invocation finishes it`
    : `run ${first.run}${more} was interrupted: its invocation was killed or stopped before its commit, nothing of it was published; the next invocation runs it again`;
}

/** A state that publishes nothing, being a copy another copy outran: healthy as its invocations may end, it needs an operator. */
function fencedVerdict(h: HealthInput): string | null {
  return h.fenced ? fencedText(h.fenced.identity, h.fenced) : null;
}

/** How the last invocation ended: an exit 75 beside a holder still running (not stuck) is healthy. */
function lastVerdict(h: HealthInput): string | null {
  const last = h.last;
  if (last === null && h.noState) return `no invocation recorded: ${h.noState}`;
  if (last === null) return 'no invocation recorded yet (STATE/last-invocation.json is missing or unreadable)';
  if (last.exit === 75) {
    return h.lock.held ? null : 'the last invocation found the lock held (exit 75), and its holder has ended since without recording how (killed?)';
  }
  if (!last.success) return `the last invocation ended with exit ${last.exit} (${last.result})`;
  if (last.metrics_error) return `the metrics file cannot be written: ${last.metrics_error}`;
  return null;
}

/** With --max-age: no committed run, or the last one too old. */
function ageVerdict(h: HealthInput): string | null {
  if (h.maxAgeMs === null) return null;
  if (h.success === null) return 'no run was ever committed';
  const age = h.now - Date.parse(h.success.at);
  return age > h.maxAgeMs ? `the last committed run is ${formatDuration(age)} old, more than --max-age ${formatDuration(h.maxAgeMs)}` : null;
}
