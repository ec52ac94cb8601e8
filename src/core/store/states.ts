// The identities of the masters' states in the partner database (table master_state,
// schema version 4). A state directory carries an identity made once, at its creation;
// a copy of the directory (a cloned machine, a restored backup) carries the same one.
// So that two copies never both publish, each invocation that claims an hour first
// moves its identity to a new incarnation, a token it made, by compare-and-set on the
// token its state last held (as a producer epoch is bumped in Kafka): the copy that
// comes second presents a token that is no longer the current one, and is fenced.
import type { PartnerStore, Sql } from './store.js';

/** A state as its claims present it: its identity and the token of its incarnation. */
export interface StateRef {
  id: string;
  token: string;
}

/** What a state asks when it starts to claim: its identity, its last token (null before the first), the one it moves to, and who it is. */
export interface Incarnation {
  id: string;
  /** The token this state last held (committed in its identity file), or null: it never held one. */
  token: string | null;
  /** The token it moves to (written to its identity file before it asks). */
  next: string;
  master: string;
  /** Where the state is (host and directory), for the message a fenced copy gives. */
  place: string;
  nowMs: number;
}

/** The current incarnation of an identity as master_state holds it. */
export interface StateRow {
  token: string;
  master: string;
  place: string;
  seen_at: string;
}

/** What moving to a new incarnation found: it is the current one now, or another copy holds it. */
export type IncarnationAnswer = { kind: 'current' } | { kind: 'fenced'; holder: StateRow };

async function rowOf(q: Sql, id: string): Promise<StateRow | undefined> {
  const r = await q.get('SELECT token, master, place, seen_at FROM master_state WHERE state_id = ?', [id]);
  return r === undefined ? undefined : { token: String(r.token), master: String(r.master), place: String(r.place), seen_at: String(r.seen_at) };
}

/**
 * Moves identity `a.id` to token `a.next`, in one write transaction: when it is unknown
 * (first use), at `a.token` (the last this state held) or already at `a.next` (an
 * earlier attempt moved it, and its state did not learn it). At any other token, another
 * copy of the state has moved it since this one last did: fenced, nothing written.
 */
export async function moveIncarnation(store: PartnerStore, a: Incarnation): Promise<IncarnationAnswer> {
  return store.write(async (q) => {
    const row = await rowOf(q, a.id);
    const seen = new Date(a.nowMs).toISOString();
    if (row === undefined) {
      await q.run('INSERT INTO master_state (state_id, token, master, place, seen_at) VALUES (?, ?, ?, ?, ?)', [a.id, a.next, a.master, a.place, seen]);
      return { kind: 'current' };
    }
    if (!heldAt(row, a.token, a.next)) return { kind: 'fenced', holder: row };
    await q.run('UPDATE master_state SET token = ?, master = ?, place = ?, seen_at = ? WHERE state_id = ?', [a.next, a.master, a.place, seen, a.id]);
    return { kind: 'current' };
  });
}

/** Inside a write transaction: whether `s` is its identity's current incarnation. */
export async function isCurrent(q: Sql, s: StateRef): Promise<boolean> {
  return (await rowOf(q, s.id))?.token === s.token;
}

/**
 * Whether a state whose identity file holds `token` (and, while it moves, `next`) still
 * holds the incarnation `row`: no other copy of it has moved the identity since.
 */
export function heldAt(row: StateRow, token: string | null | undefined, next: string | undefined): boolean {
  return row.token === token || row.token === next;
}

/** Identity `id`'s row (its current token, and the master and place that moved it last), or undefined when the database does not know it. */
export async function holderOf(store: PartnerStore, id: string): Promise<StateRow | undefined> {
  return store.read((q) => rowOf(q, id));
}
