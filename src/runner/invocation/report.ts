// What an invocation says of its runs: each run's summary line, and the invocation's
// last line (a signal, a failed run, or what was done).
import * as fs from 'node:fs';
import { type ErrorCode, signalExitStatus, visibleName } from '../../core/errors.js';
import { redactDb } from '../../core/store/store.js';
import { formatDuration } from '../../core/time.js';
import { planInbox } from '../state/inbox.js';
import { stateLayout } from '../state/layout.js';
import type { RunRecord } from '../state/run-record.js';
import type { Invocation } from './context.js';

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
    inv.say.tell(`--max-run-time ${formatDuration(o.maxRunTimeMs)} reached between runs: no further run started; ${stay(inInbox())}`);
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
  inv.say.tell(`stopped by ${signal}; ${what}; ${stay}`, {
    level: 'warn',
    fields: { signal, interrupted: inv.interrupted, committed: ok.map((r) => r.run) },
    msg: 'stopped by signal; the next invocation goes on from here',
  });
  throw new Stop(signalExitStatus(signal), `stopped by ${signal}`);
}

/** Says which run failed, what stays and the operator's ways on, and throws Stop(1). */
function reportFailed(inv: Invocation, failed: RunRecord, stay: string): never {
  const { o, say } = inv;
  say.tell(`run ${failed.run} failed: ${visibleName(failed.error ?? '')}`);
  say.tell(`nothing of it was published; ${stay} (see ${visibleName(stateLayout(o.state).runs)})`);
  // The operator's two ways on from a reject ratio failure: the lines to look at, and the flag.
  if (failed.failed_stage === 'analyze-dump' && failed.stages['analyze-dump']?.error_code === ('REJECT_RATIO' satisfies ErrorCode) && failed.rejects_file) {
    say.tell(
      `the rejected lines are in ${visibleName(failed.rejects_file)}; if the reflog is to go through anyway, run again with a higher --max-reject-ratio`,
    );
  }
  // A database held by another process (partner-db, a sqlite3 shell) is no fault of the run.
  if (failed.failed_stage !== undefined && failed.stages[failed.failed_stage]?.error_code === ('DB_BUSY' satisfies ErrorCode)) {
    say.tell(`the run is not lost: once the other process has let go of ${visibleName(redactDb(o.db))}, run again (or let the next invocation do it)`);
  }
  throw new Stop(1, `run ${failed.run} failed: ${failed.error ?? ''}`);
}

/** The line of an invocation that ended without a signal or a failure. */
function reportDone(inv: Invocation, secs: string): void {
  const { o, say, records, resentSetAside, skippedFiles } = inv;
  const L = stateLayout(o.state);
  const ok = records.filter((r) => r.status === 'ok');
  const aside = resentSetAside > 0 ? `; ${resentSetAside} re-sent reflog(s) set aside in ${visibleName(L.done)}` : '';
  if (records.length === 0 && resentSetAside > 0) {
    say.tell(`nothing run${aside} (see the warnings above)`);
  } else if (records.length === 0) {
    // Skipped files are not "nothing": each warning above says what stops it.
    say.tell(
      skippedFiles > 0
        ? `nothing run: the ${skippedFiles} *.reflog file(s) in ${visibleName(o.inbox)} were skipped (see the warnings above)`
        : `nothing to do: no new *.reflog in ${visibleName(o.inbox)}`,
    );
  } else {
    say.tell(`${ok.length} run(s) committed in ${secs} s; ${whatPublished(o, ok)}run records in ${visibleName(L.runs)}${aside}`);
  }
}

/** Where the committed runs' queue files are, or that another master published (some of) their hours and this one remembered them. */
function whatPublished(o: Invocation['o'], ok: readonly RunRecord[]): string {
  const remembered = ok.filter((r) => r.published_by !== undefined).length;
  const where = `queue files in ${visibleName(o.queueDir)}/<yacobot_id>/<run>.tsv, `;
  if (remembered === 0) return where;
  const others = 'another master published them: remembered in current_log, not published';
  if (remembered === ok.length) return `none published (${others}); `;
  return `${remembered} of them not published (${others}); ${where}`;
}

/** One line of human summary for a run. */
export function humanLine(r: RunRecord): string {
  if (r.status === 'failed') return `${r.run}: FAILED in ${r.failed_stage ?? '?'} after ${r.seconds.toFixed(1)} s: ${r.error ?? ''}`;
  const ad = r.stages['analyze-dump'] ?? {};
  const fu = r.stages['filter-url'] ?? {};
  const per = Object.entries(r.sent_per_yacobot)
    .sort((a, b) => Number(a[0]) - Number(b[0]))
    .map(([id, n]) => `#${id} ${n}`)
    .join(', ');
  const held = typeof fu.held === 'number' ? `, ${fu.held} held back` : '';
  const carried = r.carried_out === undefined ? '' : `, ${r.carried_out} carried over`;
  return (
    `${r.run}: ${ad.lines_in ?? '?'} lines, ${ad.records_out ?? '?'} records, ${ad.rejected ?? '?'} rejected, ` +
    `${ad.skipped ?? '?'} skipped; ${r.sent} URLs sent${per ? ` (${per})` : ''}${held}${carried}; ` +
    `${r.new_domains} new domains${r.new_domains_failed_attempts ? ` (and ${r.new_domains_failed_attempts} by its failed attempts)` : ''}; ${r.seconds.toFixed(1)} s${r.recovered ? ` (${RECOVERED[r.recovered]})` : ''}` +
    (r.queue_name === undefined ? '' : `; queue files named ${r.queue_name}.tsv`) +
    (r.published_by === undefined ? '' : `; master ${r.published_by} published this hour: ${r.not_published ?? 0} URLs remembered, not published`)
  );
}

// Not "after a crash": a signal interrupts an attempt too, and an error (a directory in
// the way at done/RUN.reflog) leaves a commit unfinished as a crash does.
const RECOVERED: Record<NonNullable<RunRecord['recovered']>, string> = {
  rerun: 'rerun of an interrupted attempt',
  'roll-forward': 'roll-forward of an unfinished commit',
};
