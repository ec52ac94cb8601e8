// The queue files of a run: step 0, each copied beside its place before COMMIT (a queue
// side that cannot take them fails the run, nothing published), and step 1, published.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { mkdirDurable, prepareCopy, preparedPath, publishCopy, renameIntoPlace, sameBytes } from '../../core/durable.js';
import { DataError, ioError } from '../../core/errors.js';
import { stagingLayout } from '../state/layout.js';
import { isYacobotDir, publishedQueueFile } from '../state/queue-dir.js';
import type { Step } from './hooks.js';
import type { CommitPlan } from './marker.js';

/** The staged queue file of a Yacobot. */
function stagedQueueFile(plan: Pick<CommitPlan, 'staging' | 'run' | 'queueName'>, yacobot: string): string {
  return stagingLayout(plan.staging).queueFile(yacobot, plan.queueName ?? plan.run);
}

/**
 * Step 0: copies every staged queue file beside its destination, fsynced, before
 * the COMMIT. On failure the copies made are removed and the error is thrown: the
 * run fails with no queue file published. A queue file of the same name already
 * there with other bytes is such a failure: replacing it would lose URLs that
 * current_log records as sent (queueNameFor gives a replay beside untaken files a name
 * of its own, so only a file that came under that name since can do it).
 */
export function prepareQueues(plan: CommitPlan): void {
  // Every such file is named at once: each attempt that finds one more is a whole run.
  const untaken: CommitPlan['queue'] = [];
  for (const q of plan.queue) {
    const dst = publishedQueueFile(plan, q.yacobot);
    try {
      if (fs.statSync(dst).isFile() && !sameBytes(stagedQueueFile(plan, q.yacobot), dst)) untaken.push(q);
    } catch (err) {
      // Not there (ENOTDIR: a file in the way of its directory, which mkdir reports below).
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw ioError(err, dst, 'read');
    }
  }
  if (untaken.length > 0) {
    const [first, ...more] = untaken;
    const also = more.map((q) => `${publishedQueueFile(plan, q.yacobot)} (Yacobot ${q.yacobot})`).join(', ');
    const them = more.length > 0 ? 'them' : 'it';
    throw new DataError(
      'QUEUE_NOT_TAKEN',
      `is still there with other URLs (not yet taken by Yacobot ${first!.yacobot}?)` +
        (more.length > 0 ? `, and so ${more.length > 1 ? 'are' : 'is'} ${also}` : '') +
        `; publishing this run would replace them, and current_log has them as sent. Let the Yacobot${more.length > 0 ? 's' : ''} take ${them}, ` +
        `or move ${them} aside under another *.tsv name in the same directory (which the Yacobot still takes), then run again`,
      { file: publishedQueueFile(plan, first!.yacobot) },
    );
  }
  const made: string[] = [];
  try {
    for (const q of plan.queue) {
      const dst = publishedQueueFile(plan, q.yacobot);
      const staged = stagedQueueFile(plan, q.yacobot);
      mkdirDurable(path.dirname(dst));
      made.push(prepareCopy(staged, dst));
    }
  } catch (err) {
    for (const f of made) fs.rmSync(f, { force: true }); // each was written, so its directory is one
    throw err;
  }
}

/**
 * Removes the copies prepareQueues made for run `run` (QUEUE/<id>/.<RUN>.tsv.publish)
 * that no COMMIT will publish: those of an attempt killed between its copies and its
 * COMMIT, found by start-up. A retry that made the same files replaced them; one that
 * failed, made no file for that Yacobot, or never came (its reflog taken out of the
 * inbox) left them there for good.
 */
export function removePrepared(queueDir: string, run: string, queueName?: string): void {
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return; // no queue side yet, so no copy there
  }
  for (const id of ids.filter(isYacobotDir)) {
    const f = preparedPath(publishedQueueFile({ queueDir, run, ...(queueName !== undefined && { queueName }) }, id));
    try {
      fs.unlinkSync(f);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw ioError(err, f, 'remove');
    }
    // Durable before the staging area goes: back after a power loss, nothing would remove it.
    fsyncPath(path.dirname(f));
  }
}

/** Step queue:ID: publishes Yacobot `yacobot`'s queue file from its copy beside its place (or its staged file), then removes the staged file. */
export function queueStep(plan: CommitPlan, yacobot: string, recovered: boolean): Step {
  return {
    name: `queue:${yacobot}`,
    run() {
      const dst = publishedQueueFile(plan, yacobot);
      const prepared = preparedPath(dst);
      const staged = stagedQueueFile(plan, yacobot);
      const hasStaged = fs.existsSync(staged);
      // The copy made before COMMIT is whole; a roll forward may also find the copy
      // made below by an earlier roll forward, cut off where a crash stopped it.
      if (fs.existsSync(prepared) && !(recovered && hasStaged && !sameCopy(staged, prepared))) renameIntoPlace(prepared, dst);
      else if (hasStaged) {
        // Renamed before a crash (copying again writes the same bytes), or a COMMIT of an older version.
        mkdirDurable(path.dirname(dst));
        publishCopy(staged, dst);
      } else return; // published: its staged file goes only after that (runners before the uncommit step removed them before COMMIT)
      try {
        fs.rmSync(staged, { force: true });
      } catch (err) {
        throw ioError(err, staged, 'remove');
      }
      fsyncPath(path.dirname(staged));
    },
  };
}

/** Whether `copy` holds the bytes of `staged` (a DataError naming the copy if either cannot be read). */
function sameCopy(staged: string, copy: string): boolean {
  try {
    return sameBytes(staged, copy);
  } catch (err) {
    throw ioError(err, copy, 'compare with its staged file');
  }
}
