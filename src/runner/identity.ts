// The state's identity: STATE/identity.json, made once when the state is first used (a
// state of an older runner gets one at its next invocation), and what fences a copy of
// the state. The claims of hours name the state by this identity, not by --master-name
// (a label for people, which two masters may share). A copied state directory carries
// the same identity; so each invocation that claims moves the identity to a new
// incarnation in the partner database (core/store/states.ts) before its first claim,
// and the copy that comes second is fenced: it publishes nothing.
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { DataError, visibleName } from '../core/errors.js';
import { openStore } from '../core/store/open.js';
import { moveIncarnation, type StateRef, type StateRow } from '../core/store/states.js';
import type { PartnerStore } from '../core/store/store.js';
import { writeFileDurable } from '../core/durable.js';
import { PROG, type RunnerOptions } from './options.js';

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

/** The options the identity's fence uses. */
export type FenceOptions = Pick<RunnerOptions, 'state' | 'db' | 'dbTimeouts' | 'masterName'>;

/** How a state stands in this invocation: the identity and token its claims present, and the copy that holds the identity when it is not this one. */
export interface Fence {
  state: StateRef;
  /** Another copy of this state moved the identity since this one did: this one publishes nothing. */
  fencedBy: StateRow | null;
}

/** Runs `fn` on the partner store, opened for it and closed after. */
export async function withStore<T>(o: Pick<RunnerOptions, 'db' | 'dbTimeouts'>, fn: (s: PartnerStore) => Promise<T>): Promise<T> {
  const store = await openStore(o.db, { timeouts: o.dbTimeouts });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function identityFile(state: string): string {
  return path.join(state, 'identity.json');
}

const HEX = /^[0-9a-f]{32}$/;

/** 128 random bits as hex: an identity or a token. */
function newToken(): string {
  return randomBytes(16).toString('hex');
}

/** The state's identity; null when it has none yet; a DataError when the file is damaged. */
export function readIdentity(state: string): Identity | null {
  const file = identityFile(state);
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
  writeFileDurable(identityFile(state), JSON.stringify(made) + '\n');
  return made;
}

/** Replaces the state's identity (`old`: the one it had, null when none or damaged) with a new one, durably. */
export function renewIdentity(state: string, old: Identity | null): { old: string; now: Identity } {
  const was = old?.id ?? (fs.existsSync(identityFile(state)) ? 'a damaged one' : 'none');
  const now: Identity = { id: newToken(), created: new Date().toISOString() };
  writeFileDurable(identityFile(state), JSON.stringify(now) + '\n');
  return { old: was, now };
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
export function stateFence(o: FenceOptions, log: Logger): Promise<Fence> {
  if (current?.state !== o.state) {
    const fence = moveOnce(o, log);
    current = { state: o.state, fence };
    // A failure is not kept: the next claim asks again.
    fence.catch(() => {
      if (current?.fence === fence) current = null;
    });
  }
  return current.fence;
}

async function moveOnce(o: FenceOptions, log: Logger): Promise<Fence> {
  const id = ensureIdentity(o.state);
  const next = id.next ?? newToken();
  const file = identityFile(o.state);
  if (id.next === undefined) writeFileDurable(file, JSON.stringify({ ...id, next }) + '\n');
  const a = await withStore(o, (s) => moveIncarnation(s, { id: id.id, token: id.token ?? null, next, master: o.masterName, place: placeOf(o.state), nowMs: Date.now() }));
  if (a.kind === 'current') {
    writeFileDurable(file, JSON.stringify({ id: id.id, created: id.created, token: next }) + '\n');
    return { state: { id: id.id, token: next }, fencedBy: null };
  }
  const h = a.holder;
  log.warn({ state_id: id.id, holder_master: h.master, holder_place: h.place, holder_seen_at: h.seen_at }, 'this state is a copy that another copy of it outran: it publishes nothing');
  process.stderr.write(`${PROG}: warning: ${fencedText(id.id, h)}\n`);
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
