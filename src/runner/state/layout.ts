// Every path under STATE, the state directory (docs/formats-and-rules.md "The state
// directory"), and under a run's staging area STATE/staging/RUN/: the one place their
// names are written.
import * as path from 'node:path';

/** The files and directories of a state directory. */
export interface StateLayout {
  dir: string;
  /** runs.jsonl: a line per run. */
  runs: string;
  currentLog: string;
  /** current_log.last: a copy of the current_log the last commit left. */
  currentLogLast: string;
  carry: string;
  /** memory.json: current_log's identity, the replay warning's reference. */
  memory: string;
  /** settings.json: the settings that decide what current_log holds. */
  settings: string;
  /** last-run.json: the last committed run's record. */
  lastRun: string;
  /** last-invocation.json: how the last invocation ended. */
  lastInvocation: string;
  lock: string;
  /** partner.db: the default --db. */
  partnerDb: string;
  staging: string;
  done: string;
  rejects: string;
  /** rejects/failed: the rejects of failed attempts. */
  rejectsFailed: string;
}

/** The layout of state directory `state`. */
export function stateLayout(state: string): StateLayout {
  const at = (name: string) => path.join(state, name);
  return {
    dir: state,
    runs: at('runs.jsonl'),
    currentLog: at('current_log'),
    currentLogLast: at('current_log.last'),
    carry: at('carry'),
    memory: at('memory.json'),
    settings: at('settings.json'),
    lastRun: at('last-run.json'),
    lastInvocation: at('last-invocation.json'),
    lock: at('lock'),
    partnerDb: at('partner.db'),
    staging: at('staging'),
    done: at('done'),
    rejects: at('rejects'),
    rejectsFailed: path.join(state, 'rejects', 'failed'),
  };
}

/** The directories a run's commit writes into (besides the state directory itself and runs.jsonl). */
export const COMMIT_WRITES: readonly (keyof StateLayout)[] = ['done', 'rejects', 'rejectsFailed', 'staging'];

/** The files of one run's staging area, STATE/staging/RUN/. */
export interface StagingLayout {
  dir: string;
  /** run.json: the attempt (its now, its queue name). */
  runJson: string;
  /** COMMIT: the marker that decides the run. */
  commit: string;
  /** reported: the summary line of the committed run was printed. */
  reported: string;
  /** work/: what the chain stages. */
  work: string;
  /** work/tmp: the stages' spill files. */
  tmp: string;
  /** work/log: the stages' logs. */
  logs: string;
  /** work/queue: the staged queue files, work/queue/<yacobot>/<queue name>.tsv. */
  queue: string;
  /** work/current_log: the next current_log. */
  currentNext: string;
  /** work/current_log.last: its copy, which the commit makes STATE/current_log.last. */
  currentLast: string;
  /** work/carry: the next carry. */
  carryNext: string;
  /** work/rejects.tsv: analyze-dump's rejects. */
  rejects: string;
  /** work/current_log.rekeyed: current_log re-keyed for this runtime's URL parser. */
  rekeyed: string;
  /** work/log/bash.log: the chain's bash's own stderr. */
  bashLog: string;
  /** The staged queue file of a Yacobot. */
  queueFile(yacobot: string, queueName: string): string;
}

/** The layout of the staging area `dir` (STATE/staging/RUN). */
export function stagingLayout(dir: string): StagingLayout {
  const work = path.join(dir, 'work');
  const logs = path.join(work, 'log');
  const queue = path.join(work, 'queue');
  return {
    dir,
    runJson: path.join(dir, 'run.json'),
    commit: path.join(dir, 'COMMIT'),
    reported: path.join(dir, 'reported'),
    work,
    tmp: path.join(work, 'tmp'),
    logs,
    queue,
    currentNext: path.join(work, 'current_log'),
    currentLast: path.join(work, 'current_log.last'),
    carryNext: path.join(work, 'carry'),
    rejects: path.join(work, 'rejects.tsv'),
    rekeyed: path.join(work, 'current_log.rekeyed'),
    bashLog: path.join(logs, 'bash.log'),
    queueFile: (yacobot, queueName) => path.join(queue, yacobot, `${queueName}.tsv`),
  };
}

/** The staging area of run `run`: STATE/staging/RUN. */
export function stagingDir(state: string, run: string): string {
  return path.join(stateLayout(state).staging, run);
}
