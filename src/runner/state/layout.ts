// Every path under STATE, the state directory (docs/formats-and-rules.md "The state
// directory"), and under a run's staging area STATE/staging/RUN/: the one place their
// names are written.
import * as path from 'node:path';
import { REFLOG_EXT, inboxReflog } from './inbox.js';

/** The files and directories of a state directory. */
export interface StateLayout {
  dir: string;
  /** runs.jsonl: a line per run. */
  runs: string;
  currentLog: string;
  /** current_log.last: a copy of the current_log the last commit left. */
  currentLogLast: string;
  carry: string;
  /** carry.last: a copy of the carry the last commit left. */
  carryLast: string;
  /** memory.json: current_log's identity, the replay warning's reference. */
  memory: string;
  /** settings.json: the settings that decide what current_log holds. */
  settings: string;
  /** last-run.json: the last committed run's record. */
  lastRun: string;
  /** last-invocation.json: how the last invocation ended. */
  lastInvocation: string;
  lock: string;
  /** identity.json: the state's identity, which names its claims of hours. */
  identity: string;
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
    carryLast: at('carry.last'),
    memory: at('memory.json'),
    settings: at('settings.json'),
    lastRun: at('last-run.json'),
    lastInvocation: at('last-invocation.json'),
    lock: at('lock'),
    identity: at('identity.json'),
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
  /** work/carry.last: its copy (or the carry's as it is), which the commit makes STATE/carry.last. */
  carryLast: string;
  /** work/rejects.tsv: analyze-dump's rejects. */
  rejects: string;
  /** work/current_log.rekeyed: current_log re-keyed for this runtime's URL parser. */
  rekeyed: string;
  /** work/carry.rekeyed: the carry re-keyed so. */
  carryRekeyed: string;
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
    carryLast: path.join(work, 'carry.last'),
    rejects: path.join(work, 'rejects.tsv'),
    rekeyed: path.join(work, 'current_log.rekeyed'),
    carryRekeyed: path.join(work, 'carry.rekeyed'),
    bashLog: path.join(logs, 'bash.log'),
    queueFile: (yacobot, queueName) => path.join(queue, yacobot, `${queueName}.tsv`),
  };
}

/** The staging area of run `run`: STATE/staging/RUN. */
export function stagingDir(state: string, run: string): string {
  return path.join(stateLayout(state).staging, run);
}

/** The files of one run's staging area, all under STATE/staging/RUN/. */
export interface RunPaths {
  name: string;
  /** The name of the run's queue files: its own, or a replay's (see RunJson.queue). */
  queueName: string;
  reflog: string;
  staging: string;
  runJson: string;
  commit: string;
  work: string;
  tmp: string;
  logs: string;
  queue: string;
  currentNext: string;
  /** The current_log join-current reads: STATE/current_log, or its re-keyed copy in work/ (rekey.ts). */
  currentIn: string;
  /** The carry limit-domains reads: STATE/carry, or its re-keyed copy in work/ (rekey.ts). */
  carryIn: string;
  rejects: string;
  /** STATE/rejects/RUN.tsv, where the staged rejects are kept. */
  rejectsKept: string;
  /** STATE/rejects/failed/RUN.tsv, where a failed attempt's rejects are kept. */
  rejectsFailed: string;
}

/** The paths of run `name` (`inbox`, `state`: the directories). */
export function runPaths(o: { inbox: string; state: string }, name: string): RunPaths {
  const L = stateLayout(o.state);
  const S = stagingLayout(stagingDir(o.state, name));
  return {
    name,
    queueName: name,
    reflog: inboxReflog(o.inbox, name),
    staging: S.dir,
    runJson: S.runJson,
    commit: S.commit,
    work: S.work,
    tmp: S.tmp,
    logs: S.logs,
    queue: S.queue,
    currentNext: S.currentNext,
    currentIn: L.currentLog,
    carryIn: L.carry,
    rejects: S.rejects,
    rejectsKept: keptRejects(o.state, name),
    rejectsFailed: failedRejects(o.state, name),
  };
}

/** Where a committed run's reflog is archived: STATE/done/RUN.reflog. */
export function doneReflog(state: string, run: string): string {
  return path.join(stateLayout(state).done, run + REFLOG_EXT);
}

/** Where a committed run's rejects are kept: STATE/rejects/RUN.tsv. */
export function keptRejects(state: string, run: string): string {
  return path.join(stateLayout(state).rejects, `${run}.tsv`);
}

/**
 * Where a failed attempt's rejects are kept: STATE/rejects/failed/RUN.tsv, never the
 * name of a committed run's (a replay that fails must leave those), whatever the run
 * names (RUN.failed.tsv would be the rejects of a run named RUN.failed).
 */
export function failedRejects(state: string, run: string): string {
  return path.join(stateLayout(state).rejectsFailed, `${run}.tsv`);
}

/** The log file of stage `i` of a run. */
export function stageLog(p: RunPaths, i: number, name: string): string {
  return path.join(p.logs, `${i}.${name}.log`);
}
