// Steps 2-4, 6 and 7 of the commit: the state the run leaves (current_log, the carry,
// the settings, the memory record, the rejects), its runs.jsonl line, and the end of its
// staging area.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { mkdirDurable, removeDurable, statQuiet, writeFileDurable } from '../../core/durable.js';
import { ioError } from '../../core/errors.js';
import { failedRejects, keptRejects, stagingLayout, stateLayout } from '../state/layout.js';
import { countBacklog } from '../state/queue-dir.js';
import type { RunRecord } from '../state/run-record.js';
import { runsLog } from '../state/runs-log.js';
import { settingsText } from '../state/settings.js';
import type { CommitHooks, Step } from './hooks.js';
import type { CommitPlan } from './marker.js';

/** Step current_log: replaces STATE/current_log with the staged one, then the backup with its staged copy. */
export function currentLogStep(plan: CommitPlan): Step {
  const L = stateLayout(plan.state);
  const S = stagingLayout(plan.staging);
  return {
    name: 'current_log',
    run() {
      moveIntoPlace(S.currentNext, L.currentLog);
      if (plan.memory !== undefined) moveIntoPlace(S.currentLast, L.currentLogLast);
      else keepLink(L.currentLog, L.currentLogLast);
    },
  };
}

/**
 * Step carry: replaces STATE/carry with the staged one (a run with limit-domains in its
 * chain; none without), then the backup with the staged copy of the carry the run
 * leaves. After current_log's: both are the state this run leaves, and a crash between
 * the two is rolled forward.
 */
export function carryStep(plan: CommitPlan): Step {
  const L = stateLayout(plan.state);
  const S = stagingLayout(plan.staging);
  return {
    name: 'carry',
    run() {
      moveIntoPlace(S.carryNext, L.carry);
      if (plan.memory?.carry) moveIntoPlace(S.carryLast, L.carryLast);
    },
  };
}

/** Step settings: stores the run's --keep, --resend-after and cap with the state. */
export function settingsStep(plan: CommitPlan): Step {
  return {
    name: 'settings',
    run() {
      const { run, keep_ms, resend_after_ms, max_per_domain, carry_keep_ms } = plan.record;
      // A marker of a runner before keep_ms was recorded: the settings stay as they were.
      if (Number.isSafeInteger(keep_ms) && Number.isSafeInteger(resend_after_ms)) {
        writeFileDurable(
          stateLayout(plan.state).settings,
          settingsText({ run, keep_ms, resend_after_ms, max_per_domain, carry_keep_ms, keyed_by: plan.keyedBy }),
        );
      }
    },
  };
}

/** Step memory: records the new current_log's identity and the replay reference in STATE/memory.json. */
export function memoryStep(plan: CommitPlan): Step {
  return {
    name: 'memory',
    run() {
      if (plan.memory !== undefined) writeFileDurable(stateLayout(plan.state).memory, JSON.stringify(plan.memory) + '\n');
    },
  };
}

/** Step rejects: keeps the run's rejects file in STATE/rejects/ (or removes one an earlier run left) and removes its failed attempts'. */
export function rejectsStep(plan: CommitPlan): Step {
  const rejects = keptRejects(plan.state, plan.run);
  return {
    name: 'rejects',
    run() {
      // No rejects this time: a file an earlier run of the same name left (or a failed
      // attempt, by a runner before failed/) would pass for this run's.
      if (plan.record.rejects_file !== undefined) moveIntoPlace(stagingLayout(plan.staging).rejects, rejects);
      else removeDurable(rejects);
      removeDurable(failedRejects(plan.state, plan.run));
    },
  };
}

/** Step record: appends the run's line, with each Yacobot's backlog, to runs.jsonl (once). */
export function recordStep(plan: CommitPlan, hooks: CommitHooks, recovered: boolean): Step {
  return {
    name: 'record',
    run() {
      const backlog = countBacklog(plan.queueDir);
      const warn = Object.entries(backlog).filter(([, b]) => b.urls > plan.backlogWarn);
      for (const [id, b] of warn) hooks.backlogWarn?.(id, b, plan.backlogWarn);
      const record: RunRecord = { ...plan.record, backlog };
      if (warn.length > 0) record.backlog_warn = warn.map(([id]) => id);
      if (recovered) record.recovered = 'roll-forward';
      const appended = runsLog(plan.state).append(record);
      hooks.recorded?.(record, appended);
    },
  };
}

/** Step uncommit: removes the COMMIT marker (after telling hooks.finished), which ends the run's roll forward. */
export function uncommitStep(plan: CommitPlan, hooks: CommitHooks): Step {
  return {
    name: 'uncommit',
    run() {
      // COMMIT goes first: while it is there, a roll forward needs every staged file.
      // Without it, start-up drops the directory (the reflog has left the inbox).
      hooks.finished?.(plan.run);
      fs.rmSync(stagingLayout(plan.staging).commit, { force: true });
      fsyncPath(plan.staging);
    },
  };
}

/** Step cleanup: removes the run's staging directory. */
export function cleanupStep(plan: CommitPlan): Step {
  return {
    name: 'cleanup',
    run() {
      fs.rmSync(plan.staging, { recursive: true, force: true });
      fsyncPath(path.dirname(plan.staging));
    },
  };
}

/** Renames `from` to `to` durably, making `to`'s directory if needed; nothing when `from` is gone (renamed before a crash). */
function moveIntoPlace(from: string, to: string): void {
  if (!fs.existsSync(from)) return; // renamed before a crash
  mkdirDurable(path.dirname(to));
  try {
    fs.renameSync(from, to);
  } catch (err) {
    throw ioError(err, to, 'rename into place');
  }
  fsyncPath(path.dirname(to));
}

/**
 * Makes `link` a hard link of `file` (unless it already is one), so that removing
 * `file` by hand loses nothing; where hard links cannot be made, leaves it as it is.
 */
function keepLink(file: string, link: string): void {
  const a = statQuiet(file, fs.lstatSync);
  const b = statQuiet(link, fs.lstatSync);
  if (a === undefined || (b !== undefined && a.dev === b.dev && a.ino === b.ino)) return;
  const tmp = path.join(path.dirname(link), `.${path.basename(link)}.tmp`);
  try {
    fs.rmSync(tmp, { force: true });
    fs.linkSync(file, tmp);
    fs.renameSync(tmp, link);
  } catch {
    fs.rmSync(tmp, { force: true });
    return; // no copy kept: the message for a missing current_log then says so
  }
  fsyncPath(path.dirname(link));
}
