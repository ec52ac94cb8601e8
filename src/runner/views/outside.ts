// What the job looks like from outside, read without the lock and without writing:
// the inbox, each Yacobot's backlog, the lock's holder, current_log's size. Shared by
// status and the metrics file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { countBacklog, type Backlog } from '../state/queue-dir.js';
import { countLines } from '../../core/lines.js';
import { stateLayout } from '../state/layout.js';
import { type LockState, lockNow } from '../state/lock.js';
import { planInbox } from '../state/inbox.js';
import type { RunRecord } from '../state/run-record.js';
import { isValidTimestamp, timestampToMs } from '../../core/time.js';

/** The reflogs waiting in the inbox: how many, and the age of the oldest (by its mtime) in seconds. */
export interface Inbox {
  reflogs: number;
  oldest_age_seconds: number | null;
}

/** Everything status and the metrics file show beside the last invocation. */
export interface Outside {
  inbox: Inbox;
  backlog: Backlog;
  lock: LockState;
  current_log_urls: number | null;
  /** With a per-domain cap: the URLs waiting in STATE/carry; null without one. */
  carry: CarryNow | null;
}

/** The carry as the last committed run left it (only a commit replaces it). */
export interface CarryNow {
  urls: number;
  /** When the oldest waiting URL was decided (a run's now), and how long ago, in seconds. */
  oldest_decided: string | null;
  oldest_age_seconds: number | null;
  /** The domains over their cap in that run: domain -> URLs held back (the 10 that held back most). */
  capped_domains: Record<string, number>;
}

/**
 * Reads the inbox, the queue directories, the lock and current_log as they are now;
 * `run`, the last committed run, tells current_log's size (only a commit replaces it)
 * without reading it.
 */
export function lookFromOutside(o: { inbox: string; state: string; queueDir: string }, run: RunRecord | null, now = Date.now()): Outside {
  return {
    inbox: inboxNow(o.inbox, now),
    backlog: countBacklog(o.queueDir),
    lock: lockNow(stateLayout(o.state).lock),
    current_log_urls: currentLogUrls(stateLayout(o.state).currentLog, run),
    carry: carryNow(run, now),
  };
}

/** What `run` (the last committed run) left in the carry, or null when limit-domains did not run in it. */
function carryNow(run: RunRecord | null, now: number): CarryNow | null {
  if (run === null || typeof run.carried_out !== 'number') return null;
  const oldest =
    run.carried_out > 0 && typeof run.carry_oldest_decided === 'string' && isValidTimestamp(run.carry_oldest_decided) ? run.carry_oldest_decided : null;
  return {
    urls: run.carried_out,
    oldest_decided: oldest,
    oldest_age_seconds: oldest === null ? null : Math.max(0, Math.round((now - timestampToMs(oldest)) / 1000)),
    capped_domains: run.capped_domains ?? {},
  };
}

/** The *.reflog files of `dir` (those a run would take or skip with a warning). */
function inboxNow(dir: string, now: number): Inbox {
  let entries: string[];
  try {
    entries = fs.readdirSync(dir);
  } catch {
    return { reflogs: 0, oldest_age_seconds: null };
  }
  const plan = planInbox(entries);
  const files = [...plan.runs.map((r) => `${r}.reflog`), ...plan.skipped.map((s) => s.file)];
  let oldest: number | null = null;
  for (const f of files) {
    const mtime = fs.statSync(path.join(dir, f), { throwIfNoEntry: false })?.mtimeMs;
    if (mtime !== undefined && (oldest === null || mtime < oldest)) oldest = mtime;
  }
  return { reflogs: files.length, oldest_age_seconds: oldest === null ? null : Math.max(0, Math.round((now - oldest) / 1000)) };
}

/** The URLs of current_log `file`: what `run` wrote there, else its line count; null when it is missing or cannot be read. */
function currentLogUrls(file: string, run: RunRecord | null): number | null {
  if (!fs.existsSync(file)) return null;
  const written = run?.stages['filter-url']?.current_out;
  if (typeof written === 'number') return written;
  try {
    return countLines(file);
  } catch {
    return null;
  }
}
