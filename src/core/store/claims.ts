// Claims of hours in the partner database (table hour_claim, schema version 4): which
// master publishes an hour. Several masters sharing one database may each be given the
// same hour; the first to claim its (run name, reflog digest) publishes it, the others
// remember it without publishing. A claim is taken before a run's COMMIT and confirmed
// (published_at set) after it, before its first queue file: only the confirmation gives
// the right to publish, so a claim taken over from a master that went silent can never be
// published by both. A claim is a master's own only if its state made it (state_id, the
// state's identity, not the master's name), and only while that state is the current
// incarnation of its identity (states.ts): a copy of a state that another copy has
// outrun never claims, confirms or takes over anything.
import { isCurrent, type StateRef } from './states.js';
import type { PartnerStore, Row, Sql } from './store.js';

/** What a run's COMMIT records of its claim: the hour, its reflog's digest, the master and the run's id. */
export interface HourClaimRef {
  run: string;
  digest: string;
  master: string;
  run_id: string;
}

/** One hour's reflog as a claim names it, and who asks. */
export interface ClaimRequest {
  run: string;
  /** The reflog's SHA-256, hex. */
  digest: string;
  master: string;
  /** The run's id, the same over all its attempts. */
  runId: string;
  /** This master's clock, ms since the epoch. */
  nowMs: number;
  /** A claim not confirmed within this many ms of its taking is abandoned: another master may take it over. */
  leaseMs: number;
  /** This master's state: its identity and the token of its incarnation. */
  state: StateRef;
}

/** What a claim or a confirmation found. */
export type ClaimAnswer =
  /** This master holds the claim (taken over from `takenFrom`, which had claimed it and gone silent). */
  | { kind: 'ours'; takenFrom?: string }
  /** Another master confirmed it (`byState`: its state's identity, null for a claim made before version 4): that master publishes the hour. */
  | { kind: 'published'; by: string; byState: string | null; runId: string; at: string }
  /** Another master claimed it `since` and has not confirmed it yet, within its lease. */
  | { kind: 'held'; by: string; since: string }
  /** This state is not the current incarnation of its identity (a copy outran it), and nobody confirmed the hour. */
  | { kind: 'fenced' };

/** A row of hour_claim. */
export interface ClaimRow {
  run: string;
  digest: string;
  master: string;
  run_id: string;
  claimed_at: string;
  published_at: string | null;
  /** The identity of the state that made the claim; null in a claim made before schema version 4. */
  state_id: string | null;
}

const COLUMNS = 'run, digest, master, run_id, claimed_at, published_at, state_id';

/** The claim of `r`'s hour and reflog, or undefined. */
async function claimOf(q: Sql, r: Pick<ClaimRequest, 'run' | 'digest'>): Promise<ClaimRow | undefined> {
  const row = await q.get(`SELECT ${COLUMNS} FROM hour_claim WHERE run = ? AND digest = ?`, [r.run, r.digest]);
  return row === undefined ? undefined : asClaim(row);
}

function asClaim(row: Row): ClaimRow {
  const s = (v: unknown) => String(v);
  const orNull = (v: unknown) => (v === null || v === undefined ? null : s(v));
  return {
    run: s(row.run),
    digest: s(row.digest),
    master: s(row.master),
    run_id: s(row.run_id),
    claimed_at: s(row.claimed_at),
    published_at: orNull(row.published_at),
    state_id: orNull(row.state_id),
  };
}

/** Makes the claim this master's, for run `r.runId`, confirmed (published_at `confirmedAt`) or not (null). */
async function takeClaim(q: Sql, r: ClaimRequest, confirmedAt: string | null): Promise<void> {
  const at = new Date(r.nowMs).toISOString();
  const n = await q.run('UPDATE hour_claim SET master = ?, run_id = ?, claimed_at = ?, published_at = ?, state_id = ? WHERE run = ? AND digest = ?', [
    r.master,
    r.runId,
    at,
    confirmedAt,
    r.state.id,
    r.run,
    r.digest,
  ]);
  if (n === 0)
    await q.run(`INSERT INTO hour_claim (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`, [r.run, r.digest, r.master, r.runId, at, confirmedAt, r.state.id]);
}

/**
 * Whether claim `c` is this state's own: made by this state's identity, or, made before
 * schema version 4 (no identity), by this master's name (on SQLite, one master's
 * database then, by any name).
 */
function ours(kind: PartnerStore['kind'], c: ClaimRow, r: ClaimRequest): boolean {
  return c.state_id === null ? kind === 'sqlite' || c.master === r.master : c.state_id === r.state.id;
}

/** What another master's confirmed claim means: it publishes the hour. */
function publishedBy(c: ClaimRow): ClaimAnswer {
  return { kind: 'published', by: c.master, byState: c.state_id, runId: c.run_id, at: c.published_at! };
}

/**
 * A fenced state's answer: the hour as another (a copy of this state among them)
 * confirmed it, else fenced. It never writes a claim.
 */
function fencedAnswer(c: ClaimRow | undefined): ClaimAnswer {
  return c !== undefined && c.published_at !== null ? publishedBy(c) : { kind: 'fenced' };
}

/** Whether another master's unconfirmed claim is past its lease (abandoned: its master went silent). */
function abandoned(c: ClaimRow, r: ClaimRequest): boolean {
  const t = Date.parse(c.claimed_at);
  return !Number.isFinite(t) || r.nowMs - t >= r.leaseMs;
}

/**
 * Claims an hour before a run's COMMIT, in one write transaction: free, this state's
 * own (an earlier attempt, or an earlier run of the same bytes, which then publishes
 * again as a replay does), or another's past its lease: ours. Another master's
 * confirmed claim: published by it. Another's within its lease: held. A state that is
 * not its identity's current incarnation: fenced (see fencedAnswer).
 */
export async function claimHour(store: PartnerStore, r: ClaimRequest): Promise<ClaimAnswer> {
  return store.write(async (q) => {
    const c = await claimOf(q, r);
    if (!(await isCurrent(q, r.state))) return fencedAnswer(c);
    if (c === undefined || ours(store.kind, c, r)) {
      // The same run again keeps its confirmation; another run of the same bytes is a replay.
      await takeClaim(q, r, c !== undefined && c.run_id === r.runId ? c.published_at : null);
      return { kind: 'ours' };
    }
    if (c.published_at !== null) return publishedBy(c);
    if (!abandoned(c, r)) return { kind: 'held', by: c.master, since: c.claimed_at };
    await takeClaim(q, r, null);
    return { kind: 'ours', takenFrom: c.master };
  });
}

/**
 * Confirms this state's claim after the run's COMMIT, before anything is published,
 * in one write transaction (idempotent: a roll forward confirms again). A claim that
 * is gone (removed by hand) or another's past its lease is taken and confirmed; another
 * master's confirmed claim: published by it; another's within its lease: held; a
 * fenced state: fenced.
 */
export async function confirmClaim(store: PartnerStore, r: ClaimRequest): Promise<ClaimAnswer> {
  return store.write(async (q) => {
    const c = await claimOf(q, r);
    if (!(await isCurrent(q, r.state))) return fencedAnswer(c);
    const now = new Date(r.nowMs).toISOString();
    if (c !== undefined && !ours(store.kind, c, r)) {
      if (c.published_at !== null) return publishedBy(c);
      if (!abandoned(c, r)) return { kind: 'held', by: c.master, since: c.claimed_at };
      await takeClaim(q, r, now);
      return { kind: 'ours', takenFrom: c.master };
    }
    if (c !== undefined && c.run_id === r.runId && c.published_at !== null && c.state_id === r.state.id) return { kind: 'ours' };
    await takeClaim(q, r, now);
    return { kind: 'ours' };
  });
}

/**
 * The hours other masters (states other than `state`; before version 4, names other
 * than `master`) confirmed whose run name sorts after `after` (all with null), by run name.
 */
export async function publishedByOthers(store: PartnerStore, me: { master: string; state: string }, after: string | null): Promise<ClaimRow[]> {
  return store.read(async (q) => {
    const rows = await q.all(
      `SELECT ${COLUMNS} FROM hour_claim WHERE published_at IS NOT NULL AND (state_id <> ? OR (state_id IS NULL AND master <> ?))${after === null ? '' : ' AND run > ?'} ORDER BY run, digest`,
      after === null ? [me.state, me.master] : [me.state, me.master, after],
    );
    return rows.map(asClaim);
  });
}

/** Every claim of run `run` (each reflog it was given as), for explain and tests. */
export async function claimsOfRun(store: PartnerStore, run: string): Promise<ClaimRow[]> {
  return store.read(async (q) => (await q.all(`SELECT ${COLUMNS} FROM hour_claim WHERE run = ? ORDER BY digest`, [run])).map(asClaim));
}
