// The commit protocol of one run. Once STATE/staging/RUN/COMMIT exists (written durably after
// everything staged was fsynced), the run is decided: its publish steps are run in
// order, each idempotent, and the next invocation re-runs all of them after a crash
// ("roll forward"). Without COMMIT, nothing outside the staging area (and the
// database) was touched, and the run is redone from scratch.
//
// Order, and why:
//   0. (before COMMIT) prepareQueues (queue.ts) copies each staged queue file to
//                 QUEUE/<id>/.<RUN>.tsv.publish and fsyncs it: a queue side that
//                 cannot take them all (full, read-only, a path that is a file)
//                 fails the run before anything is published. Then the run claims its
//                 hour (claims.ts), and writeCommit (marker.ts) makes everything staged
//                 durable and writes COMMIT.
//   0a. confirm   (after COMMIT, before this list; claims.ts) the claim of the hour is
//                 confirmed; when another master published the hour meanwhile, the run
//                 publishes no queue file and remembers the hour (step 1 has nothing
//                 to do). A roll forward confirms again.
//   1. queue      rename QUEUE/<id>/.<RUN>.tsv.publish to QUEUE/<id>/<RUN>.tsv
//                 (copied again from staging when a crash left no prepared copy, or
//                 on a roll forward one that differs: cut by a crash while copied again),
//                 then remove the staged file: a roll forward skips a Yacobot whose
//                 staged file is gone, so an error that persists in a later step
//                 does not hand the file out again at every invocation (a crash
//                 between the rename and the removal publishes it once more).
//                 First, so that URLs are handed out before the state that says
//                 they were sent (at-least-once even if the staging area were lost).
//   2. current_log rename the staged file over STATE/current_log, then the staged
//                 copy of it (made before COMMIT) over STATE/current_log.last, the
//                 backup (each skipped when the staged file is gone: renamed before a
//                 crash; a marker of a runner before the copy makes the backup a hard link).
//   2a. carry     rename the staged carry (a run with limit-domains in its chain) over
//                 STATE/carry, then the staged copy of the carry the run leaves (made
//                 before COMMIT) over STATE/carry.last (each skipped when gone).
//   2b. settings  write the run's --keep and --resend-after to STATE/settings.json,
//                 with what keyed its URLs (the parser and keying options, state/keying.ts).
//   2c. memory    write the identities (size, URL count, SHA-256) of current_log and
//                 the carry, and the replay warning's reference, to STATE/memory.json
//                 (state/memory.ts): the next run checks both against it before reading them.
//   3. rejects    rename staged rejects to STATE/rejects/RUN.tsv; with none, remove
//                 a STATE/rejects/RUN.tsv an earlier commit of the name left (that
//                 file is the last committed run's). Then remove the rejects of a
//                 failed attempt, STATE/rejects/failed/RUN.tsv: this run explains
//                 that reflog now. Each part is skipped when done before a crash.
//   4. record     count the backlog, append the runs.jsonl line unless the last
//                 line already is this run's (run_id); a torn last line is cut.
//   5. reflog     move INBOX/RUN.reflog to STATE/done/, only while it is still the
//                 file the run read (marker.ts's reflogFile: device, inode, size, mtime). The
//                 inbox is the to-do list: the reflog leaves it only after all of
//                 the above are durable, and another file renamed over its name
//                 meanwhile (a re-sent hour) stays there, for the next invocation.
//                 It is parked under a dot name (archive.ts's parkedPath) by one rename, checked
//                 there, where nothing else renames over it, and moved on from there
//                 (renamed, copied across file systems, or a relative link made anew);
//                 a newcomer parked in its place is put back (putBack). A symlink
//                 whose target went after the run read it is moved too when it is the
//                 link the run read through (reflogLink: its own identity).
//   6. uncommit   the run's summary line is printed (hooks.finished), then COMMIT is
//                 removed: from here a crash leaves a directory that start-up removes
//                 (its reflog has left the inbox), and nothing would print that line.
//   7. cleanup    remove the staging directory (staged files, run.json).
import { DataError } from '../../core/errors.js';
import type { CommitHooks, Step } from './hooks.js';
import type { CommitPlan } from './marker.js';
import { queueStep } from './queue.js';
import { reflogStep } from './archive.js';
import { carryStep, cleanupStep, currentLogStep, memoryStep, recordStep, rejectsStep, settingsStep, uncommitStep } from './state-steps.js';

/** The publish steps of a committed run, in the order above. */
export function publishSteps(plan: CommitPlan, hooks: CommitHooks = {}, recovered = false): Step[] {
  const steps: Step[] = plan.queue.map((q) => queueStep(plan, q.yacobot, recovered));
  steps.push(currentLogStep(plan), carryStep(plan), settingsStep(plan), memoryStep(plan));
  steps.push(rejectsStep(plan), recordStep(plan, hooks, recovered), reflogStep(plan, hooks));
  steps.push(uncommitStep(plan, hooks), cleanupStep(plan));
  return steps;
}

/** What each publish step does, for a message on what still waits. */
function stepWork(step: string): string {
  if (step.startsWith('queue:')) return `publish the queue file of Yacobot ${step.slice('queue:'.length)}`;
  const work: Record<string, string> = {
    current_log: 'replace current_log',
    carry: 'replace the carry',
    settings: 'store its settings',
    memory: 'record the identities of current_log and the carry',
    rejects: 'keep its rejects',
    record: 'append its runs.jsonl line',
    reflog: 'move its reflog to done/',
    uncommit: 'remove its staging area',
  };
  return work[step] ?? '';
}

/**
 * Runs every publish step of a committed run (first time or roll forward). A step that
 * fails throws a DataError that says the run is committed and which steps still wait.
 */
export function publish(plan: CommitPlan, hooks: CommitHooks = {}, recovered = false): void {
  const steps = publishSteps(plan, hooks, recovered);
  steps.forEach((s, i) => {
    hooks.beforeStep?.(plan.run, s.name);
    try {
      s.run();
    } catch (err) {
      if (!(err instanceof DataError)) throw err;
      const waiting = [
        ...new Set(
          steps
            .slice(i)
            .map((t) => stepWork(t.name))
            .filter((w) => w !== ''),
        ),
      ].join(', ');
      throw new DataError(
        err.code,
        `${err.message}; run ${plan.run} is committed, nothing of it is lost: still waiting: ${waiting}, which the next invocation does once this is fixed`,
        err.place,
      );
    }
  });
}
