// explain's one-line verdict on a URL, told relative to the job's now: the now of the
// committed run that made current_log forget latest (with one --keep, the latest now),
// which is where current_log stands until the next run.
import * as path from 'node:path';
import { formatTimestamp, timestampToMs } from '../../core/time.js';
import { mostForgetful } from '../state/run-history.js';
import type { YacobotRef } from '../../core/store/partner-view.js';

/** The job's now: the committed run current_log stands at, and its now. */
export interface JobNow {
  run: string;
  now: string;
}

/** What the verdict reads of an explained URL. */
export interface VerdictFacts {
  invalid: string | null;
  owner: YacobotRef | null;
  pick: YacobotRef | null;
  current: { due_at: string; kept_until: string } | null;
  sent_in: string[];
  /** The timestamp of the URL's record in the newest of sent_in, when it was read. */
  sent_timestamp?: string | null;
  /** The run that sent it when another master published that run's hour (this master remembered it). */
  sent_by?: { run: string; master: string } | null;
  rejected_in: { reason: string }[];
  /** Waiting in the carry (a per-domain cap): decided by run since_run (or at decided), its domain over the cap. */
  domain?: string | null;
  carried?: { decided: string; since_run: string | null; cap: number | null } | null;
}

/** The job's now from `records`, runs.jsonl's tail (`keepMs` for lines without keep_ms), or null when it holds no committed run. */
export function jobNow(records: readonly unknown[], keepMs: number): JobNow | null {
  const most = mostForgetful(records, keepMs);
  return most === null ? null : { run: most.run, now: most.now };
}

/**
 * The verdict, relative to `at` (null: no committed run is known): sent in RUN to
 * Yacobot N, then held back or due again, or forgotten; else never seen and would be
 * rejected, or rejected, or new.
 */
export function verdictOf(e: VerdictFacts, at: JobNow | null, keepMs: number): string {
  const c = e.carried;
  if (c) return `carried over since ${c.since_run ?? c.decided}: ${e.domain} is over its cap of ${c.cap ?? '?'}`;
  const newest = e.sent_in.at(-1);
  const byOther = e.sent_by ? `sent in ${e.sent_by.run} by master ${e.sent_by.master}` : null;
  const sent = newest === undefined ? byOther : `sent in ${path.basename(newest, '.tsv')} to Yacobot ${path.basename(path.dirname(newest))}`;
  const memory = e.current !== null ? heldOrDue(e.current.due_at, at) : sent !== null ? forgotten(e.sent_timestamp ?? null, at, keepMs) : null;
  if (memory !== null) return sent !== null ? `${sent}; ${memory}` : memory;
  if (e.invalid !== null) return e.rejected_in.length > 0 ? `rejected: ${e.invalid}` : `never seen; would be rejected: ${e.invalid}`;
  const rejected = e.rejected_in.at(-1)?.reason;
  if (rejected !== undefined) return `rejected: ${rejected}`;
  const to = (y: YacobotRef | null) => (y === null ? 'no active Yacobot' : yacobotName(y));
  return `new: goes out when next seen, to ${e.owner !== null ? to(e.owner) : `${to(e.pick)} (least-loaded pick now)`}`;
}

/** A URL current_log holds: held back until `due` (a sighting before it is not sent), or due again since it by the job's now (unknown: neither). */
function heldOrDue(due: string, at: JobNow | null): string {
  if (at === null) return `due again at ${due}`;
  return at.now < due ? `held back in ${at.run}; due again at ${due}` : `due again since ${due}: its next sighting is sent`;
}

/** A URL sent once that current_log no longer holds: forgotten at its sent timestamp + keep, when that is not after the job's now. */
function forgotten(sentTs: string | null, at: JobNow | null, keepMs: number): string {
  const when = sentTs === null ? null : formatTimestamp(new Date(timestampToMs(sentTs) + keepMs));
  if (when !== null && at !== null && when <= at.now) return `forgotten at ${when}: its next sighting is sent as new`;
  return 'not in current_log: its next sighting is sent as new';
}

/** "Yacobot ID (NAME)". */
export function yacobotName(y: YacobotRef): string {
  return `Yacobot ${y.id}${y.name ? ` (${y.name})` : ''}`;
}
