// What fences a copy of the state: a copied state directory carries the same identity
// (state/identity.ts); so each invocation that claims moves the identity to a new
// incarnation in the partner database (core/store/states.ts) before its first claim,
// and the copy that comes second is fenced: it publishes nothing.
import * as os from 'node:os';
import { visibleName } from '../../core/errors.js';
import { withStore } from '../../core/store/open.js';
import { moveIncarnation, type StateRef, type StateRow } from '../../core/store/states.js';
import type { RunnerOptions } from '../options/types.js';
import { PROG, type Say } from '../say.js';
import { ensureIdentity, newToken, writeIdentity } from '../state/identity.js';

/** The options the identity's fence uses. */
export type FenceOptions = Pick<RunnerOptions, 'state' | 'db' | 'dbTimeouts' | 'masterName'>;

/** How a state stands in this invocation: the identity and token its claims present, and the copy that holds the identity when it is not this one. */
export interface Fence {
  state: StateRef;
  /** Another copy of this state moved the identity since this one did: this one publishes nothing. */
  fencedBy: StateRow | null;
}

/** Where a state is, as a fenced copy names the other: host and directory. */
export function placeOf(state: string): string {
  return `${os.hostname()}:${state}`;
}

let current: { state: string; fence: Promise<Fence> } | null = null;

/**
 * This invocation's fence: moves the state's identity to a new incarnation before its
 * first claim (once per invocation), or finds that another copy of the state holds it
 * (said once, as a warning). A DataError when the database cannot be asked.
 */
export function stateFence(o: FenceOptions, say: Say): Promise<Fence> {
  if (current?.state !== o.state) {
    const fence = moveOnce(o, say);
    current = { state: o.state, fence };
    // A failure is not kept: the next claim asks again.
    fence.catch(() => {
      if (current?.fence === fence) current = null;
    });
  }
  return current.fence;
}

async function moveOnce(o: FenceOptions, say: Say): Promise<Fence> {
  const id = ensureIdentity(o.state);
  const next = id.next ?? newToken();
  if (id.next === undefined) writeIdentity(o.state, { ...id, next });
  const a = await withStore(o, (s) =>
    moveIncarnation(s, { id: id.id, token: id.token ?? null, next, master: o.masterName, place: placeOf(o.state), nowMs: Date.now() }),
  );
  if (a.kind === 'current') {
    writeIdentity(o.state, { id: id.id, created: id.created, token: next });
    return { state: { id: id.id, token: next }, fencedBy: null };
  }
  const h = a.holder;
  say.warn(fencedText(id.id, h), {
    fields: { state_id: id.id, holder_master: h.master, holder_place: h.place, holder_seen_at: h.seen_at },
    msg: 'this state is a copy that another copy of it outran: it publishes nothing',
  });
  return { state: { id: id.id, token: id.token ?? next }, fencedBy: h };
}

/** What a fenced state says of itself, and the way out. */
export function fencedText(id: string, h: StateRow): string {
  return (
    `this state (identity ${id.slice(0, 8)}) is a copy: another state with the same identity ` +
    `(master ${visibleName(h.master)} at ${visibleName(h.place)}, last at ${h.seen_at}) has claimed hours since this one last did, ` +
    `so this one publishes nothing: an hour the other publishes is remembered here, any other fails and stays in the inbox. ` +
    `A copied state directory, a cloned machine or a state restored from a backup does this; if this state is to go on as a master of its own, ` +
    `give it a new identity with: ${PROG} new-identity (and, if the other runs on, its own --master-name)`
  );
}
