// What the steps of one run share.
import type { CommitHooks } from '../commit/hooks.js';
import type { RunnerOptions } from '../options/types.js';
import type { Say } from '../say.js';
import type { ReflogIdentity } from '../state/inbox.js';
import type { RunPaths } from '../state/layout.js';
import type { CommittedNow } from '../state/run-history.js';
import type { RekeyReport } from '../state/run-record.js';
import type { StageOutcome } from './stage-log.js';

/** One run's context: the invocation's settings and what its place among the invocation's runs decides. */
export interface RunContext {
  o: RunnerOptions;
  say: Say;
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
export interface ChainResult {
  outcomes: StageOutcome[];
  reflogFile: ReflogIdentity | null;
  reflogLink: ReflogIdentity | null | undefined;
  head: Buffer | null;
  /** The reflog's SHA-256, null when the chain did not read it to its end. */
  digest: string | null;
  /** current_log re-keyed before the chain (rekey.ts). */
  rekeyed?: RekeyReport;
}
