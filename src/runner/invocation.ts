// One invocation of the runner: takes the state directory's lock, finishes or discards
// what a crashed invocation left in STATE/staging/, then runs every reflog of the inbox,
// oldest name first, committing each run only when all its stages succeeded (see
// commit.ts for the commit order).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { DataError, visibleName } from '../core/errors.js';
import { BIN_DIR as BIN } from '../core/root.js';
import { redactDb } from '../core/store/store.js';
import { warnMissedHours } from './claims.js';
import type { CommitHooks } from './commit.js';
import { Deadline } from './deadline.js';
import { tailRecords, writeFileDurable } from './fsutil.js';
import { reportEnd } from './invocation-report.js';
import { keepDone } from './keep-done.js';
import type { Seen } from './last-invocation.js';
import { storedForgetful } from './memory.js';
import { openState } from './open-state.js';
import { PROG, type RunnerOptions } from './options.js';
import { runningChain, stopChildren } from './pipeline.js';
import { REFLOG_EXT, type RunRecord, hourNotBegun, humanLine, mostForgetful, mostForgetfulSince, notAnHour, planInbox, runPaths } from './plan.js';
import { recover } from './recovery.js';
import { setAsideResent } from './resent-hour.js';
import { runOne } from './run-one.js';
import { checkSettings } from './settings-check.js';

/** What one invocation's steps share: its options, what recovery and planning found, and how its runs ended. */
export interface Invocation {
  o: RunnerOptions;
  log: Logger;
  lockFd: number;
  hooks: CommitHooks;
  /** The first signal that asked the invocation to stop, once one came. */
  stop: { signal: NodeJS.Signals | null };
  /** The records of the runs this invocation recorded, in order. */
  records: RunRecord[];
  /** Prints a record's summary line, once. */
  report: (r: RunRecord) => void;
  /** The runs a crash interrupted, which run again. */
  rerun: Set<string>;
  /** The inbox's runs, in the order they run. */
  runs: string[];
  /** The *.reflog files of the inbox that were skipped with a warning (a bad name, an hour ahead). */
  skippedFiles: number;
  /** Of those, the names whose hour has not begun: planInbox counts them among its runs. */
  waiting: Set<string>;
  failed: RunRecord | null;
  /** The re-sent reflogs set aside (setAsideResent). */
  resentSetAside: number;
  /** The run a signal cut short before its commit (nothing of it published), if any. */
  interrupted: string | null;
  /** --max-run-time, counted from when the lock was taken. */
  deadline: Deadline;
}

/** One invocation: recover, plan the inbox, run each run, report; throws Stop for a signal or a failed run. */
export async function invocation(o: RunnerOptions, log: Logger, seen: Seen): Promise<void> {
  const t0 = Date.now();
  const lockFd = openState(o, seen);
  const deadline = new Deadline(o.maxRunTimeMs, o.killAfterMs, log, runningChain, BIN);
  const inv = newInvocation(o, log, lockFd, watchSignals(o, log), deadline);
  try {
    await recover(inv);
    planRuns(inv);
    await runEach(inv);
  } catch (err) {
    // The runs committed before the error are done (their lines are in runs.jsonl): say so here too.
    printSummary(inv);
    throw err;
  }
  // A signal that came while the last run (or a roll forward with no run after it) was
  // being published has its handler run only once the event loop polls: without this
  // it went unseen, and the invocation exited 0 saying "N run(s) committed". (Not after
  // a failed run: its failure is what the invocation reports, as for one before others.)
  if (inv.failed === null) await pollOnce();
  printSummary(inv);
  const ok = inv.records.filter((r) => r.status === 'ok');
  if (ok.length > 0 && o.keepDoneMs !== null) keepDone(o, log, o.keepDoneMs);
  seen.committed = ok.map((r) => r.run);
  reportEnd(inv, ((Date.now() - t0) / 1000).toFixed(1));
}

/** Installs the SIGINT/SIGTERM/SIGHUP handlers that stop the stages; the returned object holds the first signal. */
function watchSignals(o: RunnerOptions, log: Logger): { signal: NodeJS.Signals | null } {
  // The first signal asks the stages to stop (SIGTERM; they clean up and exit within
  // milliseconds). A stage that has not ended --kill-after later, or when a second
  // signal comes (a second Ctrl-C), is SIGKILLed: the runner must not wait forever on
  // a stuck stage, and a killed run is redone by the next invocation like any crash.
  const stop: { signal: NodeJS.Signals | null } = { signal: null };
  let killed = false;
  const kill = (why: string) => {
    if (killed) return;
    killed = true;
    if (stopChildren('SIGKILL')) {
      log.warn({ why }, 'killing the stages (SIGKILL)');
      process.stderr.write(`${PROG}: ${why}: killing them (SIGKILL)\n`);
    }
  };
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal !== null) {
      kill(`${sig} again while the stages stop`);
      return;
    }
    stop.signal = sig;
    if (stopChildren('SIGTERM')) {
      setTimeout(() => kill(`the stages did not stop within ${o.killAfterMs / 1000}s of ${sig}`), o.killAfterMs).unref();
    }
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, onSignal);
  return stop;
}

/** A new invocation's state, with the commit hooks that record and report its runs. */
function newInvocation(o: RunnerOptions, log: Logger, lockFd: number, stop: { signal: NodeJS.Signals | null }, deadline: Deadline): Invocation {
  const records: RunRecord[] = [];
  /** The records whose summary line was printed: each is printed once. */
  const printed = new Set<RunRecord>();
  const report = (r: RunRecord) => {
    if (printed.has(r)) return;
    printed.add(r);
    process.stderr.write(`${PROG}: ${humanLine(r)}\n`);
  };
  const hooks = commitHooks(o, log, records, report);
  const found = { rerun: new Set<string>(), runs: [], skippedFiles: 0, waiting: new Set<string>() };
  return { o, log, lockFd, hooks, stop, records, report, ...found, failed: null, resentSetAside: 0, interrupted: null, deadline };
}

/** The commit hooks of an invocation: they warn, push the records they are given and print finished runs' lines. */
function commitHooks(o: RunnerOptions, log: Logger, records: RunRecord[], report: (r: RunRecord) => void): CommitHooks {
  return {
    beforeStep: failpoint(),
    backlogWarn(id, b, limit) {
      log.warn({ yacobot: id, queue_files: b.files, urls: b.urls, limit }, 'backlog: Yacobot has more URLs waiting than --backlog-warn');
      process.stderr.write(`${PROG}: warning: Yacobot ${id} has ${b.urls} URLs in ${b.files} queue files not taken away (more than ${limit})\n`);
    },
    recorded(r, appended) {
      // A roll forward of a run whose line an earlier invocation wrote and whose summary
      // line it printed (an error after the commit that persists: every invocation rolls
      // it forward) says so, instead of printing that run's summary line once more.
      if (appended || !fs.existsSync(reportedMarker(o, r.run))) {
        records.push(r);
        return;
      }
      log.info({ run: r.run }, 'already recorded and reported by an earlier invocation; finishing its publish steps');
      process.stderr.write(`${PROG}: run ${visibleName(r.run)}: already recorded and reported by an earlier invocation; finishing its publish steps\n`);
    },
    finished(run) {
      // Printed now, not at the end: once COMMIT is gone, an invocation killed later
      // (in the next run's chain) left the run's line unprinted, and nothing rolled it forward.
      for (const r of records) if (r.run === run && r.status === 'ok') report(r);
    },
    reflogReplaced(run, file) {
      log.warn({ run, reflog: file }, 'another file was renamed over the reflog while its run was in progress; left in the inbox');
      process.stderr.write(
        `${PROG}: warning: ${visibleName(file)} is not the file run ${visibleName(run)} read (another file was renamed over it meanwhile); ` +
          `it stays in the inbox and the next invocation processes it as a re-sent hour\n`,
      );
    },
    archiveKept(run, archived, kept) {
      log.warn({ run, archived, kept }, 'the reflog an earlier run of this name archived is kept under another name');
      process.stderr.write(
        `${PROG}: warning: ${visibleName(run)}: ${visibleName(archived)}, the reflog an earlier run of this name read, is kept as ${visibleName(path.basename(kept))} (this run's takes its name)\n`,
      );
    },
  };
}

/** Prints the lines of the committed runs not yet printed: those whose publish steps an error stopped. */
function printSummary(inv: Invocation): void {
  for (const r of inv.records) {
    if (r.status !== 'ok') continue;
    inv.report(r);
    // Still committed, not finished (an error stopped its publish steps): its roll
    // forward must know that this line was printed. Durable (only this path pays its
    // fsyncs), or a power loss in the next seconds would have it printed again.
    if (fs.existsSync(runPaths(inv.o, r.run).commit)) {
      try {
        writeFileDurable(reportedMarker(inv.o, r.run), '');
      } catch {
        /* printed again by the roll forward */
      }
    }
  }
}

/** Plans the inbox: the runs in the order they run, with a warning for each file skipped. */
function planRuns(inv: Invocation): void {
  const { o, log } = inv;
  let entries: string[];
  try {
    entries = fs.readdirSync(o.inbox);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new DataError('NO_INBOX', `cannot read the inbox: ${code ?? String(err)}`, { file: o.inbox });
  }
  const planned = planInbox(entries);
  const skipped = planned.skipped;
  // A name whose hour lies ahead, or that starts with digits that are no hour, would give
  // its run a now that empties current_log. Not with --now (which decides), nor for an
  // interrupted run (it keeps the now it started with).
  const clock = new Date();
  for (const r of o.now === null ? planned.runs : []) {
    const why = inv.rerun.has(r) ? null : (hourNotBegun(r, clock, o.keepMs) ?? notAnHour(r));
    if (why === null) continue;
    inv.waiting.add(r);
    skipped.push({ file: r + REFLOG_EXT, why });
  }
  const ready = planned.runs.filter((r) => !inv.waiting.has(r));
  // An interrupted run goes first: uninterrupted, it would have been over before a reflog
  // with an older name that came since was looked at, and that one would run on its
  // current_log (and after its assignments), not the other way round.
  inv.runs = [...ready.filter((r) => inv.rerun.has(r)), ...ready.filter((r) => !inv.rerun.has(r))];
  inv.skippedFiles = skipped.length;
  for (const s of skipped) {
    log.warn({ file: s.file }, `skipped: ${s.why}`);
    process.stderr.write(`${PROG}: warning: skipping ${visibleName(path.join(o.inbox, s.file))}: ${s.why}\n`);
  }
  log.info({ inbox: o.inbox, state: o.state, db: redactDb(o.db), queue_dir: o.queueDir, config: o.config, reflogs: inv.runs.length }, 'start');
}

/** Runs the planned runs in order until one fails, a signal comes or a run is interrupted. */
async function runEach(inv: Invocation): Promise<void> {
  const { o, log } = inv;
  // What a replay is compared with (replayWarning): the committed run whose forgetting
  // reaches latest, of the one memory.json keeps (runs.jsonl may have been rotated), of the
  // last MiB of runs.jsonl (weeks of hourly lines) and of
  // the runs this invocation commits; for a run of a name committed before, only of those
  // after its last commit, which recorded its URLs again (a replay replayed again).
  const past = tailRecords(path.join(o.state, 'runs.jsonl'));
  const newestOfAll = mostForgetful(past, o.keepMs, storedForgetful(o.state));
  const sinceCommitted = mostForgetfulSince(past, o.keepMs);
  if (inv.runs.length > 0) checkSettings(o, log, past);
  await warnMissedHours(o, log, past, inv.runs);
  const committedHere: RunRecord[] = [];
  for (const name of inv.runs) {
    await pollOnce();
    if (inv.stop.signal || inv.deadline.expired) break;
    if (!inv.rerun.has(name) && setAsideResent(o, log, name)) {
      inv.resentSetAside++;
      continue;
    }
    const replayed = sinceCommitted.has(name);
    const newest = mostForgetful(committedHere, o.keepMs, replayed ? (sinceCommitted.get(name) ?? null) : newestOfAll);
    const signalled = () => inv.stop.signal !== null;
    const overTime = () => inv.deadline.failure;
    const r = await runOne({
      o,
      log,
      p: runPaths(o, name),
      lockFd: inv.lockFd,
      hooks: inv.hooks,
      isRerun: inv.rerun.has(name),
      signalled,
      overTime,
      newest,
      replayed,
    });
    if (r === null) {
      inv.interrupted = name;
      break;
    }
    if (r.status === 'failed') {
      inv.failed = r;
      inv.records.push(r);
      break;
    }
    committedHere.push(r);
  }
}

/**
 * Lets the event loop poll once, so that a signal that arrived during synchronous
 * work (a publish) has run its handler: the second immediate runs after a poll
 * phase whichever phase this was called from.
 */
async function pollOnce(): Promise<void> {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** STATE/staging/RUN/reported: the summary line of committed run RUN was printed. */
function reportedMarker(o: RunnerOptions, run: string): string {
  return path.join(runPaths(o, run).staging, 'reported');
}

/**
 * Test hook: REFLOG_RUNNER_FAILPOINT="RUN:STEP" (or "*:STEP") makes the runner
 * SIGKILL itself just before that step (chain: the chain's start; claim: the claim
 * of the hour; the commit steps: commit, commit:marker (COMMIT itself, after the staged files were made
 * durable), confirm (the claim's confirmation, after COMMIT), queue:<id>, current_log, carry, settings, memory, rejects, record, reflog, uncommit, cleanup; failed:cleanup: a failed run's
 * staging removal, after its runs.jsonl line), to prove each step recoverable;
 * REFLOG_RUNNER_FAILSIGNAL=SIGTERM sends that signal instead (it is handled once
 * the step's synchronous work is done).
 */
function failpoint(): ((run: string, step: string) => void) | undefined {
  const fp = process.env.REFLOG_RUNNER_FAILPOINT;
  if (!fp) return undefined;
  const sig = (process.env.REFLOG_RUNNER_FAILSIGNAL ?? 'SIGKILL') as NodeJS.Signals;
  return (run, step) => {
    if (fp === `${run}:${step}` || fp === `*:${step}`) process.kill(process.pid, sig);
  };
}
