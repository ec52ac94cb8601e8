// reflog-to-yacobot-queue: the cron entry. Takes the state directory's lock,
// finishes or discards what a crashed invocation left in STATE/staging/, then runs
// every reflog of the inbox, oldest name first, committing each run only when all
// its stages succeeded (see commit.ts for the commit order).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { loadPino } from '../core/cjs.js';
import { packageVersion } from '../cli/stage.js';
import { DataError, UsageError, formatPlace, ioError, signalExitStatus, visibleName } from '../core/errors.js';
import { BIN_DIR as BIN } from '../core/root.js';
import { fsyncPath } from '../core/dirs.js';
import { openStore, redactDb } from '../core/store.js';
import { countLines, appendRecordOnce, exists, lastRecord, mkdirDurable, symlinkTarget, tailRecords, writeFileDurable } from './fsutil.js';
import { prepareQueues, publish, readCommit, removePrepared, writeCommit, stagedQueueFile, type CommitHooks, type CommitPlan } from './commit.js';
import { acquireLock, Locked } from './lock.js';
import { missingCurrentLog, settingsRefusal, storedSettings } from './settings.js';
import { keyedByHere, rekeyBeforeHour, type RekeyReport } from './rekey.js';
import { queueNameFor, resentOf, setAside } from './resent.js';
import { removeOld } from './retention.js';
import { formatDuration } from '../core/time.js';
import { PROG, USAGE, parseArgs, type RunnerOptions } from './options.js';
import { recordEnd } from './invocation-end.js';
import { stateOfRefused, type Seen } from './last-invocation.js';
import { SUBCOMMANDS, subcommand } from './subcommand.js';
import { runStages, runningChain, stopChildren, type Progress, type ReflogIdentity } from './pipeline.js';
import { Deadline } from './deadline.js';
import {
  REFLOG_EXT,
  REFLOG_HEAD_BYTES,
  assignedInLog,
  failureMessage,
  failedAttemptsAssigned,
  firstHeaderLine,
  foreignKind,
  foreignReflog,
  unterminatedReflog,
  hourNotBegun,
  notAnHour,
  humanLine,
  mostForgetful,
  mostForgetfulSince,
  notAReflog,
  planInbox,
  repeatedWarnings,
  replayWarning,
  resolveNow,
  runPaths,
  stageCounts,
  type CommittedNow,
  type NowSource,
  type RunPaths,
  type RunRecord,
  type StageOutcome,
} from './plan.js';

const pino = loadPino();

/** STATE/staging/RUN/run.json: fixed when a run is first attempted, reused by reruns after a crash. */
interface RunJson {
  run_id: string;
  run: string;
  now: string;
  now_source: NowSource;
  created: string;
  attempts: number;
  /** Domains that dead attempts assigned (their upload-domains committed, the run did not). */
  assigned_earlier?: number;
  /** The attempt whose assignments assigned_earlier last took in, so that none is counted twice. */
  assigned_counted?: number;
  /** The name of the run's queue files, fixed at its first attempt (queueNameFor); absent: the run's. */
  queue?: string;
}

class Stop extends Error {
  constructor(
    readonly code: number,
    readonly why: string | null = null,
  ) {
    super(`exit ${code}`);
  }
}

/** Runs the command line and exits with 0, 1, 2, 75 (locked) or 128+signal. Never returns. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<never> {
  if (SUBCOMMANDS.has(argv[0] ?? '')) return subcommand(argv[0]!, argv.slice(1));
  const seen: Seen = { started: new Date(), lock: false, committed: [] };
  let o: RunnerOptions;
  try {
    const parsed = parseArgs(argv, process.cwd());
    if (parsed === 'help') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    if (parsed === 'version') {
      process.stdout.write(`${packageVersion()}\n`);
      process.exit(0);
    }
    o = parsed;
  } catch (err) {
    if (err instanceof UsageError) {
      await recordEnd(null, stateOfRefused(argv, process.cwd()), seen, 2, err.message);
      usageExit(err.message);
    }
    throw err;
  }
  const log = pino({ name: PROG, level: o.logLevel, base: { prog: PROG } }, pino.destination({ fd: 2, sync: true }));
  const end = (code: number, error: string | null) => recordEnd(o, o.state, seen, code, error);
  try {
    await invocation(o, log, seen);
    await end(0, null);
    process.exit(0);
  } catch (err) {
    if (err instanceof Stop) {
      await end(err.code, err.why);
      process.exit(err.code);
    }
    if (err instanceof UsageError) {
      await end(2, err.message);
      usageExit(err.message);
    }
    if (err instanceof Locked) {
      await end(75, `another run holds the lock: ${err.message}`);
      process.stderr.write(`${PROG}: another run holds the lock: ${visibleName(err.message)}; exiting (75)\n`);
      process.exit(75);
    }
    const message =
      err instanceof DataError ? formatPlace(err.place, err.message) : `internal error: ${(err as Error)?.message ?? String(err)}`;
    if (!(err instanceof DataError) && process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    log.error({ error: message }, 'failed');
    process.stderr.write(`${PROG}: ${visibleName(message)}\n`); // one line, whatever names it quotes
    await end(1, message);
    process.exit(1);
  }
}

function usageExit(message: string): never {
  process.stderr.write(`${PROG}: ${visibleName(message)}\nTry '${PROG} --help' for more information.\n`);
  process.exit(2);
}

/**
 * Throws a DataError unless `file` (runs.jsonl) is missing or a regular file. Each run's
 * commit steps append its line there, after its queue files are out: into a FIFO or a
 * directory that append fails, and so does the roll forward of every later invocation,
 * each run held up behind it. (Opening a FIFO to read the newest committed run also
 * held the start-up for ever, deaf to SIGTERM.)
 */
function checkRunsFile(file: string): void {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file, { throwIfNoEntry: false });
  } catch {
    return; // what cannot be stat'ed is reported by the read or append that fails on it
  }
  if (st === undefined || st.isFile()) return;
  const what = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'not a regular file';
  throw new DataError('RUNS_NOT_FILE', `is ${what}: the run records go to a regular file; move it aside (the runner starts a new one); nothing was run`, { file });
}

/**
 * Throws a DataError naming the first place a run's commit must write but this user
 * cannot: the state directory and its done/, rejects/, rejects/failed/ and staging/,
 * and runs.jsonl (a missing one: its parent). Found at the commit instead, after the queue files were
 * published, the failure left a COMMIT that every later invocation rolled forward and
 * failed on again (a directory made by root running the runner by hand is the usual
 * cause).
 */
function checkWritable(o: RunnerOptions): void {
  // Not QUEUE nor its Yacobot directories: the run writes there before its COMMIT
  // (prepareQueues), where a failure publishes nothing. Checked here, a QUEUE owned by
  // root with each Yacobot's directory given to this user, or a directory of a Yacobot
  // that gets nothing, stopped every run.
  const runs = path.join(o.state, 'runs.jsonl');
  const places = [o.state, ...['done', 'rejects', 'rejects/failed', 'staging'].map((n) => path.join(o.state, n)), runs];
  for (const p of places) {
    let at = p;
    if (!fs.existsSync(at)) {
      // A symbolic link whose target is missing (a disk not mounted): mkdir takes it for
      // a directory that is there, and the commit's rename into it failed (ENOENT).
      // runs.jsonl is created through it, in the target's directory.
      const target = symlinkTarget(p);
      if (target !== null) at = path.resolve(path.dirname(p), target);
      at = path.dirname(at);
      if (target !== null && (p !== runs || !fs.existsSync(at))) {
        throw new DataError(
          'STATE_NOT_WRITABLE',
          `is a symbolic link, and its target ${target} is missing: a run's commit writes there (restore it, or remove the link); nothing was run`,
          { file: p },
        );
      }
      if (!fs.existsSync(at)) continue; // made by mkdir -p from an ancestor checked above, or reported when made
    }
    try {
      fs.accessSync(at, fs.constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      // The usual cause of each: a guess for EACCES only (a mode 444 file is this user's own doing).
      const why =
        code === 'EROFS'
          ? ' (a read-only file system)'
          : code === 'EACCES' && ownerOf(at) !== process.getuid?.()
            ? ' (made by another user, such as root running the runner by hand?)'
            : '';
      throw new DataError('STATE_NOT_WRITABLE', `cannot write here: ${code}; a run's commit writes here${why}; nothing was run`, { file: at });
    }
  }
}

/** The uid that owns `p`, or undefined when it cannot be stat'ed. */
function ownerOf(p: string): number | undefined {
  try {
    return fs.statSync(p).uid;
  } catch {
    return undefined;
  }
}

/** False when `p` is missing or not a directory; true otherwise, including when stat itself fails (reported when it is read). */
function isDirectoryOrUnreadable(p: string): boolean {
  try {
    return fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOTDIR';
  }
}

/** What one invocation's steps share: its options, what recovery and planning found, and how its runs ended. */
interface Invocation {
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
async function invocation(o: RunnerOptions, log: Logger, seen: Seen): Promise<void> {
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

/** Checks the inbox and the state directory and takes the lock, returning its fd; throws before anything runs. */
function openState(o: RunnerOptions, seen: Seen): number {
  // A wrong --inbox is a configuration error, found before anything is created under --state.
  if (!isDirectoryOrUnreadable(o.inbox)) throw new UsageError(`--inbox ${o.inbox}: is not an existing directory (check --inbox, or create it)`);
  // A committed run's last step moves its reflog out of the inbox. In an inbox that does
  // not allow it, every run would publish its queue files and then fail, and every later
  // invocation would roll it forward, publishing them again, hour after hour.
  try {
    fs.accessSync(o.inbox, fs.constants.W_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new DataError('INBOX_READ_ONLY', `cannot move processed reflogs out of the inbox: ${code}; nothing was run`, { file: o.inbox });
  }
  mkdirDurable(path.join(o.state, 'staging'));
  const lock = acquireLock(path.join(o.state, 'lock'));
  seen.lock = true;
  checkRunsFile(path.join(o.state, 'runs.jsonl'));
  checkWritable(o);
  return lock.fd;
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

/** Crash recovery: finishes committed runs, discards the work of uncommitted ones, and notes those that run again. */
async function recover(inv: Invocation): Promise<void> {
  const { o, log } = inv;
  for (const name of fs.readdirSync(path.join(o.state, 'staging')).sort()) {
    const staging = path.join(o.state, 'staging', name);
    // The runner makes only directories here. Not followed: a dangling symlink failed
    // every start-up ('internal error: ENOENT'), and one to a directory had its work/ removed.
    if (!fs.lstatSync(staging).isDirectory()) continue;
    const plan = readCommit(staging);
    if (plan) {
      log.warn({ run: name }, 'found a committed run that was not fully published; rolling forward');
      publish(plan, inv.hooks, true);
      continue;
    }
    if (await recoverUncommitted(inv, name, staging)) inv.rerun.add(name);
  }
}

/** Discards the work of an uncommitted run; true if it runs again (its reflog and run.json are there). */
async function recoverUncommitted(inv: Invocation, name: string, staging: string): Promise<boolean> {
  const { o, log } = inv;
  // Not committed: the queue files an attempt killed after copying them beside their
  // place will not be published from there (a rerun copies its own).
  const p = runPaths(o, name);
  const rj = readRunJson(p);
  removePrepared(o.queueDir, name, rj?.queue);
  const over = rj === null ? null : attemptRecorded(path.join(o.state, 'runs.jsonl'), rj);
  if (over !== null) {
    // Killed after its line and before its staging area was removed (a failed run, or a
    // finished one in its cleanup, its COMMIT gone): the run is over, as if the removal
    // had happened. Redone as the same run (a re-sent hour of that name in the inbox), it
    // would count the earlier attempt's new domains a second time, under its run_id.
    log.warn({ run: name, status: over }, `removing the staging area of a run that ${over === 'ok' ? 'finished' : 'failed'} (its line is in runs.jsonl)`);
    fs.rmSync(staging, { recursive: true, force: true });
    fsyncPath(path.dirname(staging));
    return false;
  }
  if (rj !== null) await keepAssignments(p, rj, o, log);
  fs.rmSync(p.work, { recursive: true, force: true });
  if (fs.existsSync(p.reflog) && rj !== null) {
    log.warn({ run: name }, 'found an interrupted run; its partial work was removed and it runs again');
    return true;
  }
  fs.rmSync(staging, { recursive: true, force: true });
  fsyncPath(path.dirname(staging));
  return false;
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
  // reaches latest, of the last MiB of runs.jsonl (weeks of hourly lines; the file only grows) and of
  // the runs this invocation commits; for a run of a name committed before, only of those
  // after its last commit, which recorded its URLs again (a replay replayed again).
  const past = tailRecords(path.join(o.state, 'runs.jsonl'));
  const newestOfAll = mostForgetful(past, o.keepMs);
  const sinceCommitted = mostForgetfulSince(past, o.keepMs);
  if (inv.runs.length > 0) checkSettings(o, log, past);
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
    const r = await runOne({ o, log, p: runPaths(o, name), lockFd: inv.lockFd, hooks: inv.hooks, isRerun: inv.rerun.has(name), signalled, overTime, newest, replayed });
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

/** The invocation's last line: throws Stop after a signal or a failed run, else says what was done in `secs` seconds. */
function reportEnd(inv: Invocation, secs: string): void {
  const { o } = inv;
  // Not the skipped ones, said apart below.
  const inInbox = () => planInbox(fs.readdirSync(o.inbox)).runs.filter((r) => !inv.waiting.has(r)).length;
  // The skipped ones stay too, each for the reason its warning gave.
  const stay = (n: number) => `${n} reflog(s) stay in ${visibleName(o.inbox)}${inv.skippedFiles > 0 ? `, and the ${inv.skippedFiles} skipped` : ''}`;
  if (inv.stop.signal) reportSignal(inv, inv.stop.signal, stay(inInbox()));
  if (inv.failed) reportFailed(inv, inv.failed, stay(inv.runs.length - inv.runs.indexOf(inv.failed.run)));
  if (inv.deadline.expired && inInbox() > 0) {
    process.stderr.write(`${PROG}: --max-run-time ${formatDuration(o.maxRunTimeMs)} reached between runs: no further run started; ${stay(inInbox())}\n`);
  }
  reportDone(inv, secs);
}

/** Says where a signal stopped the invocation and throws its Stop. */
function reportSignal(inv: Invocation, signal: NodeJS.Signals, stay: string): never {
  const ok = inv.records.filter((r) => r.status === 'ok');
  // A signal that arrives while a run is being published is seen after its commit: that run is done.
  const last = ok.at(-1)?.run;
  const what = inv.interrupted
    ? `nothing of the interrupted run ${inv.interrupted} was published (the next invocation runs it again)`
    : last
      ? `after run ${last} was committed`
      : 'before any run started';
  inv.log.warn({ signal, interrupted: inv.interrupted, committed: ok.map((r) => r.run) }, 'stopped by signal; the next invocation goes on from here');
  process.stderr.write(`${PROG}: stopped by ${signal}; ${what}; ${stay}\n`);
  throw new Stop(signalExitStatus(signal), `stopped by ${signal}`);
}

/** Says which run failed, what stays and the operator's ways on, and throws Stop(1). */
function reportFailed(inv: Invocation, failed: RunRecord, stay: string): never {
  const { o } = inv;
  process.stderr.write(
    `${PROG}: run ${failed.run} failed: ${visibleName(failed.error ?? '')}\n` +
      `${PROG}: nothing of it was published; ${stay} (see ${visibleName(path.join(o.state, 'runs.jsonl'))})\n`,
  );
  // The operator's two ways on from a reject ratio failure: the lines to look at, and the flag.
  if (failed.failed_stage === 'analyze-dump' && failed.stages['analyze-dump']?.error_code === 'REJECT_RATIO' && failed.rejects_file) {
    process.stderr.write(
      `${PROG}: the rejected lines are in ${visibleName(failed.rejects_file)}; if the reflog is to go through anyway, run again with a higher --max-reject-ratio\n`,
    );
  }
  // A database held by another process (partner-db, a sqlite3 shell) is no fault of the run.
  if (failed.failed_stage !== undefined && failed.stages[failed.failed_stage]?.error_code === 'DB_BUSY') {
    process.stderr.write(`${PROG}: the run is not lost: once the other process has let go of ${visibleName(redactDb(o.db))}, run again (or let the next invocation do it)\n`);
  }
  throw new Stop(1, `run ${failed.run} failed: ${failed.error ?? ''}`);
}

/** The line of an invocation that ended without a signal or a failure. */
function reportDone(inv: Invocation, secs: string): void {
  const { o, records, resentSetAside, skippedFiles } = inv;
  const ok = records.filter((r) => r.status === 'ok');
  const aside = resentSetAside > 0 ? `; ${resentSetAside} re-sent reflog(s) set aside in ${visibleName(path.join(o.state, 'done'))}` : '';
  if (records.length === 0 && resentSetAside > 0) {
    process.stderr.write(`${PROG}: nothing run${aside} (see the warnings above)\n`);
  } else if (records.length === 0) {
    // Skipped files are not "nothing": each warning above says what stops it.
    process.stderr.write(
      skippedFiles > 0
        ? `${PROG}: nothing run: the ${skippedFiles} *.reflog file(s) in ${visibleName(o.inbox)} were skipped (see the warnings above)\n`
        : `${PROG}: nothing to do: no new *.reflog in ${visibleName(o.inbox)}\n`,
    );
  } else {
    process.stderr.write(
      `${PROG}: ${ok.length} run(s) committed in ${secs} s; queue files in ${visibleName(o.queueDir)}/<yacobot_id>/<run>.tsv, ` +
        `run records in ${visibleName(path.join(o.state, 'runs.jsonl'))}${aside}\n`,
    );
  }
}

/** --keep-done: removes done/ and rejects files older than `keepMs`, saying how many; what cannot be removed is warned about. */
function keepDone(o: RunnerOptions, log: Logger, keepMs: number): void {
  const { removed, failed } = removeOld(o.state, keepMs, Date.now());
  if (removed.length > 0) {
    log.info({ removed: removed.length, keep_done_ms: keepMs }, 'removed processed reflogs and rejects files older than --keep-done');
    process.stderr.write(`${PROG}: removed ${removed.length} file(s) of done/ and rejects/ older than ${formatDuration(keepMs)} (--keep-done)\n`);
  }
  for (const f of failed) {
    log.warn({ error: f }, 'cannot remove a file older than --keep-done');
    process.stderr.write(`${PROG}: warning: cannot remove ${visibleName(f)} (older than --keep-done)\n`);
  }
}

/**
 * The failure of run `run` when STATE/current_log is missing though runs were committed
 * (missingCurrentLog), else null; with --reset-current-log, says that the memory starts over.
 */
function memoryLost(o: RunnerOptions, log: Logger, run: string): string | null {
  const past = tailRecords(path.join(o.state, 'runs.jsonl'));
  const lost = missingCurrentLog(o.state, past);
  if (lost === null || !o.resetCurrentLog) return lost;
  log.warn({ run, current_log: path.join(o.state, 'current_log') }, 'current_log is missing; starting the memory of sent URLs over (--reset-current-log)');
  process.stderr.write(`${PROG}: warning: ${visibleName(run)}: ${visibleName(path.join(o.state, 'current_log'))} is missing; starting the memory of sent URLs over (--reset-current-log): every URL of this run is sent as new\n`);
  return null;
}

/**
 * When INBOX/NAME.reflog repeats byte for byte a reflog a committed run of NAME archived:
 * sets it aside in done/ with a warning, and returns true (nothing else is done with it).
 */
function setAsideResent(o: RunnerOptions, log: Logger, name: string): boolean {
  const file = path.join(o.inbox, name + REFLOG_EXT);
  const done = path.join(o.state, 'done');
  const same = resentOf(file, done, name);
  if (same === null) return false;
  const to = setAside(file, same.st, done, name);
  if (to === file) return false; // another file came under its name meanwhile: it runs
  log.warn({ run: name, reflog: file, archived: same.archived, set_aside: to }, 're-sent hour set aside');
  process.stderr.write(
    `${PROG}: warning: ${visibleName(file)}: the same bytes as ${visibleName(same.archived)}, which a committed run of ${visibleName(name)} read: ` +
      `a re-sent hour, set aside as ${visibleName(to)}; nothing was run (to replay the hour, move the reflog from done/ into the inbox)\n`,
  );
  return true;
}

/**
 * Throws a UsageError (exit 2, before any stage runs) when this invocation's settings
 * differ from those stored with the state, unless --accept-settings-change: then says
 * that the run goes on with them (its commit stores them).
 */
function checkSettings(o: RunnerOptions, log: Logger, past: readonly unknown[]): void {
  const stored = storedSettings(o.state, past);
  const refusal = stored === null ? null : settingsRefusal(o, stored);
  if (refusal === null) return;
  if (!o.acceptSettingsChange) {
    log.error({ keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, 'settings differ from those stored with the state');
    throw new UsageError(refusal);
  }
  log.warn({ keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, 'settings change accepted');
  process.stderr.write(
    `${PROG}: warning: settings change accepted (--accept-settings-change): --keep ${formatDuration(o.keepMs)}, --resend-after ${formatDuration(o.resendAfterMs)} ` +
      `replace --keep ${formatDuration(stored!.settings.keep_ms)}, --resend-after ${formatDuration(stored!.settings.resend_after_ms)} once a run commits\n`,
  );
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

function readRunJson(p: RunPaths): RunJson | null {
  try {
    const j = JSON.parse(fs.readFileSync(p.runJson, 'utf8')) as RunJson;
    return typeof j.now === 'string' && typeof j.run_id === 'string' ? j : null;
  } catch {
    return null;
  }
}

/**
 * The status ('ok' or 'failed') of the last line of runs.jsonl when it is the line of
 * attempt `rj.attempts` of run `rj.run_id`, else null. Called for a staging directory
 * without COMMIT, where an 'ok' line means the run finished (its line is written after
 * COMMIT, which goes only after the reflog left the inbox).
 */
function attemptRecorded(file: string, rj: RunJson): 'ok' | 'failed' | null {
  const last = lastRecord(file) as { run_id?: unknown; attempt?: unknown; status?: unknown } | null;
  if (last === null || last.run_id !== rj.run_id || last.attempt !== rj.attempts) return null;
  return last.status === 'ok' || last.status === 'failed' ? last.status : null;
}

/**
 * Before a dead attempt's work is removed: adds what its upload-domains committed to
 * run.json, once per attempt. The rerun finds those domains already assigned, so
 * without this its record would not count them as new.
 */
async function keepAssignments(p: RunPaths, rj: RunJson, o: RunnerOptions, log: Logger): Promise<void> {
  if (rj.assigned_counted === rj.attempts) return;
  const n = await assignedByAttempt(p, o, log);
  if (n === 0) return;
  rj.assigned_earlier = (rj.assigned_earlier ?? 0) + n;
  rj.assigned_counted = rj.attempts;
  writeFileDurable(p.runJson, JSON.stringify(rj) + '\n');
}

/**
 * What the attempt whose stage logs are in `p.logs` committed to the database: what
 * its upload-domains log says, or, when the stage died between the line it logs just
 * before COMMIT and the one after, what the database says about that line's witness.
 */
async function assignedByAttempt(p: RunPaths, o: RunnerOptions, log: Logger): Promise<number> {
  if (!fs.existsSync(p.logs)) return 0;
  const f = fs.readdirSync(p.logs).find((n) => n.endsWith('.upload-domains.log'));
  if (!f) return 0;
  const { assigned, pending } = assignedInLog(fs.readFileSync(path.join(p.logs, f), 'utf8'));
  if (pending === null) return assigned;
  if (pending.rows === 0 || pending.witness === null) return 0;
  let committed: boolean;
  try {
    committed = await witnessCommitted(o, pending.witness, pending.added_at);
  } catch (err) {
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : String((err as Error)?.message ?? err);
    log.warn({ run: p.name, rows: pending.rows, error: message }, 'cannot tell whether a dead upload-domains committed; not counted in new_domains');
    process.stderr.write(`${PROG}: warning: ${p.name}: cannot tell whether upload-domains committed ${pending.rows} new domain(s) before it died (${visibleName(message)}); new_domains does not count them\n`);
    return 0;
  }
  log.warn({ run: p.name, rows: pending.rows, witness: pending.witness, committed }, 'upload-domains died during its commit; the database tells whether it happened');
  return committed ? pending.rows : 0;
}

/**
 * Whether the database has `domain` with `added_at` (the row a transaction inserts
 * exists iff it committed: it was absent when that transaction, holding the write
 * lock, inserted it).
 */
async function witnessCommitted(o: RunnerOptions, domain: string, addedAt: string): Promise<boolean> {
  const store = await openStore(o.db, { readonly: true, timeouts: o.dbTimeouts });
  try {
    return (await store.addedAtOf(domain)) === addedAt;
  } finally {
    await store.close();
  }
}

/** One run's context: the invocation's settings and what its place among the invocation's runs decides. */
interface RunContext {
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
interface ChainResult {
  outcomes: StageOutcome[];
  reflogFile: ReflogIdentity | null;
  reflogLink: ReflogIdentity | null | undefined;
  head: Buffer | null;
  /** current_log re-keyed before the chain (rekey.ts). */
  rekeyed?: RekeyReport;
}

/** Runs and commits one reflog; returns its record (status failed: nothing was published), or null when a signal stopped it before its commit. */
async function runOne(run: RunContext): Promise<RunRecord | null> {
  const started = new Date();
  const rj = startAttempt(run, started);
  const chain = await runChain(run, rj);
  const seconds = () => Math.round((Date.now() - started.getTime()) / 100) / 10;
  const stages: Record<string, Record<string, unknown>> = {};
  for (const s of chain.outcomes) stages[s.name] = stageCounts(s);
  const record = newRecord(run, rj, started, stages);
  if (chain.rekeyed !== undefined) record.rekeyed = chain.rekeyed;
  // From here to the end of publish() nothing awaits: a later signal is seen after the commit.
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
    log.warn({ run: p.name, queue_name: rj.queue }, 'queue files of an earlier run of this name are not taken yet; this run\'s get a name of their own');
    process.stderr.write(
      `${PROG}: warning: ${visibleName(p.name)}: queue files of an earlier run of this name are still in ${visibleName(o.queueDir)} (not taken yet); this run's are named ${visibleName(rj.queue)}.tsv\n`,
    );
  }
  // Said before the run, not after its commit: one who replays by hand can still stop
  // it (nothing is published then), and in a cron log it comes before the run's line.
  const replay = replayWarning(p.name, rj.now, newest, o.keepMs, replayed);
  if (replay !== null) {
    log.warn({ run: p.name, now: rj.now, newest_run: newest?.run, newest_now: newest?.now, keep_ms: newest?.keepMs ?? o.keepMs }, 'a committed run\'s now is its --keep or more ahead of this run\'s: the URLs current_log forgot are sent again');
    process.stderr.write(`${PROG}: warning: ${visibleName(replay)}\n`);
  }
  return rj;
}

/** Runs the chain of stages (or fails it at current_log when that file has lost its memory), showing progress. */
async function runChain({ o, log, p, lockFd, hooks, signalled }: RunContext, rj: RunJson): Promise<ChainResult> {
  const progress: Progress = { size: 0, read: () => -1 };
  const stopDisplay = showProgress(p.name, progress);
  const lost = memoryLost(o, log, p.name);
  try {
    if (lost !== null) return { outcomes: [{ name: 'current_log', exit: 1, summary: null, messages: [lost] }], reflogFile: null, reflogLink: undefined, head: null };
    const rekey = await rekeyBeforeHour(o, log, p);
    if (rekey !== null && 'error' in rekey) return { outcomes: [{ name: 'rekey', exit: 1, summary: null, messages: [rekey.error] }], reflogFile: null, reflogLink: undefined, head: null };
    hooks.beforeStep?.(p.name, 'rekey');
    const r = await runStages(o, p, rj.now, lockFd, BIN, progress, signalled, () => hooks.beforeStep?.(p.name, 'chain'));
    return { outcomes: r.outcomes, reflogFile: r.reflog, reflogLink: r.reflogLink, head: r.head, ...(rekey !== null && { rekeyed: rekey.report }) };
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
    ...(rj.queue !== undefined && { queue_name: rj.queue }),
  };
  if (isRerun || rj.attempts > 1) record.recovered = 'rerun';
  return record;
}

/** Records the run as failed at `step`, keeps its rejects, drops its staging area: nothing is published. */
async function failRun({ o, log, p, hooks }: RunContext, rj: RunJson, record: RunRecord, seconds: () => number, step: string, error: string): Promise<RunRecord> {
  record.status = 'failed';
  record.failed_stage = step;
  // Counted for the commit; a failed run published nothing.
  record.sent = 0;
  record.sent_per_yacobot = {};
  record.error = error;
  record.seconds = seconds();
  // Assignments are not undone with the run: a stage killed mid-run still lets
  // upload-domains commit, and its retry finds those domains already assigned.
  record.new_domains = (await assignedByAttempt(p, o, log)) + (rj.assigned_earlier ?? 0);
  keepFailedRejects(p, record);
  log.error({ run: p.name, stage: step, error }, 'run failed; nothing published');
  try {
    appendRecordOnce(path.join(o.state, 'runs.jsonl'), record);
  } catch (err) {
    // The record that keeps the stage's message is what failed: say it here. The run
    // is redone next time, as after a crash (its staging area stays).
    process.stderr.write(`${PROG}: run ${p.name} failed: ${visibleName(error)}\n`);
    throw err;
  }
  hooks.beforeStep?.(p.name, 'failed:cleanup');
  fs.rmSync(p.staging, { recursive: true, force: true });
  fsyncPath(path.dirname(p.staging));
  return record;
}

/** Moves a failed run's non-empty rejects beside the done ones (naming them in its record), or drops an earlier attempt's. */
function keepFailedRejects(p: RunPaths, record: RunRecord): void {
  // The rejects explain a failed reject ratio: keep them, apart from a committed run's
  // (a failed replay of a committed hour replaced or removed that run's); the next
  // attempt replaces or removes them, and a commit of the name removes them.
  if (fs.existsSync(p.rejects) && fs.statSync(p.rejects).size > 0) {
    mkdirDurable(path.dirname(p.rejectsFailed));
    try {
      fs.renameSync(p.rejects, p.rejectsFailed);
    } catch (err) {
      throw ioError(err, p.rejectsFailed, 'rename into place');
    }
    record.rejects_file = p.rejectsFailed;
  } else if (fs.existsSync(p.rejects)) {
    // analyze-dump ran and rejected nothing: what an earlier attempt rejected would pass for this one's.
    fs.rmSync(p.rejectsFailed, { force: true });
  }
}

/** The step and message a run fails with after its chain (a stage failed, no reflog, a cut last line), or null. */
function chainFailure({ o, p }: RunContext, chain: ChainResult, stages: Record<string, Record<string, unknown>>): { step: string; error: string } | null {
  const { head } = chain;
  const bad = chain.outcomes.find((s) => s.exit !== 0);
  const firstLine = () => head && firstHeaderLine(head, head.length >= REFLOG_HEAD_BYTES);
  // A gzip file never is a reflog (with a high --max-reject-ratio it would commit as rejects);
  // an HTML page with TABs fails on its rejects, which is no ratio to raise.
  const kind = head === null ? null : foreignKind(head);
  if (kind === 'gzip' || (kind === 'html' && bad?.name === 'analyze-dump')) return { step: 'reflog', error: foreignReflog(p.reflog, kind, firstLine()) };
  if (bad) return { step: bad.name, error: failureMessage(bad) };
  // Lines without a TAB and nothing else (an HTML page saved as the hour) are no reflog:
  // failed at step 'reflog', as a file that cannot be read is; the stages did their part.
  // Before the cut-last-line warning, which its message takes in.
  const archived = path.join(o.state, 'done', p.name + REFLOG_EXT);
  const notReflog = notAReflog(stages['analyze-dump'], p.reflog, firstLine(), exists(archived) ? archived : undefined);
  if (notReflog !== null) return { step: 'reflog', error: notReflog };
  if (stages['analyze-dump']?.last_line_unterminated === true && !o.allowUnterminated) {
    return { step: 'reflog', error: unterminatedReflog(p.reflog, stages['analyze-dump']?.lines_in) };
  }
  return null;
}

/** Warns of a cut last line let through (--allow-unterminated) and repeats the stages' own warnings. */
function warnStages({ log, p }: RunContext, outcomes: StageOutcome[], stages: Record<string, Record<string, unknown>>): void {
  if (stages['analyze-dump']?.last_line_unterminated === true) {
    log.warn({ run: p.name, reflog: p.reflog }, 'the reflog\'s last line has no newline; was it cut off?');
    process.stderr.write(
      `${PROG}: warning: ${p.name}: the reflog's last line has no newline; committed as it is (--allow-unterminated)\n`,
    );
  }
  // The stages' own warnings (a Yacobot disabled during the run that still got its
  // domains' URLs, domains of an inactive Yacobot) would
  // otherwise stay in their logs, which the cleanup removes. analyze-dump's cut last
  // line is said just above in the runner's words.
  for (const { stage, warning } of repeatedWarnings(outcomes)) {
    log.warn({ run: p.name, stage, warning }, 'stage warning');
    process.stderr.write(`${PROG}: warning: ${p.name}: ${stage}: ${visibleName(warning)}\n`);
  }
}

/** Gathers what a run publishes, commits it and publishes it; a queue file that cannot be prepared fails the run. */
function commitRun(
  { o, p, hooks, log }: RunContext,
  rj: RunJson,
  record: RunRecord,
  chain: ChainResult,
  stages: Record<string, Record<string, unknown>>,
  seconds: () => number,
  failed: (step: string, error: string) => Promise<RunRecord>,
): RunRecord | Promise<RunRecord> {
  const queue = stagedQueue(p, record);
  const ud = stages['upload-domains'] ?? {};
  record.new_domains =
    (typeof ud.assigned_by_us === 'number' ? ud.assigned_by_us : typeof ud.domains_new === 'number' ? ud.domains_new : 0) +
    (rj.assigned_earlier ?? 0);
  const byFailed = failedAttemptsAssigned(tailRecords(path.join(o.state, 'runs.jsonl')), p.name, rj.run_id);
  if (byFailed > 0) record.new_domains_failed_attempts = byFailed;
  // An empty rejects file stays staged (the cleanup removes it): the commit publishes none.
  if (fs.existsSync(p.rejects) && fs.statSync(p.rejects).size > 0) record.rejects_file = p.rejectsKept;
  record.seconds = seconds();
  const plan: CommitPlan = {
    version: 1,
    run: p.name,
    staging: p.staging,
    state: o.state,
    reflog: p.reflog,
    ...(chain.reflogFile !== null && { reflogFile: chain.reflogFile }),
    ...(chain.reflogLink !== undefined && { reflogLink: chain.reflogLink }),
    queueDir: o.queueDir,
    ...(p.queueName !== p.name && { queueName: p.queueName }),
    backlogWarn: o.backlogWarn,
    queue,
    record,
    keyedBy: keyedByHere(),
  };
  try {
    prepareQueues(plan);
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return failed('publish', formatPlace(err.place, err.message));
  }
  hooks.beforeStep?.(p.name, 'commit');
  writeCommit(plan, hooks);
  publish(plan, hooks);
  log.info({ run: p.name, sent: record.sent, sent_per_yacobot: record.sent_per_yacobot, new_domains: record.new_domains, seconds: record.seconds }, 'run committed');
  return record;
}

/** The staged queue files of a run, by Yacobot id, with their URLs counted into its record. */
function stagedQueue(p: RunPaths, record: RunRecord): CommitPlan['queue'] {
  const queue: CommitPlan['queue'] = [];
  for (const id of fs.readdirSync(p.queue).sort((a, b) => Number(a) - Number(b))) {
    const f = stagedQueueFile({ staging: p.staging, run: p.name, queueName: p.queueName }, id);
    if (!fs.existsSync(f)) continue;
    const urls = countLines(f);
    queue.push({ yacobot: id, urls });
    record.sent_per_yacobot[id] = urls;
    record.sent += urls;
  }
  return queue;
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

/**
 * Test hook: REFLOG_RUNNER_FAILPOINT="RUN:STEP" (or "*:STEP") makes the runner
 * SIGKILL itself just before that step (chain: the chain's start; the commit
 * steps: commit, commit:marker (COMMIT itself, after the staged files were made
 * durable), queue:<id>, current_log, rejects, record, reflog, uncommit, cleanup; failed:cleanup: a failed run's
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
