// One run: its attempt, its chain of stages, then its failure or its commit (end.ts).
import { BIN_DIR as BIN } from '../../core/root.js';
import type { RunJson } from '../state/attempt.js';
import { memoryDiffers, memoryLost } from '../checks/memory.js';
import type { RunRecord } from '../state/run-record.js';
import type { ChainResult, RunContext } from './context.js';
import { commitRun, failRun, warnStages } from './end.js';
import { runStages } from './pipeline.js';
import { RunProgress } from './progress.js';
import { carryRecord } from './record.js';
import { chainFailure } from './reflog-checks.js';
import { rekeyBeforeHour } from './rekey.js';
import { startAttempt } from './start.js';
import { stageCounts } from './stage-log.js';

/** Runs and commits one reflog; returns its record (status failed: nothing was published), or null when a signal stopped it before its commit. */
export async function runOne(run: RunContext): Promise<RunRecord | null> {
  const started = new Date();
  const rj = startAttempt(run, started);
  const chain = await runChain(run, rj, started.getTime());
  const seconds = () => Math.round((Date.now() - started.getTime()) / 100) / 10;
  const stages: Record<string, Record<string, unknown>> = {};
  for (const s of chain.outcomes) stages[s.name] = stageCounts(s);
  const record = newRecord(run, rj, started, stages);
  if (chain.rekeyed !== undefined) record.rekeyed = chain.rekeyed;
  // From here to COMMIT only the claim of the hour awaits (a signal then stops the run
  // before it); after COMMIT only its confirmation: a later signal is seen after the commit.
  if (run.signalled()) return null; // the caller stops; the staging area stays for the next invocation
  const failed = (step: string, error: string) => failRun(run, rj, record, seconds, step, error);
  const failure = run.overTime() ?? chainFailure(run, chain, stages);
  if (failure !== null) return failed(failure.step, failure.error);
  warnStages(run, chain.outcomes, stages);
  // The commit's steps say where it is (a big hour's copies and fsyncs take a while).
  const progress = new RunProgress(run.p.name, run.say, { terminal: false, since: started.getTime() }).start();
  const beforeStep = (name: string, step: string) => {
    progress.step = step;
    progress.tick();
    run.hooks.beforeStep?.(name, step);
  };
  try {
    return await commitRun({ ...run, hooks: { ...run.hooks, beforeStep } }, rj, record, chain, stages, seconds, failed);
  } finally {
    progress.stop();
  }
}

/** Runs the chain of stages (or fails it at current_log or the carry when that file has lost its memory or is not what the last commit left), showing progress. */
async function runChain({ o, say, p, lockFd, hooks, signalled }: RunContext, rj: RunJson, since: number): Promise<ChainResult> {
  const progress = new RunProgress(p.name, say, { since }).start();
  const missing = memoryLost(o, say, p.name);
  const lost = missing === null ? memoryDiffers(o, say, p.name) : { step: 'current_log', error: missing };
  try {
    if (lost !== null)
      return {
        outcomes: [{ name: lost.step, exit: 1, summary: null, messages: [lost.error] }],
        reflogFile: null,
        reflogLink: undefined,
        head: null,
        digest: null,
      };
    const rekey = await rekeyBeforeHour(o, say, p, rj.now, progress);
    if (rekey !== null && 'error' in rekey)
      return {
        outcomes: [{ name: 'rekey', exit: 1, summary: null, messages: [rekey.error] }],
        reflogFile: null,
        reflogLink: undefined,
        head: null,
        digest: null,
      };
    hooks.beforeStep?.(p.name, 'rekey');
    const r = await runStages(o, p, rj.now, lockFd, BIN, progress, signalled, () => hooks.beforeStep?.(p.name, 'chain'));
    return {
      outcomes: r.outcomes,
      reflogFile: r.reflog,
      reflogLink: r.reflogLink,
      head: r.head,
      digest: r.digest,
      ...(rekey !== null && { rekeyed: rekey.report }),
    };
  } finally {
    progress.stop();
  }
}

/** The record of a run as it stands after its chain, before its outcome is known. */
function newRecord({ o, p, isRerun }: RunContext, rj: RunJson, started: Date, stages: Record<string, Record<string, unknown>>): RunRecord {
  const record: RunRecord = {
    run: p.name,
    run_id: rj.run_id,
    status: 'ok',
    start: started.toISOString(),
    now: rj.now,
    now_source: rj.now_source,
    attempt: rj.attempts,
    seconds: 0,
    reflog: p.reflog,
    stages,
    sent: 0,
    sent_per_yacobot: {},
    new_domains: 0,
    keep_ms: o.keepMs,
    resend_after_ms: o.resendAfterMs,
    master: o.masterName,
    ...carryRecord(o, stages),
    ...(rj.queue !== undefined && { queue_name: rj.queue }),
  };
  if (isRerun || rj.attempts > (rj.failed_before ?? 0) + 1) record.recovered = 'rerun';
  return record;
}
