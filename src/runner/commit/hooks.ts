// What the commit's steps are, and what they report on the way (the invocation's
// hooks: invocation/hooks.ts).
import type { RunRecord } from '../state/run-record.js';

/** A named, idempotent publish step. */
export interface Step {
  name: string;
  run(): void;
}

/** Things the steps report on the way (logging stays with the caller). */
export interface CommitHooks {
  /** Called before each step; a test failpoint may kill the process here. */
  beforeStep?(run: string, step: string): void;
  backlogWarn?(yacobot: string, b: { files: number; urls: number }, limit: number): void;
  /** The run's record, and whether it was appended (false: runs.jsonl already ended with it, a roll forward's). */
  recorded?(record: RunRecord, appended: boolean): void;
  /** The file now at `reflog` is not the one the run read: it stays in the inbox. */
  reflogReplaced?(run: string, reflog: string): void;
  /** An earlier run's reflog at done/RUN.reflog, other bytes than this run's, was kept as `kept`. */
  archiveKept?(run: string, archived: string, kept: string): void;
  /**
   * The run is over but for the removal of its COMMIT, which comes right after: the last
   * moment at which a crash still leaves it to a roll forward (what is said here is said
   * again only if the process dies before that removal, never lost).
   */
  finished?(run: string): void;
}
