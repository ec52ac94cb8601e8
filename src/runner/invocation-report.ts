// The invocation's last line: how it ended (a signal, a failed run, or what was done).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { signalExitStatus, visibleName } from '../core/errors.js';
import { redactDb } from '../core/store/store.js';
import { formatDuration } from '../core/time.js';
import type { Invocation } from './invocation.js';
import { PROG } from './options.js';
import { type RunRecord, planInbox } from './plan.js';

export class Stop extends Error {
  constructor(
    readonly code: number,
    readonly why: string | null = null,
  ) {
    super(`exit ${code}`);
  }
}

/** The invocation's last line: throws Stop after a signal or a failed run, else says what was done in `secs` seconds. */
export function reportEnd(inv: Invocation, secs: string): void {
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
    process.stderr.write(
      `${PROG}: the run is not lost: once the other process has let go of ${visibleName(redactDb(o.db))}, run again (or let the next invocation do it)\n`,
    );
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
