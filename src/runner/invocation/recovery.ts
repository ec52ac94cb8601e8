// Crash recovery at the start of an invocation: what a dead invocation left in STATE/staging/.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { assignedByAttempt } from '../run/attempt.js';
import { type RunJson, readRunJson, writeRunJson } from '../state/attempt.js';
import { settleClaim } from '../commit/claims.js';
import { publish } from '../commit/protocol.js';
import { readCommit } from '../commit/marker.js';
import { removePrepared } from '../commit/queue.js';
import { stagingDir, stateLayout } from '../state/layout.js';
import { runsLog } from '../state/runs-log.js';
import type { Invocation } from './context.js';
import type { RunnerOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { type RunPaths, runPaths } from '../state/layout.js';

/** Crash recovery: finishes committed runs, discards the work of uncommitted ones, and notes those that run again. */
export async function recover(inv: Invocation): Promise<void> {
  const { o, say } = inv;
  for (const name of fs.readdirSync(stateLayout(o.state).staging).sort()) {
    const staging = stagingDir(o.state, name);
    // The runner makes only directories here. Not followed: a dangling symlink would fail
    // every start-up, and one to a directory would have its work/ removed.
    if (!fs.lstatSync(staging).isDirectory()) continue;
    const plan = readCommit(staging);
    if (plan) {
      say.log?.warn({ run: name }, 'found a committed run that was not fully published; rolling forward');
      await settleClaim(o, say, plan, inv.hooks);
      publish(plan, inv.hooks, true);
      continue;
    }
    if (await recoverUncommitted(inv, name, staging)) inv.rerun.add(name);
  }
}

/** Discards the work of an uncommitted run; true if it runs again (its reflog and run.json are there). */
async function recoverUncommitted(inv: Invocation, name: string, staging: string): Promise<boolean> {
  const { o, say } = inv;
  // Not committed: the queue files an attempt killed after copying them beside their
  // place will not be published from there (a rerun copies its own).
  const p = runPaths(o, name);
  const rj = readRunJson(p);
  removePrepared(o.queueDir, name, rj?.queue);
  const over = rj === null ? null : attemptRecorded(o.state, rj);
  if (over !== null) {
    // Killed after its line and before its staging area was removed (a failed run, or a
    // finished one in its cleanup, its COMMIT gone): the run is over, as if the removal
    // had happened. Redone as the same run (a re-sent hour of that name in the inbox), it
    // would count the earlier attempt's new domains a second time, under its run_id.
    say.log?.warn({ run: name, status: over }, `removing the staging area of a run that ${over === 'ok' ? 'finished' : 'failed'} (its line is in runs.jsonl)`);
    fs.rmSync(staging, { recursive: true, force: true });
    fsyncPath(path.dirname(staging));
    return false;
  }
  if (rj !== null) await keepAssignments(p, rj, o, say);
  fs.rmSync(p.work, { recursive: true, force: true });
  if (fs.existsSync(p.reflog) && rj !== null) {
    say.log?.warn({ run: name }, 'found an interrupted run; its partial work was removed and it runs again');
    return true;
  }
  fs.rmSync(staging, { recursive: true, force: true });
  fsyncPath(path.dirname(staging));
  return false;
}

/**
 * The status ('ok' or 'failed') of the last line of runs.jsonl when it is the line of
 * attempt `rj.attempts` of run `rj.run_id`, else null. Called for a staging directory
 * without COMMIT, where an 'ok' line means the run finished (its line is written after
 * COMMIT, which goes only after the reflog left the inbox).
 */
function attemptRecorded(state: string, rj: RunJson): 'ok' | 'failed' | null {
  const last = runsLog(state).last() as { run_id?: unknown; attempt?: unknown; status?: unknown } | null;
  if (last === null || last.run_id !== rj.run_id || last.attempt !== rj.attempts) return null;
  return last.status === 'ok' || last.status === 'failed' ? last.status : null;
}

/**
 * Before a dead attempt's work is removed: adds what its upload-domains committed to
 * run.json, once per attempt. The rerun finds those domains already assigned, so
 * without this its record would not count them as new.
 */
async function keepAssignments(p: RunPaths, rj: RunJson, o: RunnerOptions, say: Say): Promise<void> {
  if (rj.assigned_counted === rj.attempts) return;
  const n = await assignedByAttempt(p, o, say);
  if (n === 0) return;
  rj.assigned_earlier = (rj.assigned_earlier ?? 0) + n;
  rj.assigned_counted = rj.attempts;
  writeRunJson(p, rj);
}
