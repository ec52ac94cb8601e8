// One attempt of a run: its run.json, and what its upload-domains committed.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { DataError, formatPlace } from '../core/errors.js';
import { openStore } from '../core/store/open.js';
import type { RunnerOptions } from './options.js';
import { type NowSource, type RunPaths, assignedInLog } from './plan.js';

/** STATE/staging/RUN/run.json: fixed when a run is first attempted, reused by reruns after a crash. */
export interface RunJson {
  run_id: string;
  run: string;
  now: string;
  now_source: NowSource;
  created: string;
  attempts: number;
  /** Domains that dead attempts assigned (their upload-domains committed, the run did not). */
  assigned_earlier?: number;
  /** The attempt whose assignments assigned_earlier last took in, so that none is counted twice. */
  assigned_counted?: number;
  /** The name of the run's queue files, fixed at its first attempt (queueNameFor); absent: the run's. */
  queue?: string;
}

export function readRunJson(p: RunPaths): RunJson | null {
  try {
    const j = JSON.parse(fs.readFileSync(p.runJson, 'utf8')) as RunJson;
    return typeof j.now === 'string' && typeof j.run_id === 'string' ? j : null;
  } catch {
    return null;
  }
}

/**
 * What the attempt whose stage logs are in `p.logs` committed to the database: what
 * its upload-domains log says, or, when the stage died between the line it logs just
 * before COMMIT and the one after, what the database says about that line's witness.
 */
export async function assignedByAttempt(p: RunPaths, o: RunnerOptions, log: Logger): Promise<number> {
  if (!fs.existsSync(p.logs)) return 0;
  const f = fs.readdirSync(p.logs).find((n) => n.endsWith('.upload-domains.log'));
  if (!f) return 0;
  const { assigned, pending } = assignedInLog(fs.readFileSync(path.join(p.logs, f), 'utf8'));
  if (pending === null) return assigned;
  if (pending.rows === 0 || pending.witness === null) return 0;
  let committed: boolean;
  try {
    committed = await witnessCommitted(o, pending.witness, pending.added_at);
  } catch (err) {
    // Counted as 0, they would be missing from new_domains for good once that COMMIT lands:
    // the attempt's logs stay, and the next invocation asks again.
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : String((err as Error)?.message ?? err);
    throw new DataError(
      'COMMIT_UNDECIDED',
      `cannot tell whether upload-domains of run ${p.name} committed ${pending.rows} new domain(s) before it died (${message}); nothing was published, and the next invocation asks again and runs the hour`,
    );
  }
  log.warn(
    { run: p.name, rows: pending.rows, witness: pending.witness, committed },
    'upload-domains died during its commit; the database tells whether it happened',
  );
  return committed ? pending.rows : 0;
}

/**
 * Whether the database has `domain` with `added_at` (the row a transaction inserts
 * exists iff it committed: it was absent when that transaction, holding the write
 * lock, inserted it).
 */
async function witnessCommitted(o: RunnerOptions, domain: string, addedAt: string): Promise<boolean> {
  const store = await openStore(o.db, { readonly: true, timeouts: o.dbTimeouts });
  try {
    return (await store.addedAtOf(domain)) === addedAt;
  } finally {
    await store.close();
  }
}
