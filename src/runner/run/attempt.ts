// What a run's attempt committed to the partner database: its upload-domains log says,
// or, for one that died during its commit, the database does.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataError, formatPlace } from '../../core/errors.js';
import { committedDomains } from '../../core/store/domain-commits.js';
import { openStore } from '../../core/store/open.js';
import type { DbOptions } from '../options/types.js';
import type { Say } from '../say.js';
import type { RunPaths } from '../state/layout.js';
import { type PendingCommit, assignedInLog } from './stage-log.js';

/**
 * What the attempt whose stage logs are in `p.logs` committed to the database: what
 * its upload-domains log says, or, when the stage died between the line it logs just
 * before COMMIT and the one after, what the database says about that line's token.
 */
export async function assignedByAttempt(p: RunPaths, o: DbOptions, say: Say): Promise<number> {
  if (!fs.existsSync(p.logs)) return 0;
  const f = fs.readdirSync(p.logs).find((n) => n.endsWith('.upload-domains.log'));
  if (!f) return 0;
  const { assigned, pending } = assignedInLog(fs.readFileSync(path.join(p.logs, f), 'utf8'));
  if (pending === null) return assigned;
  if (pending.rows === 0 || (pending.token === undefined && pending.witness === null)) return 0;
  let committed: number;
  try {
    committed = await committedByPending(o, pending);
  } catch (err) {
    // Counted as 0, they would be missing from new_domains for good once that COMMIT lands:
    // the attempt's logs stay, and the next invocation asks again.
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : String((err as Error)?.message ?? err);
    throw new DataError(
      'COMMIT_UNDECIDED',
      `cannot tell whether upload-domains of run ${p.name} committed ${pending.rows} new domain(s) before it died (${message}); nothing was published, and the next invocation asks again and runs the hour`,
    );
  }
  say.log?.warn(
    { run: p.name, rows: pending.rows, token: pending.token, witness: pending.witness, committed },
    'upload-domains died during its commit; the database tells whether it happened',
  );
  return committed;
}

/**
 * The domains the transaction of `pending` added: those its token records (0 when
 * absent: it did not commit); for a line without a token, its row count when the
 * witness has `added_at` (the row a transaction inserts exists iff it committed).
 */
async function committedByPending(o: DbOptions, pending: PendingCommit): Promise<number> {
  const store = await openStore(o.db, { readonly: pending.token === undefined, timeouts: o.dbTimeouts });
  try {
    if (pending.token !== undefined) return (await committedDomains(store, pending.token)) ?? 0;
    return (await store.addedAtOf(pending.witness!)) === pending.added_at ? pending.rows : 0;
  } finally {
    await store.close();
  }
}
