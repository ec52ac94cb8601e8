// What the operator said, as the runner's modules take it: the options of an invocation
// (RunnerOptions), and the narrow views of them that leaf functions take.
import type { Timeouts } from '../../core/store/store.js';

/** Everything a runner invocation needs, normalized; paths are absolute. */
export interface RunnerOptions {
  inbox: string;
  state: string;
  db: string;
  /** The database time-outs, as upload-domains takes them (the database itself goes in MASTER_SERVER_DB: never on an argv, which `ps` shows). */
  dbArgs: string[];
  dbTimeouts: Timeouts;
  queueDir: string;
  /** Fixed "now" for every run of this invocation, or null (see resolveNow). */
  now: string | null;
  backlogWarn: number;
  /** Passed to filter-url / analyze-dump only when set. */
  keep: string | null;
  /** filter-url's --keep in ms: `keep`, else filter-url's default. */
  keepMs: number;
  resendAfter: string | null;
  /** filter-url's --resend-after in ms: `resendAfter`, else filter-url's default. */
  resendAfterMs: number;
  /** limit-domains' --max-per-domain, or null: no cap, no limit-domains in the chain (see carry.ts). */
  maxPerDomain: number | null;
  /** limit-domains' --carry-keep in ms (its default when unset). */
  carryKeepMs: number;
  maxRejectRatio: string | null;
  memory: string | null;
  logLevel: string;
  /** After a signal, how long the stages get to stop before they are SIGKILLed. */
  killAfterMs: number;
  /** --max-run-time: how long one invocation may run before it stops its chain (see deadline.ts). */
  maxRunTimeMs: number;
  /** The config file read, if any (absolute). */
  config: string | null;
  /** Run with --keep / --resend-after other than those stored with the state, and store these. */
  acceptSettingsChange: boolean;
  /** Commit a reflog whose last line has no LF (by default its run fails). */
  allowUnterminated: boolean;
  /** Start current_log over when it is missing after a committed run (by default the run fails). */
  resetCurrentLog: boolean;
  /** After an invocation that committed a run, remove done/ and rejects files older than this (ms); null: keep all. */
  keepDoneMs: number | null;
  /** Where the Prometheus textfile goes after every invocation that takes the lock, or null. */
  metricsFile: string | null;
  /** This master's name in the claims of hours (--master-name, default the host name). */
  masterName: string;
  /** How long another master's unconfirmed claim of an hour holds before this one may take it over (ms). */
  claimLeaseMs: number;
}

/** The inbox and the state directory. */
export type StateDirs = Pick<RunnerOptions, 'inbox' | 'state'>;

/** What the partner database is opened with. */
export type DbOptions = Pick<RunnerOptions, 'db' | 'dbTimeouts'>;

/** What the claims of hours use. */
export type ClaimOptions = Pick<RunnerOptions, 'state' | 'db' | 'dbTimeouts' | 'masterName' | 'claimLeaseMs'>;

/** What the settings stored with the state are compared with. */
export type SettingsOptions = Pick<RunnerOptions, 'state' | 'keepMs' | 'resendAfterMs' | 'maxPerDomain' | 'carryKeepMs' | 'acceptSettingsChange'>;
