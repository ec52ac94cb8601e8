// reflog-to-yacobot-queue new-identity: gives the state a new identity, so that it goes
// on as a master of its own (a copy of a state that another copy outran: a cloned
// machine, a copied state directory, a state restored from a backup). Takes the lock.
import * as fs from 'node:fs';
import { DataError, visibleName } from '../../core/errors.js';
import { withStore } from '../../core/store/open.js';
import { holderOf } from '../../core/store/states.js';
import { readCommit } from '../commit/marker.js';
import type { RunnerOptions } from '../options/types.js';
import { PROG } from '../say.js';
import { type Identity, readIdentity, renewIdentity } from '../state/identity.js';
import { stagingDir, stateLayout } from '../state/layout.js';
import { acquireLock } from '../state/lock.js';

export const NEW_IDENTITY_USAGE = `Usage: ${PROG} new-identity [options]

Gives the state directory a new identity (STATE/identity.json). The claims of
hours in the partner database name a master by its state's identity; a copy of
a state directory (a cloned machine, a copied directory, a state restored from a
backup) carries the same one, and when another copy has claimed hours since,
this copy is fenced: it publishes nothing, and each invocation says so. With a
new identity it is a master of its own: an hour another master published it
remembers, as any master does. Give it its own --master-name too, if the other
copy runs on.

Refused while a run of this state is committed and not yet published under its
current identity (run the runner first); takes the lock.

  options                 the runner's (--config, --state, --db, ...)
`;

/** Makes the new identity and says so on stdout; a DataError when a committed run awaits its publish under the current one. */
export async function newIdentity(o: RunnerOptions): Promise<number> {
  if (!fs.existsSync(o.state)) throw new DataError('NO_STATE', 'no such state directory; nothing changed', { file: o.state });
  const L = stateLayout(o.state);
  const lock = acquireLock(L.lock);
  try {
    const id = readableIdentity(o.state);
    const pending = committedRuns(o.state);
    if (id?.token !== undefined && pending.length > 0 && (await holdsIdentity(o, id.id, id.token))) {
      throw new DataError(
        'COMMITTED_RUN',
        `run ${pending.join(', ')} is committed and its publish awaits its claim under this state's identity, which this state still holds (it is not fenced): run ${PROG} first, then give it a new identity; nothing changed`,
        { file: L.identity },
      );
    }
    const r = renewIdentity(o.state, id);
    process.stdout.write(
      `${visibleName(L.identity)}: new identity ${r.now.id} (was ${r.old}): ` +
        `this state is a master of its own from its next invocation on; give it its own --master-name if a copy of it runs elsewhere\n`,
    );
    return 0;
  } finally {
    fs.closeSync(lock.fd);
  }
}

/** The state's identity, or null when it has none or a damaged one (which the new one replaces). */
function readableIdentity(state: string): Identity | null {
  try {
    return readIdentity(state);
  } catch {
    return null;
  }
}

/** The runs in STATE/staging/ committed with a claim to confirm (their publish awaits it). */
function committedRuns(state: string): string[] {
  const staging = stateLayout(state).staging;
  if (!fs.existsSync(staging)) return [];
  return fs
    .readdirSync(staging)
    .filter((n) => readCommit(stagingDir(state, n))?.claim !== undefined)
    .sort();
}

/** Whether the partner database holds identity `id` at `token`: this state is its current incarnation. */
async function holdsIdentity(o: RunnerOptions, id: string, token: string): Promise<boolean> {
  return (await withStore(o, (s) => holderOf(s, id)))?.token === token;
}
