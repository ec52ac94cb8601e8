// STATE/staging/RUN/COMMIT, the marker that decides a run: everything its publish
// needs (absolute paths), written durably once the staged outputs are on disk.
import * as fs from 'node:fs';
import { fsyncTree, writeFileDurable } from '../../core/durable.js';
import { ioError } from '../../core/errors.js';
import type { HourClaimRef } from '../../core/store/claims.js';
import type { KeyedBy } from '../state/keying.js';
import type { ReflogIdentity } from '../state/inbox.js';
import { stagingLayout } from '../state/layout.js';
import type { MemoryRecord } from '../state/memory.js';
import type { RunRecord } from '../state/run-record.js';
import type { CommitHooks } from './hooks.js';

/** Everything the publish needs, recorded in the COMMIT marker (absolute paths). */
export interface CommitPlan {
  version: 1;
  run: string;
  staging: string;
  state: string;
  reflog: string;
  /** The file the run read at `reflog`; absent in markers of runners before it was recorded. */
  reflogFile?: ReflogIdentity;
  /**
   * The inbox entry the run read it through: the symlink's own identity (lstat), or null
   * when `reflog` was the file itself; absent when that could not be told, and in markers
   * of runners before it was recorded.
   */
  reflogLink?: ReflogIdentity | null;
  queueDir: string;
  /** The name of the run's queue files when it is not the run's (a replay beside untaken files of the name); absent: the run's. */
  queueName?: string;
  backlogWarn: number;
  /** Staged queue files: QUEUE/<yacobot>/<RUN>.tsv comes from <staging>/work/queue/<yacobot>/<RUN>.tsv. */
  queue: { yacobot: string; urls: number }[];
  record: RunRecord;
  /** What keyed the run's URLs (rekey.ts), stored with its settings; absent in markers of runners before it. */
  keyedBy?: KeyedBy;
  /** The run's claim of its hour, confirmed before the queue files are published (runner/claims.ts); absent: nothing to confirm. */
  claim?: HourClaimRef;
  /** What STATE/memory.json records after the commit; absent in markers of runners before it was recorded. */
  memory?: MemoryRecord;
}

/**
 * Makes the staged outputs durable and writes the COMMIT marker: from here on the
 * run will be published, by this process or by the next one.
 */
export function writeCommit(plan: CommitPlan, hooks: CommitHooks = {}): void {
  const S = stagingLayout(plan.staging);
  // The spill directory is not published; the rest must be on disk first. The stage
  // logs stay until cleanup: until COMMIT is durable, a crash recovery reads what
  // upload-domains assigned from them.
  fs.rmSync(S.tmp, { recursive: true, force: true });
  fsyncTree(S.work);
  hooks.beforeStep?.(plan.run, 'commit:marker');
  writeFileDurable(S.commit, JSON.stringify(plan, null, 1) + '\n');
}

/** Reads a COMMIT marker; null when there is none. */
export function readCommit(staging: string): CommitPlan | null {
  const f = stagingLayout(staging).commit;
  let text: string;
  try {
    text = fs.readFileSync(f, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw ioError(err, f, 'read');
  }
  try {
    const plan = JSON.parse(text) as CommitPlan;
    if (plan.version !== 1) throw new Error('unknown version');
    return plan;
  } catch (err) {
    // Written by rename after fsync, so it is whole; anything else is not ours to guess at.
    throw ioError(
      new Error(`damaged COMMIT marker (${(err as Error).message}); see "A COMMIT marker the runner cannot read" in docs/operations.md`),
      f,
      'read',
    );
  }
}
