// Before the work: whether this state still holds its identity in the partner database,
// or is a copy that another copy of it outran (commit/fence.ts), which publishes nothing.
// Asks only: the fence itself is moved by the invocation's first claim.
import { openStore } from '../../core/store/open.js';
import { heldAt, holderOf } from '../../core/store/states.js';
import type { RunnerOptions } from '../options/types.js';
import { fencedText, readIdentity } from '../state/identity.js';

/** The identity check's line: held by this state, or not known yet; throws the fence's text when another copy holds it. */
export async function identityLine(o: Pick<RunnerOptions, 'state' | 'db' | 'dbTimeouts'>): Promise<string> {
  const id = readIdentity(o.state);
  if (id === null) return 'none yet: the first invocation makes one';
  const short = id.id.slice(0, 8);
  if (id.token === undefined && id.next === undefined) return `${short}, which has claimed no hour yet`;
  const store = await openStore(o.db, { readonly: true, timeouts: o.dbTimeouts });
  try {
    const row = await holderOf(store, id.id);
    if (row === undefined) return `${short}, not yet known to the partner database (its next claim records it)`;
    if (heldAt(row, id.token, id.next)) return `${short}, held by this state`;
    throw new Error(fencedText(id.id, row));
  } finally {
    await store.close();
  }
}
