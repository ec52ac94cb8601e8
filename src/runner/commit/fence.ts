// What fences a copy of the state: a copied state directory carries the same identity
// (state/identity.ts); so each invocation that claims moves the identity to a new
// incarnation in the partner database (core/store/states.ts) before its first claim,
// and the copy that comes second is fenced: it publishes nothing.
import * as os from 'node:os';
import { withStore } from '../../core/store/open.js';
import { moveIncarnation, type StateRef, type StateRow } from '../../core/store/states.js';
import type { RunnerOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { ensureIdentity, fencedText, newToken, writeIdentity } from '../state/identity.js';
import type { Fenced } from '../state/last-invocation.js';

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

/** This invocation's fence: the question to the database, and its answer once it came. */
let current: { state: string; fence: Promise<Fence>; found: Fence | null } | null = null;

/**
 * This invocation's fence: moves the state's identity to a new incarnation before its
 * first claim (once per invocation), or finds that another copy of the state holds it
 * (said once, as a warning). A DataError when the database cannot be asked.
 */
export function stateFence(o: FenceOptions, say: Say): Promise<Fence> {
  if (current?.state !== o.state) {
    const asked = { state: o.state, fence: moveOnce(o, say), found: null as Fence | null };
    current = asked;
    asked.fence.then(
      (f) => (asked.found = f),
      // A failure is not kept: the next claim asks again.
      () => {
        if (current === asked) current = null;
      },
    );
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

/**
 * How `state`'s fence stood when this invocation asked the database: null when it is
 * not fenced, undefined when the invocation did not ask (it claimed no hour) or got no answer.
 */
export function fenceFound(state: string): Fenced | null | undefined {
  const found = current?.state === state ? current.found : null;
  if (found === null) return undefined;
  const { state: ref, fencedBy: h } = found;
  return h === null ? null : { identity: ref.id, master: h.master, place: h.place, seen_at: h.seen_at };
}
