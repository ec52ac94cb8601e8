// STATE/last-invocation.json: how the last invocation of the runner ended, written
// atomically at every exit whose state directory exists, so that status sees a lock-busy
// or config-error exit too, which leaves no line in runs.jsonl. It also carries the last
// committed run forward, for when runs.jsonl's tail no longer holds one.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from '../core/errors.js';
import { redactDeep } from '../core/secrets.js';
import { writeFileDurable } from '../core/durable.js';
import { tailRecords } from './state/runs-log.js';
import { parseArgs, parseConfig } from './options.js';
import type { RunRecord } from './plan.js';

export const LAST_INVOCATION = 'last-invocation.json';

/** How an invocation ended, by its exit status. */
export type InvocationResult = 'committed' | 'nothing to do' | 'failed' | 'config error' | 'locked' | 'stopped';

/** The last committed run: its name, when it committed (ISO), how long it took. */
export interface LastSuccess {
  run: string;
  at: string;
  seconds: number;
  /** Another master published the run's hour: this master remembered it, published nothing. */
  published_by?: string;
}

/** The content of STATE/last-invocation.json. */
export interface LastInvocation {
  result: InvocationResult;
  /** Whether the invocation did its work (committed runs, or had nothing to do). */
  success: boolean;
  exit: number;
  /** When it ended (ISO). */
  at: string;
  started: string;
  seconds: number;
  pid: number;
  /** The runs it committed. */
  runs: string[];
  error: string | null;
  last_success: LastSuccess | null;
  /** Why its --metrics-file could not be written (naming the file); absent or null when it was, or none was asked for. */
  metrics_error?: string | null;
}

/** What main() learns while an invocation goes: whether it took the lock, which runs it committed. */
export interface Seen {
  started: Date;
  lock: boolean;
  committed: string[];
}

/** The result an exit status stands for; 0 is split by whether runs were committed. */
export function resultOf(exit: number, committed: number): InvocationResult {
  if (exit === 0) return committed > 0 ? 'committed' : 'nothing to do';
  if (exit === 2) return 'config error';
  if (exit === 75) return 'locked';
  return exit > 128 ? 'stopped' : 'failed';
}

/** The last-invocation record of an invocation that ends now with `exit`. */
export function invocationRecord(state: string, seen: Seen, exit: number, error: string | null): LastInvocation {
  const end = new Date();
  return {
    result: resultOf(exit, seen.committed.length),
    success: exit === 0,
    exit,
    at: end.toISOString(),
    started: seen.started.toISOString(),
    seconds: Math.round((end.getTime() - seen.started.getTime()) / 100) / 10,
    pid: process.pid,
    runs: seen.committed,
    error,
    last_success: lastSuccess(state, readLastInvocation(state)),
  };
}

/** Writes `rec` to STATE/last-invocation.json (temp file and rename); false, saying nothing, when the state directory is missing. */
export function writeLastInvocation(state: string, rec: LastInvocation): boolean {
  if (!fs.statSync(state, { throwIfNoEntry: false })?.isDirectory()) return false;
  writeFileDurable(path.join(state, LAST_INVOCATION), JSON.stringify(redactDeep(rec)) + '\n');
  return true;
}

/** STATE/last-invocation.json, or null when it is missing or not such a record. */
export function readLastInvocation(state: string): LastInvocation | null {
  try {
    const j = JSON.parse(fs.readFileSync(path.join(state, LAST_INVOCATION), 'utf8')) as LastInvocation;
    return typeof j.result === 'string' && typeof j.exit === 'number' && typeof j.at === 'string' ? j : null;
  } catch {
    return null;
  }
}

/** The newest committed run in the last MiB of STATE/runs.jsonl, or null. */
export function lastCommittedRun(state: string): RunRecord | null {
  const records = tailRecords(path.join(state, 'runs.jsonl')) as Partial<RunRecord>[];
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.status === 'ok' && typeof r.run === 'string' && typeof r.start === 'string' && typeof r.seconds === 'number') return r as RunRecord;
  }
  return null;
}

/** The last committed run: from runs.jsonl, else as the last invocation carried it forward. */
export function lastSuccess(state: string, previous: LastInvocation | null): LastSuccess | null {
  const r = lastCommittedRun(state);
  if (r === null) return previous?.last_success ?? null;
  const at = new Date(Date.parse(r.start) + r.seconds * 1000).toISOString();
  return { run: r.run, at, seconds: r.seconds, ...(typeof r.published_by === 'string' && { published_by: r.published_by }) };
}

/**
 * The state directory of a command line that parseArgs refused, as far as it can be
 * told: --state, else the config file's state key, else the default; null when the
 * config file, refused too, does not say.
 */
export function stateOfRefused(argv: readonly string[], cwd: string): string | null {
  const withState = flagsOf(argv, ['--state', '--config']);
  const stateOnly = flagsOf(argv, ['--state']);
  for (const args of stateOnly.length > 0 ? [withState, stateOnly] : [withState]) {
    try {
      const o = parseArgs(args, cwd);
      return typeof o === 'string' ? null : o.state;
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
    }
  }
  // The config file has another bad line or value: its state key alone, if it has one.
  const file = configArg(withState);
  if (file === null || file === '') return null;
  try {
    const where = path.resolve(cwd, file);
    const lines = fs.readFileSync(where, 'utf8').split('\n');
    const state = parseConfig(lines.map((l) => (/^\s*state\s*=/.test(l) ? l : '')).join('\n'), file).get('state')?.value;
    return state ? path.resolve(path.dirname(where), state) : null;
  } catch {
    return null;
  }
}

/** The options of `argv` named in `names`, each with its value. */
function flagsOf(argv: readonly string[], names: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!names.includes(a.split('=', 1)[0]!)) continue;
    kept.push(a);
    if (!a.includes('=') && i + 1 < argv.length) kept.push(argv[++i]!);
  }
  return kept;
}

/** The value of the last --config of `flags` (as flagsOf gives them), or null. */
function configArg(flags: readonly string[]): string | null {
  let file: string | null = null;
  for (let i = 0; i < flags.length; i++) {
    if (flags[i] === '--config') file = flags[++i] ?? null;
    else if (flags[i]!.startsWith('--config=')) file = flags[i]!.slice('--config='.length);
  }
  return file;
}
