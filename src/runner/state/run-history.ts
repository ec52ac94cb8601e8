// Questions over the lines of STATE/runs.jsonl (as its tail read gives them, oldest
// first): the last committed run, the run that made current_log forget the most, what
// failed attempts assigned. Pure: no file is read here.
import { isValidTimestamp, timestampToMs } from '../../core/time.js';
import type { RunRecord } from './run-record.js';

/** The newest committed run among `records`, or null. */
export function lastCommitted(records: readonly unknown[]): RunRecord | null {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i] as Partial<RunRecord>;
    if (r.status === 'ok' && typeof r.run === 'string' && typeof r.start === 'string' && typeof r.seconds === 'number') return r as RunRecord;
  }
  return null;
}

/** A committed run's name and now, and the --keep it ran with when its line says. */
export interface CommittedNow {
  run: string;
  now: string;
  keepMs?: number;
}

/** The committed run (status ok, a run name, a real now) of runs.jsonl line `r`, or null. */
function committedNow(r: unknown): CommittedNow | null {
  const { run, now, status, keep_ms } = (r ?? {}) as { run?: unknown; now?: unknown; status?: unknown; keep_ms?: unknown };
  if (status !== 'ok' || typeof run !== 'string' || typeof now !== 'string' || !isValidTimestamp(now)) return null;
  return Number.isSafeInteger(keep_ms) && (keep_ms as number) >= 0 ? { run, now, keepMs: keep_ms as number } : { run, now };
}

/** Up to when run `c` made current_log forget: its now less its --keep (`keepMs` when its line does not say). */
function forgottenUpTo(c: CommittedNow, keepMs: number): number {
  return timestampToMs(c.now) - (c.keepMs ?? keepMs);
}

/**
 * Of `records` (runs.jsonl lines, oldest first) and `from`, the committed run whose
 * forgetting reaches latest (its now less its --keep; `keepMs` for a line without
 * keep_ms), the last of equals; null when there is none. Lines without a run name or a
 * real now are left out. With one --keep throughout, the run with the latest now.
 */
export function mostForgetful(records: readonly unknown[], keepMs: number, from: CommittedNow | null = null): CommittedNow | null {
  let most = from;
  for (const r of records) {
    const c = committedNow(r);
    if (c !== null && (most === null || forgottenUpTo(c, keepMs) >= forgottenUpTo(most, keepMs))) most = c;
  }
  return most;
}

/**
 * For each run name committed (status ok) among `records` (runs.jsonl lines, oldest
 * first): mostForgetful of the lines after its last committed one (null when none).
 * Only those runs can have made current_log forget what that run recorded.
 */
export function mostForgetfulSince(records: readonly unknown[], keepMs: number): Map<string, CommittedNow | null> {
  const out = new Map<string, CommittedNow | null>();
  let most: CommittedNow | null = null;
  for (let i = records.length - 1; i >= 0; i--) {
    const { run, status } = (records[i] ?? {}) as { run?: unknown; status?: unknown };
    if (status !== 'ok' || typeof run !== 'string') continue;
    if (!out.has(run)) out.set(run, most);
    // Read backwards: an equal reach leaves the later line, as mostForgetful does.
    const c = committedNow(records[i]);
    if (c !== null && (most === null || forgottenUpTo(c, keepMs) > forgottenUpTo(most, keepMs))) most = c;
  }
  return out;
}

/**
 * The domains assigned by the failed runs of `run` among `records` (runs.jsonl lines,
 * oldest first) after its last committed line, other than `runId`'s: the sum of their
 * new_domains.
 */
export function failedAttemptsAssigned(records: readonly unknown[], run: string, runId: string): number {
  let n = 0;
  for (let i = records.length - 1; i >= 0; i--) {
    const r = (records[i] ?? {}) as { run?: unknown; run_id?: unknown; status?: unknown; new_domains?: unknown };
    if (r.run !== run || r.run_id === runId) continue;
    if (r.status === 'ok') break;
    if (r.status === 'failed' && Number.isSafeInteger(r.new_domains)) n += r.new_domains as number;
  }
  return n;
}

/** The hours (run names) of committed runs among `records` (runs.jsonl lines), the latest last. */
export function committedRuns(records: readonly unknown[]): string[] {
  const out: string[] = [];
  for (const x of records) {
    const r = x as { status?: unknown; run?: unknown };
    if (r.status === 'ok' && typeof r.run === 'string') out.push(r.run);
  }
  return out.sort();
}

/**
 * The committed run that sent a URL current_log holds since `timestamp` (the first run,
 * by its now, not before that sighting) when another master published that run's hour:
 * its name and that master; else null. `records`: runs.jsonl's lines.
 */
export function sentByOther(records: readonly unknown[], timestamp: string): { run: string; master: string } | null {
  let first: { now: string; run: string; by: unknown } | null = null;
  for (const x of records) {
    const r = x as { status?: unknown; now?: unknown; run?: unknown; published_by?: unknown };
    if (r.status !== 'ok' || typeof r.now !== 'string' || typeof r.run !== 'string' || r.now < timestamp) continue;
    if (first === null || r.now < first.now) first = { now: r.now, run: r.run, by: r.published_by };
  }
  return first !== null && typeof first.by === 'string' ? { run: first.run, master: first.by } : null;
}
