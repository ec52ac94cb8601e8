// STATE/last-invocation.json: how the last invocation of the runner ended, written
// atomically at every exit whose state directory exists, so that status sees a lock-busy
// or config-error exit too, which leaves no line in runs.jsonl. It also carries the last
// committed run forward, for when runs.jsonl's tail no longer holds one.
import * as fs from 'node:fs';
import { writeFileDurable } from '../../core/durable.js';
import { redactDeep } from '../../core/secrets.js';
import { readIdentity } from './identity.js';
import { stateLayout } from './layout.js';
import { lastCommitted } from './run-history.js';

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

/**
 * A state fenced as a copy (commit/fence.ts): another copy of it holds its identity,
 * so it publishes nothing until it is given a new identity.
 */
export interface Fenced {
  /** The state's identity (STATE/identity.json's id). */
  identity: string;
  /** The master name, place (host:directory) and time of the copy that holds it. */
  master: string;
  place: string;
  seen_at: string;
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
  /** The state is a copy another copy outran: found by this invocation or an earlier one, under the identity it still has; absent or null when not. */
  fenced?: Fenced | null;
}

/** What main() learns while an invocation goes: whether it took the lock, which runs it committed. */
export interface Seen {
  started: Date;
  lock: boolean;
  committed: string[];
  /** How the state's fence stood when this invocation asked (null: not fenced); undefined when it did not ask (it claimed no hour). */
  fenced?: Fenced | null;
}

/** The result an exit status stands for; 0 is split by whether runs were committed. */
export function resultOf(exit: number, committed: number): InvocationResult {
  if (exit === 0) return committed > 0 ? 'committed' : 'nothing to do';
  if (exit === 2) return 'config error';
  if (exit === 75) return 'locked';
  return exit > 128 ? 'stopped' : 'failed';
}

/** The last-invocation record of an invocation that ends now with `exit`; `records`: runs.jsonl's tail. */
export function invocationRecord(state: string, seen: Seen, exit: number, error: string | null, records: readonly unknown[]): LastInvocation {
  const end = new Date();
  const previous = readLastInvocation(state);
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
    last_success: lastSuccess(records, previous),
    fenced: seen.fenced !== undefined ? seen.fenced : fencedNow(state, previous),
  };
}

/**
 * Whether the state is fenced as invocation record `rec` found it: its `fenced`, while
 * the state still has the identity that was fenced (new-identity gives it another);
 * null otherwise, and when the identity cannot be read.
 */
export function fencedNow(state: string, rec: LastInvocation | null): Fenced | null {
  const f = rec?.fenced;
  if (f === undefined || f === null) return null;
  try {
    return readIdentity(state)?.id === f.identity ? f : null;
  } catch {
    return null;
  }
}

/** Writes `rec` to STATE/last-invocation.json (temp file and rename); false, saying nothing, when the state directory is missing. */
export function writeLastInvocation(state: string, rec: LastInvocation): boolean {
  if (!fs.statSync(state, { throwIfNoEntry: false })?.isDirectory()) return false;
  writeFileDurable(stateLayout(state).lastInvocation, JSON.stringify(redactDeep(rec)) + '\n');
  return true;
}

/** STATE/last-invocation.json, or null when it is missing or not such a record. */
export function readLastInvocation(state: string): LastInvocation | null {
  try {
    const j = JSON.parse(fs.readFileSync(stateLayout(state).lastInvocation, 'utf8')) as LastInvocation;
    return typeof j.result === 'string' && typeof j.exit === 'number' && typeof j.at === 'string' ? j : null;
  } catch {
    return null;
  }
}

/** The last committed run: from `records` (runs.jsonl's tail), else as the last invocation carried it forward. */
export function lastSuccess(records: readonly unknown[], previous: LastInvocation | null): LastSuccess | null {
  const r = lastCommitted(records);
  if (r === null) return previous?.last_success ?? null;
  const at = new Date(Date.parse(r.start) + r.seconds * 1000).toISOString();
  return { run: r.run, at, seconds: r.seconds, ...(typeof r.published_by === 'string' && { published_by: r.published_by }) };
}
