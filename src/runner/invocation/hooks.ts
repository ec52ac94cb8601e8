// What the commit says on the way, as an invocation hears it (commit.ts's CommitHooks):
// warnings, the records it writes, the summary line of a finished run; and the test
// failpoint before each step.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { visibleName } from '../../core/errors.js';
import type { CommitHooks } from '../commit/hooks.js';
import type { RunnerOptions } from '../options/types.js';
import type { RunRecord } from '../state/run-record.js';
import type { Say } from '../say.js';
import { stagingDir, stagingLayout } from '../state/layout.js';

/** The commit hooks of an invocation: they warn, push the records they are given and print finished runs' lines. */
export function commitHooks(o: RunnerOptions, say: Say, records: RunRecord[], report: (r: RunRecord) => void): CommitHooks {
  return {
    beforeStep: failpoint(),
    backlogWarn(id, b, limit) {
      say.warn(`Yacobot ${id} has ${b.urls} URLs in ${b.files} queue files not taken away (more than ${limit})`, {
        fields: { yacobot: id, queue_files: b.files, urls: b.urls, limit },
        msg: 'backlog: Yacobot has more URLs waiting than --backlog-warn',
      });
    },
    recorded(r, appended) {
      // A roll forward of a run whose line an earlier invocation wrote and whose summary
      // line it printed (an error after the commit that persists: every invocation rolls
      // it forward) says so, instead of printing that run's summary line once more.
      if (appended || !fs.existsSync(reportedMarker(o, r.run))) {
        records.push(r);
        return;
      }
      say.tell(`run ${visibleName(r.run)}: already recorded and reported by an earlier invocation; finishing its publish steps`, {
        fields: { run: r.run },
        msg: 'already recorded and reported by an earlier invocation; finishing its publish steps',
      });
    },
    finished(run) {
      // Printed now, not at the end: once COMMIT is gone, an invocation killed later
      // (in the next run's chain) left the run's line unprinted, and nothing rolled it forward.
      for (const r of records) if (r.run === run && r.status === 'ok') report(r);
    },
    reflogReplaced(run, file) {
      say.warn(
        `${visibleName(file)} is not the file run ${visibleName(run)} read (another file was renamed over it meanwhile); ` +
          `it stays in the inbox and the next invocation processes it as a re-sent hour`,
        { fields: { run, reflog: file }, msg: 'another file was renamed over the reflog while its run was in progress; left in the inbox' },
      );
    },
    archiveKept(run, archived, kept) {
      say.warn(
        `${visibleName(run)}: ${visibleName(archived)}, the reflog an earlier run of this name read, is kept as ${visibleName(path.basename(kept))} (this run's takes its name)`,
        {
          fields: { run, archived, kept },
          msg: 'the reflog an earlier run of this name archived is kept under another name',
        },
      );
    },
  };
}

/** STATE/staging/RUN/reported: the summary line of committed run RUN was printed. */
export function reportedMarker(o: Pick<RunnerOptions, 'state'>, run: string): string {
  return stagingLayout(stagingDir(o.state, run)).reported;
}

/**
 * Test hook: REFLOG_RUNNER_FAILPOINT="RUN:STEP" (or "*:STEP") makes the runner
 * SIGKILL itself just before that step (chain: the chain's start; claim: the claim
 * of the hour; staging:memory, staging:queues: current_log's backup and the queue files
 * staged for COMMIT; the commit steps: commit, commit:marker (COMMIT itself, after the staged files were made
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
