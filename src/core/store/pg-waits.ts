// Every wait on PostgreSQL bounded by the client, not only by the server: a server that
// is stopped or hung, or a network cut after a statement was sent, never answers, and
// the server's own statement_timeout cannot speak for it. A server that stopped
// answering is not a slow statement: each round trip (a statement, a batch, a COMMIT,
// one try of the write lock) waits for its answer at most --answer-timeout, and every
// statement the programs send is small enough to answer well within it; the server's
// own limits sit below that bound, so that a live server says itself what took long.
import type * as Pg from 'pg';
import { DataError } from '../errors.js';
import type { Timeouts } from './store.js';

/** Idle time before the first TCP keepalive probe: a connection cut while idle is found by the kernel. */
export const KEEPALIVE_MS = 10_000;

/** How long closing a connection waits for the server's goodbye before cutting it. */
export const CLOSE_WAIT_MS = 2_000;

/** The time a server's own answer is given to arrive before the client's bound: a tenth, at least 1 s, at most half. */
function marginMs(ms: number): number {
  return Math.min(ms / 2, Math.max(1000, Math.round(ms / 10)));
}

/** The smallest of the limits that are set (0: none), or 0 when none is. */
function smallest(...ms: number[]): number {
  const set = ms.filter((x) => x > 0);
  return set.length === 0 ? 0 : Math.min(...set);
}

/**
 * How long the client waits for the answer to one request: --answer-timeout; when that
 * is 0, the server's statement limit and a margin (a tenth, at least 1 s); 0 (no
 * limit) when both are 0.
 */
export function answerTimeoutMs(t: Timeouts): number {
  if (t.answerMs > 0) return t.answerMs;
  return t.statementMs === 0 ? 0 : t.statementMs + marginMs(t.statementMs);
}

/**
 * The server's statement_timeout: --statement-timeout, lowered to --answer-timeout less
 * a margin when it is not below that, so that a live server cancels a long statement
 * itself (and says so) before the client would give up on its answer.
 */
export function serverStatementMs(t: Timeouts): number {
  return smallest(t.statementMs, t.answerMs > 0 ? t.answerMs - marginMs(t.answerMs) : 0);
}

/** The server's lock_timeout for a lock wait inside one statement: --lock-timeout, at most the statement's own limit. */
export function serverLockMs(t: Timeouts): number {
  return smallest(t.lockMs, serverStatementMs(t));
}

/** The node-postgres client settings that bound its waits (connectionTimeoutMillis bounds the connect). */
export function clientBounds(
  t: Timeouts,
): Pick<Pg.ClientConfig, 'query_timeout' | 'statement_timeout' | 'lock_timeout' | 'keepAlive' | 'keepAliveInitialDelayMillis'> {
  const answer = answerTimeoutMs(t);
  return {
    ...(answer > 0 && { query_timeout: answer }),
    statement_timeout: serverStatementMs(t),
    lock_timeout: serverLockMs(t),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_MS,
  };
}

/** Whether `err` is node-postgres' query_timeout: no answer came in time. */
export function isNoAnswer(err: unknown): boolean {
  return err instanceof Error && err.message === 'Query read timeout';
}

/** Seconds as messages give them: one decimal at most. */
export function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

/** The error of a request that got no answer within answerTimeoutMs (`name`: the database without its password). */
export function noAnswerError(name: string, where: string, t: Timeouts): DataError {
  const bound = t.answerMs > 0 ? '--answer-timeout' : `--statement-timeout ${seconds(t.statementMs)} and a margin`;
  return new DataError(
    'DB',
    `database error: cannot reach PostgreSQL at ${where}: no answer within ${seconds(answerTimeoutMs(t))} (${bound}): ` +
      'the server is stopped or hung, or the network is cut',
    { file: name },
  );
}

/** Whether `err` is node-postgres' connectionTimeoutMillis: the connection was not made in time. */
export function isConnectTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === 'timeout expired';
}

/** The error of a connection not made within --connect-timeout. */
export function noConnectionError(name: string, where: string, t: Timeouts): DataError {
  return new DataError(
    'DB',
    `database error: cannot reach PostgreSQL at ${where}: no connection within ${seconds(t.connectMs)} (--connect-timeout): ` +
      'the server is stopped or hung, or the network is cut',
    { file: name },
  );
}

/** The longest pause between two tries of a lock held by another. */
const LOCK_POLL_MAX_MS = 500;

/**
 * Takes a lock by tries (`tryOnce`, one short round trip each, true once it is held),
 * pausing between them up to LOCK_POLL_MAX_MS, for at most `lockMs` (0: no limit): a
 * wait for another writer is never one long silent round trip. Then `busy()`, thrown.
 */
export async function takeLockByTries(tryOnce: () => Promise<boolean>, lockMs: number, busy: () => unknown): Promise<void> {
  const until = Date.now() + lockMs;
  for (let pause = 20; !(await tryOnce()); pause = Math.min(LOCK_POLL_MAX_MS, pause * 2)) {
    const left = until - Date.now();
    if (lockMs > 0 && left <= 0) throw busy();
    await new Promise((resolve) => setTimeout(resolve, lockMs > 0 ? Math.min(pause, left) : pause));
  }
}

/** Ends `client`'s connection, cutting it when the server has not said goodbye within CLOSE_WAIT_MS. */
export async function closeBounded(client: Pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), CLOSE_WAIT_MS);
  });
  const ended = client.end().catch(() => undefined);
  if ((await Promise.race([ended, late])) === 'late') client.connection.stream.destroy();
  clearTimeout(timer);
}
