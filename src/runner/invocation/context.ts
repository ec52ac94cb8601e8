// What the steps of one invocation share.
import type { CommitHooks } from '../commit/hooks.js';
import type { RunnerOptions } from '../options/types.js';
import type { RunRecord } from '../state/run-record.js';
import type { Say } from '../say.js';
import type { Deadline } from './deadline.js';

/** What one invocation's steps share: its options, what recovery and planning found, and how its runs ended. */
export interface Invocation {
  o: RunnerOptions;
  say: Say;
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
