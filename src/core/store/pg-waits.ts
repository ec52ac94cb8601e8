// Every wait on PostgreSQL bounded by the client, not only by the server: a server that
// is stopped or hung, or a network cut after a statement was sent, never answers, and
// the server's own statement_timeout cannot speak for it.
import type * as Pg from 'pg';
import { DataError } from '../errors.js';
import type { Timeouts } from './store.js';

/** Idle time before the first TCP keepalive probe: a connection cut while idle is found by the kernel. */
export const KEEPALIVE_MS = 10_000;

/** How long closing a connection waits for the server's goodbye before cutting it. */
export const CLOSE_WAIT_MS = 2_000;

/**
 * How long the client waits for the answer to one statement: --statement-timeout and a
 * margin (a tenth, at least 2 s), so that the server's own limit, with its clearer
 * message, speaks first when the server is alive; 0 (no limit) when it is 0.
 */
export function answerTimeoutMs(t: Timeouts): number {
  return t.statementMs === 0 ? 0 : t.statementMs + Math.max(2000, Math.round(t.statementMs / 10));
}

/** The node-postgres client settings that bound its waits once connected (connectionTimeoutMillis bounds the connect). */
export function clientBounds(t: Timeouts): Pick<Pg.ClientConfig, 'query_timeout' | 'keepAlive' | 'keepAliveInitialDelayMillis'> {
  const answer = answerTimeoutMs(t);
  return { ...(answer > 0 && { query_timeout: answer }), keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_MS };
}

/** Whether `err` is node-postgres' query_timeout: no answer came in time. */
export function isNoAnswer(err: unknown): boolean {
  return err instanceof Error && err.message === 'Query read timeout';
}

/** The error of a statement that got no answer within answerTimeoutMs (`name`: the database without its password). */
export function noAnswerError(name: string, where: string, t: Timeouts): DataError {
  const s = (ms: number) => `${Math.round(ms / 100) / 10} s`;
  return new DataError(
    'DB',
    `database error: cannot reach PostgreSQL at ${where}: no answer within ${s(answerTimeoutMs(t))} ` +
      `(--statement-timeout ${s(t.statementMs)} and a margin): the server is stopped or hung, or the network is cut`,
    { file: name },
  );
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
