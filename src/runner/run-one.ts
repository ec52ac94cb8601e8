// One run: its attempt, its chain of stages, then its failure or its commit (run-end.ts).
import * as fs from 'node:fs';
import type { Logger } from 'pino';
import { ioError, visibleName } from '../core/errors.js';
import { BIN_DIR as BIN } from '../core/root.js';
import { type RunJson, readRunJson } from './attempt.js';
import { carryRecord } from './carry.js';
import type { CommitHooks } from './commit.js';
import { mkdirDurable, writeFileDurable } from './fsutil.js';
import { PROG, type RunnerOptions } from './options.js';
import { type Progress, type ReflogIdentity, runStages } from './pipeline.js';
import { type CommittedNow, type RunPaths, type RunRecord, type StageOutcome, replayWarning, resolveNow, stageCounts } from './plan.js';
import { type RekeyReport, rekeyBeforeHour } from './rekey.js';
import { queueNameFor } from './resent.js';
import { chainFailure, commitRun, failRun, warnStages } from './run-end.js';
import { memoryDiffers, memoryLost } from './settings-check.js';

/** One run's context: the invocation's settings and what its place among the invocation's runs decides. */
export interface RunContext {
  o: RunnerOptions;
  log: Logger;
  p: RunPaths;
  lockFd: number;
  hooks: CommitHooks;
  /** A crash interrupted an earlier attempt of this run. */
  isRerun: boolean;
  signalled: () => boolean;
  /** Set once --max-run-time stopped the chain: the run fails with it. */
  overTime: () => { step: string; error: string } | null;
  /** The committed run a replay is compared with (replayWarning). */
  newest: CommittedNow | null;
  replayed: boolean;
}

/** What the chain of one attempt left: the stages' outcomes and the reflog it read. */
export interface ChainResult {
  outcomes: StageOutcome[];
  reflogFile: ReflogIdentity | null;
  reflogLink: ReflogIdentity | null | undefined;
  head: Buffer | null;
  /** The reflog's SHA-256, null when the chain did not read it to its end. */
  digest: string | null;
  /** current_log re-keyed before the chain (rekey.ts). */
  rekeyed?: RekeyReport;
}

/** Runs and commits one reflog; returns its record (status failed: nothing was published), or null when a signal stopped it before its commit. */
export async function runOne(run: RunContext): Promise<RunRecord | null> {
  const started = new Date();
  const rj = startAttempt(run, started);
  const chain = await runChain(run, rj);
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
  return commitRun(run, rj, record, chain, stages, seconds, failed);
}

/** Starts an attempt: its run.json (made or reused, attempts counted), a fresh work area, and its warnings. */
function startAttempt({ o, log, p, newest, replayed }: RunContext, started: Date): RunJson {
  let rj = readRunJson(p);
  if (rj === null) {
    const { now, source } = resolveNow(p.name, o.now, started);
    rj = { run_id: `${p.name}@${started.toISOString()}#${process.pid}`, run: p.name, now, now_source: source, created: started.toISOString(), attempts: 0 };
    const queue = queueNameFor(o.queueDir, p.name, started);
    if (queue !== p.name) rj.queue = queue;
  } else if (o.now !== null && o.now !== rj.now) {
    log.warn({ run: p.name, stored_now: rj.now, flag_now: o.now }, 'rerun of an interrupted run keeps the now it started with');
  }
  rj.attempts++;
  mkdirDurable(p.staging);
  writeFileDurable(p.runJson, JSON.stringify(rj) + '\n');
  fs.rmSync(p.work, { recursive: true, force: true });
  for (const d of [p.work, p.tmp, p.logs, p.queue]) {
    try {
      fs.mkdirSync(d, { recursive: true });
    } catch (err) {
      throw ioError(err, d, 'create directory');
    }
  }
  log.info({ run: p.name, now: rj.now, now_source: rj.now_source, attempt: rj.attempts }, 'run start');
  if (rj.queue !== undefined) {
    p.queueName = rj.queue;
    log.warn({ run: p.name, queue_name: rj.queue }, "queue files of an earlier run of this name are not taken yet; this run's get a name of their own");
    process.stderr.write(
      `${PROG}: warning: ${visibleName(p.name)}: queue files of an earlier run of this name are still in ${visibleName(o.queueDir)} (not taken yet); this run's are named ${visibleName(rj.queue)}.tsv\n`,
    );
  }
  // Said before the run, not after its commit: one who replays by hand can still stop
  // it (nothing is published then), and in a cron log it comes before the run's line.
  const replay = replayWarning(p.name, rj.now, newest, o.keepMs, replayed);
  if (replay !== null) {
    log.warn(
      { run: p.name, now: rj.now, newest_run: newest?.run, newest_now: newest?.now, keep_ms: newest?.keepMs ?? o.keepMs },
      "a committed run's now is its --keep or more ahead of this run's: the URLs current_log forgot are sent again",
    );
    process.stderr.write(`${PROG}: warning: ${visibleName(replay)}\n`);
  }
  return rj;
}

/** Runs the chain of stages (or fails it at current_log when that file has lost its memory or is not what the last commit left), showing progress. */
async function runChain({ o, log, p, lockFd, hooks, signalled }: RunContext, rj: RunJson): Promise<ChainResult> {
  const progress: Progress = { size: 0, read: () => -1 };
  const stopDisplay = showProgress(p.name, progress);
  const lost = memoryLost(o, log, p.name) ?? memoryDiffers(o, log, p.name);
  try {
    if (lost !== null)
      return {
        outcomes: [{ name: 'current_log', exit: 1, summary: null, messages: [lost] }],
        reflogFile: null,
        reflogLink: undefined,
        head: null,
        digest: null,
      };
    const rekey = await rekeyBeforeHour(o, log, p, rj.now);
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
    stopDisplay();
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
    ...carryRecord(o, stages),
    ...(rj.queue !== undefined && { queue_name: rj.queue }),
  };
  if (isRerun || rj.attempts > 1) record.recovered = 'rerun';
  return record;
}

/** On a terminal: a one-line progress display (how much of the reflog the chain has read); returns its stop function. */
function showProgress(name: string, p: Progress): () => void {
  if (!process.stderr.isTTY) return () => undefined;
  const t0 = Date.now();
  let readSecs = 0;
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  const timer = setInterval(() => {
    const s = (Date.now() - t0) / 1000;
    const at = p.read();
    let text: string;
    if (at < 0 || p.size === 0) text = `${name}: running... ${s.toFixed(0)} s`;
    else if (at < p.size) {
      readSecs = s;
      text = `${name}: ${mib(at)} of ${mib(p.size)} read (${Math.floor((100 * at) / p.size)}%), ${mib(at / Math.max(s, 0.001))}/s, ${s.toFixed(0)} s`;
    } else text = `${name}: read ${mib(p.size)} in ${readSecs.toFixed(0)} s; sorting, filtering, routing... ${s.toFixed(0)} s`;
    process.stderr.write(`\r\x1b[K${text}`);
  }, 500);
  timer.unref();
  return () => {
    clearInterval(timer);
    process.stderr.write('\r\x1b[K');
  };
}
