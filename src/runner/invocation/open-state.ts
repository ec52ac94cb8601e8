// The start of an invocation: the checks on the inbox and the state directory, the
// staging area, the lock, and the state's identity.
import { mkdirDurable } from '../../core/durable.js';
import { checkInbox, checkRunsFile, checkWritable } from '../checks/state-dirs.js';
import type { StateDirs } from '../options/types.js';
import { ensureIdentity } from '../state/identity.js';
import type { Seen } from '../state/last-invocation.js';
import { stateLayout } from '../state/layout.js';
import { acquireLock } from '../state/lock.js';

/** Checks the inbox and the state directory, takes the lock and gives the state its identity if it has none, returning the lock's fd; throws before anything runs. */
export function openState(o: StateDirs, seen: Seen): number {
  checkInbox(o.inbox);
  const L = stateLayout(o.state);
  mkdirDurable(L.staging);
  const lock = acquireLock(L.lock);
  seen.lock = true;
  checkRunsFile(L.runs);
  checkWritable(o);
  ensureIdentity(o.state);
  return lock.fd;
}
