// STATE/identity.json: the state's identity, made once when the state is first used (a
// state of an older runner gets one at its next invocation). The claims of hours name
// the state by it, not by --master-name (a label for people, which two masters may
// share); a copy of the state directory carries the same one (commit/fence.ts).
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { writeFileDurable } from '../../core/durable.js';
import { DataError, visibleName } from '../../core/errors.js';
import type { StateRow } from '../../core/store/states.js';
import { PROG } from '../say.js';
import { stateLayout } from './layout.js';

/** STATE/identity.json. */
export interface Identity {
  /** Made once, 128 random bits as hex. */
  id: string;
  created: string;
  /** The token of the incarnation this state last moved to (absent before its first claim). */
  token?: string;
  /** The token it is moving to: written before it asks the database, dropped once it holds it. */
  next?: string;
}

const HEX = /^[0-9a-f]{32}$/;

/** 128 random bits as hex: an identity or a token. */
export function newToken(): string {
  return randomBytes(16).toString('hex');
}

/** The state's identity; null when it has none yet; a DataError when the file is damaged. */
export function readIdentity(state: string): Identity | null {
  const file = stateLayout(state).identity;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new DataError('BAD_IDENTITY', `cannot read this state's identity: ${(err as NodeJS.ErrnoException).code ?? String(err)}; nothing was run`, { file });
  }
  let j: Partial<Identity> | null = null;
  try {
    j = JSON.parse(text) as Partial<Identity>;
  } catch {
    /* said below */
  }
  const ok = (v: unknown) => v === undefined || (typeof v === 'string' && HEX.test(v));
  if (j === null || typeof j.id !== 'string' || !HEX.test(j.id) || !ok(j.token) || !ok(j.next)) {
    throw new DataError(
      'BAD_IDENTITY',
      `damaged: it holds this state's identity, which names its claims of hours in the partner database; restore it from a backup, or give the state a new identity (${PROG} new-identity); nothing was run`,
      { file },
    );
  }
  return j as Identity;
}

/** The state's identity, made now (durably) when it has none: at its first invocation, or the first of this runner. */
export function ensureIdentity(state: string): Identity {
  const have = readIdentity(state);
  if (have !== null) return have;
  const made: Identity = { id: newToken(), created: new Date().toISOString() };
  writeIdentity(state, made);
  return made;
}

/** Replaces the state's identity (`old`: the one it had, null when none or damaged) with a new one, durably. */
export function renewIdentity(state: string, old: Identity | null): { old: string; now: Identity } {
  const file = stateLayout(state).identity;
  const was = old?.id ?? (fs.existsSync(file) ? 'a damaged one' : 'none');
  const now: Identity = { id: newToken(), created: new Date().toISOString() };
  writeIdentity(state, now);
  return { old: was, now };
}

/** Writes `id` as the state's identity, durably. */
export function writeIdentity(state: string, id: Identity): void {
  writeFileDurable(stateLayout(state).identity, JSON.stringify(id) + '\n');
}

/** What a fenced state says of itself, and the way out. */
export function fencedText(id: string, h: Pick<StateRow, 'master' | 'place' | 'seen_at'>): string {
  return (
    `this state (identity ${id.slice(0, 8)}) is a copy: another state with the same identity ` +
    `(master ${visibleName(h.master)} at ${visibleName(h.place)}, last at ${h.seen_at}) has claimed hours since this one last did, ` +
    `so this one publishes nothing: an hour the other publishes is remembered here, any other fails and stays in the inbox. ` +
    `A copied state directory, a cloned machine or a state restored from a backup does this; if this state is to go on as a master of its own, ` +
    `give it a new identity with: ${PROG} new-identity (and, if the other runs on, its own --master-name)`
  );
}
