// One invocation of the runner: takes the state directory's lock, finishes or discards
// what a crashed invocation left in STATE/staging/, then runs every reflog of the inbox,
// oldest name first, committing each run only when all its stages succeeded (see
// commit.ts for the commit order), and says how it ended.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeFileDurable } from '../../core/durable.js';
import { DataError, visibleName } from '../../core/errors.js';
import { BIN_DIR as BIN } from '../../core/root.js';
import { redactDb } from '../../core/store/store.js';
import { reportEnd } from './report.js';
import { storedForgetful } from '../state/memory.js';
import type { RunnerOptions } from '../options/types.js';
import { REFLOG_EXT, planInbox } from '../state/inbox.js';
import type { RunRecord } from '../state/run-record.js';
import { hourNotBegun, notAnHour } from '../run/now.js';
import { humanLine } from './report.js';
import { mostForgetful, mostForgetfulSince } from '../state/run-history.js';
import { runPaths } from '../state/layout.js';
import { runOne } from '../run/run-one.js';
import { runningChain } from '../run/processes.js';
import type { Say } from '../say.js';
import { checkSettings } from '../checks/settings.js';
import { checkBeforeChain } from '../checks/all.js';
import type { Seen } from '../state/last-invocation.js';
import { stagingDir, stagingLayout } from '../state/layout.js';
import { runsLog } from '../state/runs-log.js';
import { warnMissedHours } from './catch-up.js';
import type { Invocation } from './context.js';
import { Deadline } from './deadline.js';
import { commitHooks, reportedMarker } from './hooks.js';
import { recover } from './recovery.js';
import { setAsideResent } from './resent.js';
import { openState } from './open-state.js';
import { keepDone } from './retention.js';
import { watchSignals } from './signals.js';

/** One invocation: recover, plan the inbox, run each run, report; throws Stop for a signal or a failed run. */
export async function invocation(o: RunnerOptions, say: Say, seen: Seen): Promise<void> {
  const t0 = Date.now();
  const lockFd = openState(o, seen);
  const deadline = new Deadline(o.maxRunTimeMs, o.killAfterMs, say, runningChain, BIN);
  const inv = newInvocation(o, say, lockFd, watchSignals(o.killAfterMs, say), deadline);
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
  // it would go unseen, and the invocation exit 0 saying "N run(s) committed". (Not after
  // a failed run: its failure is what the invocation reports, as for one before others.)
  if (inv.failed === null) await pollOnce();
  printSummary(inv);
  const ok = inv.records.filter((r) => r.status === 'ok');
  if (ok.length > 0 && o.keepDoneMs !== null) keepDone(o.state, o.keepDoneMs, say);
  seen.committed = ok.map((r) => r.run);
  reportEnd(inv, ((Date.now() - t0) / 1000).toFixed(1));
}

/** A new invocation's state, with the commit hooks that record and report its runs. */
function newInvocation(o: RunnerOptions, say: Say, lockFd: number, stop: { signal: NodeJS.Signals | null }, deadline: Deadline): Invocation {
  const records: RunRecord[] = [];
  /** The records whose summary line was printed: each is printed once. */
  const printed = new Set<RunRecord>();
  const report = (r: RunRecord) => {
    if (printed.has(r)) return;
    printed.add(r);
    say.tell(humanLine(r));
  };
  const hooks = commitHooks(o, say, records, report);
  const found = { rerun: new Set<string>(), runs: [], skippedFiles: 0, waiting: new Set<string>() };
  return { o, say, lockFd, hooks, stop, records, report, ...found, failed: null, resentSetAside: 0, interrupted: null, deadline };
}

/** Prints the lines of the committed runs not yet printed: those whose publish steps an error stopped. */
function printSummary(inv: Invocation): void {
  for (const r of inv.records) {
    if (r.status !== 'ok') continue;
    inv.report(r);
    // Still committed, not finished (an error stopped its publish steps): its roll
    // forward must know that this line was printed. Durable (only this path pays its
    // fsyncs), or a power loss in the next seconds would have it printed again.
    if (fs.existsSync(stagingLayout(stagingDir(inv.o.state, r.run)).commit)) {
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
  const { o, say } = inv;
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
  for (const s of skipped) say.warn(`skipping ${visibleName(path.join(o.inbox, s.file))}: ${s.why}`, { fields: { file: s.file }, msg: `skipped: ${s.why}` });
  say.log?.info({ inbox: o.inbox, state: o.state, db: redactDb(o.db), queue_dir: o.queueDir, config: o.config, reflogs: inv.runs.length }, 'start');
}

/** Runs the planned runs in order until one fails, a signal comes or a run is interrupted. */
async function runEach(inv: Invocation): Promise<void> {
  const { o } = inv;
  // What a replay is compared with (replayWarning): the committed run whose forgetting
  // reaches latest, of the one memory.json keeps (runs.jsonl may have been rotated), of the
  // last MiB of runs.jsonl (weeks of hourly lines) and of
  // the runs this invocation commits; for a run of a name committed before, only of those
  // after its last commit, which recorded its URLs again (a replay replayed again).
  const past = runsLog(o.state).tail();
  const newestOfAll = mostForgetful(past, o.keepMs, storedForgetful(o.state));
  const sinceCommitted = mostForgetfulSince(past, o.keepMs);
  if (inv.runs.length > 0) {
    checkSettings(o, inv.say, past);
    await checkBeforeChain(o, past);
  }
  await warnMissedHours(o, inv.say, past, inv.runs);
  const committedHere: RunRecord[] = [];
  for (const name of inv.runs) {
    await pollOnce();
    if (inv.stop.signal || inv.deadline.expired) break;
    if (!inv.rerun.has(name) && setAsideResent(o, inv.say, name)) {
      inv.resentSetAside++;
      continue;
    }
    const replayed = sinceCommitted.has(name);
    const newest = mostForgetful(committedHere, o.keepMs, replayed ? (sinceCommitted.get(name) ?? null) : newestOfAll);
    const signalled = () => inv.stop.signal !== null;
    const overTime = () => inv.deadline.failure;
    const r = await runOne({
      o,
      say: inv.say,
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
