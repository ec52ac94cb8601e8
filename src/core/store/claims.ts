// Claims of hours in the partner database (table hour_claim, schema version 3): which
// master publishes an hour. Several masters sharing one PostgreSQL database may each be
// given the same hour; the first to claim its (run name, reflog digest) publishes it,
// the others remember it without publishing. A claim is taken before a run's COMMIT
// and confirmed (published_at set) after it, before its first queue file: only the
// confirmation gives the right to publish, so a claim taken over from a master that
// went silent can never be published by both. On SQLite (one master) every claim is
// this master's.
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
}

/** What a claim or a confirmation found. */
export type ClaimAnswer =
  /** This master holds the claim (taken over from `takenFrom`, which had claimed it and gone silent). */
  | { kind: 'ours'; takenFrom?: string }
  /** Another master confirmed it: that master publishes the hour. */
  | { kind: 'published'; by: string; runId: string; at: string }
  /** Another master claimed it `since` and has not confirmed it yet, within its lease. */
  | { kind: 'held'; by: string; since: string };

/** A row of hour_claim. */
export interface ClaimRow {
  run: string;
  digest: string;
  master: string;
  run_id: string;
  claimed_at: string;
  published_at: string | null;
}

const COLUMNS = 'run, digest, master, run_id, claimed_at, published_at';

/** The claim of `r`'s hour and reflog, or undefined. */
async function claimOf(q: Sql, r: Pick<ClaimRequest, 'run' | 'digest'>): Promise<ClaimRow | undefined> {
  const row = await q.get(`SELECT ${COLUMNS} FROM hour_claim WHERE run = ? AND digest = ?`, [r.run, r.digest]);
  return row === undefined ? undefined : asClaim(row);
}

function asClaim(row: Row): ClaimRow {
  const s = (v: unknown) => String(v);
  return {
    run: s(row.run),
    digest: s(row.digest),
    master: s(row.master),
    run_id: s(row.run_id),
    claimed_at: s(row.claimed_at),
    published_at: row.published_at === null || row.published_at === undefined ? null : s(row.published_at),
  };
}

/** Makes the claim this master's, for run `r.runId`, confirmed (published_at `confirmedAt`) or not (null). */
async function takeClaim(q: Sql, r: ClaimRequest, confirmedAt: string | null): Promise<void> {
  const at = new Date(r.nowMs).toISOString();
  const n = await q.run('UPDATE hour_claim SET master = ?, run_id = ?, claimed_at = ?, published_at = ? WHERE run = ? AND digest = ?', [
    r.master,
    r.runId,
    at,
    confirmedAt,
    r.run,
    r.digest,
  ]);
  if (n === 0) await q.run(`INSERT INTO hour_claim (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`, [r.run, r.digest, r.master, r.runId, at, confirmedAt]);
}

/** Whether another master's unconfirmed claim is past its lease (abandoned: its master went silent). */
function abandoned(c: ClaimRow, r: ClaimRequest): boolean {
  const t = Date.parse(c.claimed_at);
  return !Number.isFinite(t) || r.nowMs - t >= r.leaseMs;
}

/**
 * Claims an hour before a run's COMMIT, in one write transaction: free, this master's
 * own (an earlier attempt, or an earlier run of the same bytes, which then publishes
 * again as a replay does), or another's past its lease: ours. Another master's
 * confirmed claim: published by it. Another's within its lease: held.
 */
export async function claimHour(store: PartnerStore, r: ClaimRequest): Promise<ClaimAnswer> {
  return store.write(async (q) => {
    const c = await claimOf(q, r);
    if (c === undefined || store.kind === 'sqlite' || c.master === r.master) {
      // The same run again keeps its confirmation; another run of the same bytes is a replay.
      await takeClaim(q, r, c !== undefined && c.master === r.master && c.run_id === r.runId ? c.published_at : null);
      return { kind: 'ours' };
    }
    if (c.published_at !== null) return { kind: 'published', by: c.master, runId: c.run_id, at: c.published_at };
    if (!abandoned(c, r)) return { kind: 'held', by: c.master, since: c.claimed_at };
    await takeClaim(q, r, null);
    return { kind: 'ours', takenFrom: c.master };
  });
}

/**
 * Confirms this master's claim after the run's COMMIT, before anything is published,
 * in one write transaction (idempotent: a roll forward confirms again). A claim that
 * is gone (removed by hand) or another's past its lease is taken and confirmed; another
 * master's confirmed claim: published by it; another's within its lease: held.
 */
export async function confirmClaim(store: PartnerStore, r: ClaimRequest): Promise<ClaimAnswer> {
  return store.write(async (q) => {
    const c = await claimOf(q, r);
    const now = new Date(r.nowMs).toISOString();
    if (c !== undefined && store.kind === 'postgresql' && c.master !== r.master) {
      if (c.published_at !== null) return { kind: 'published', by: c.master, runId: c.run_id, at: c.published_at };
      if (!abandoned(c, r)) return { kind: 'held', by: c.master, since: c.claimed_at };
      await takeClaim(q, r, now);
      return { kind: 'ours', takenFrom: c.master };
    }
    if (c !== undefined && c.master === r.master && c.run_id === r.runId && c.published_at !== null) return { kind: 'ours' };
    await takeClaim(q, r, now);
    return { kind: 'ours' };
  });
}

/** The hours masters other than `master` confirmed whose run name sorts after `after` (all with null), by run name. */
export async function publishedByOthers(store: PartnerStore, master: string, after: string | null): Promise<ClaimRow[]> {
  return store.read(async (q) => {
    const rows = await q.all(
      `SELECT ${COLUMNS} FROM hour_claim WHERE master <> ? AND published_at IS NOT NULL${after === null ? '' : ' AND run > ?'} ORDER BY run, digest`,
      after === null ? [master] : [master, after],
    );
    return rows.map(asClaim);
  });
}

/** Every claim of run `run` (each reflog it was given as), for explain and tests. */
export async function claimsOfRun(store: PartnerStore, run: string): Promise<ClaimRow[]> {
  return store.read(async (q) => (await q.all(`SELECT ${COLUMNS} FROM hour_claim WHERE run = ? ORDER BY digest`, [run])).map(asClaim));
}
