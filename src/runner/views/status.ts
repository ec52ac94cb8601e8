// reflog-to-yacobot-queue status: whether the job is healthy, for a person or a
// monitoring check (exit 0 healthy, 1 not). Reads only; takes no lock.
import { formatDuration } from '../../core/time.js';
import { visibleName } from '../../core/errors.js';
import { PROG } from '../say.js';
import { interruptedRuns, isStuck, lockAgeMs, maxRunTimeOf, unhealthy, type Interrupted } from './health.js';
import { type Fenced, fencedNow, lastSuccess, readLastInvocation, type LastInvocation, type LastSuccess } from '../state/last-invocation.js';
import { lastCommitted } from '../state/run-history.js';
import { runsLog } from '../state/runs-log.js';
import { noStateHint } from './no-state.js';
import { lookFromOutside, type Outside } from './outside.js';
import type { SubArgs } from './sub-args.js';

export const STATUS_USAGE = `Usage: ${PROG} status [--json] [--max-age DURATION] [options]

Says whether the job is healthy: exit 0 when the last invocation committed its
runs or had nothing to do, or found the lock held by a run that is not stuck
(and, with --max-age, the last committed run is no older than DURATION), 1
otherwise (a failed run, a lock held past --max-run-time, a run a killed
invocation left unfinished, a state fenced as a copy of another, a metrics
file that cannot be written, a config error, no invocation recorded yet). Usable as a monitoring check as it stands.

Shows the last invocation (result, time, error), the last committed run (run,
time, seconds), the reflogs waiting in the inbox (count, oldest age), each
Yacobot's backlog now, the lock (held, by which process, and whether that
process still runs: a runner killed alone leaves its stages holding it; status
names them, not healthy) and current_log's
size, and with a per-domain cap the URLs waiting in the carry (the age of the
oldest told from the last run's now) and those the last run dropped from it
after --carry-keep. Reads only, takes no lock: safe beside a running invocation.

  --json                  one JSON object: healthy, reason, last_success,
                          last_invocation, inbox, backlog, lock, lock_age_seconds,
                          stuck, interrupted, current_log_urls, carry (with
                          --max-per-domain; else null), fenced (null, or the
                          copy of this state that holds its identity)
  --max-age DURATION      unhealthy also when the last committed run is older
                          (90m, 2h, 1d or seconds)
  options                 the runner's (--config, --state, --inbox, --queue-dir, ...)
`;

/** What status reports, as its JSON has it. */
export interface Status {
  healthy: boolean;
  /** Why it is not healthy; null when it is. */
  reason: string | null;
  last_success: LastSuccess | null;
  last_invocation: LastInvocation | null;
  inbox: Outside['inbox'];
  backlog: Outside['backlog'];
  lock: Outside['lock'];
  /** How long the lock's holder has held it; null when it is free. */
  lock_age_seconds: number | null;
  /** The lock is held past --max-run-time. */
  stuck: boolean;
  /** Runs a killed invocation left in STATE/staging/ (those of a live holder included). */
  interrupted: Interrupted[];
  current_log_urls: number | null;
  carry: Outside['carry'];
  /** The state is a copy that another copy of it outran: it publishes nothing (null: it is not). */
  fenced: Fenced | null;
}

/** Prints the status and returns the exit status (0 healthy, 1 not). */
export function status(a: SubArgs, now = Date.now()): number {
  const last = readLastInvocation(a.o.state);
  const runs = runsLog(a.o.state).tail();
  const success = lastSuccess(runs, last);
  const { lock, current_log_urls, ...outside } = lookFromOutside(a.o, lastCommitted(runs), now);
  const h = {
    last,
    success,
    lock,
    interrupted: interruptedRuns(a.o.state),
    maxAgeMs: a.maxAgeMs,
    maxRunMs: maxRunTimeOf(a.o),
    now,
    noState: noStateHint(a.o),
    fenced: fencedNow(a.o.state, last),
  };
  const why = unhealthy(h);
  const age = lockAgeMs(lock, now);
  const s: Status = {
    healthy: why === null,
    reason: why,
    last_success: success,
    last_invocation: last,
    ...outside,
    lock,
    lock_age_seconds: age === null ? null : Math.round(age / 1000),
    stuck: isStuck(h),
    interrupted: h.interrupted,
    current_log_urls,
    fenced: h.fenced,
  };
  process.stdout.write(a.json ? JSON.stringify(s, null, 2) + '\n' : humanStatus(s, why, now));
  return s.healthy ? 0 : 1;
}

/** `iso` and how long ago it was. */
function when(iso: string, now: number): string {
  return `${iso} (${formatDuration(Math.max(0, now - Date.parse(iso)))} ago)`;
}

/** The carry for a person: how many URLs wait, since when (by the job's now), how many its last run dropped, and the domains over their cap. */
function carryLine(c: NonNullable<Status['carry']>): string {
  const since =
    c.oldest_decided === null
      ? ''
      : `, the oldest decided at ${c.oldest_decided} (${formatDuration((c.oldest_age_seconds ?? 0) * 1000)} before the job's now, ${c.as_of})`;
  const keep = c.keep_seconds === null ? '' : ` after --carry-keep ${formatDuration(c.keep_seconds * 1000)}`;
  const expired = `; ${c.expired} URLs expired from it in the last run${c.expired > 0 ? `${keep}, never sent` : ''}`;
  const over = Object.entries(c.capped_domains).map(([d, n]) => `${d} ${n}`);
  return `carry: ${c.urls} URLs waiting for a later run${since}${expired}${over.length > 0 ? `; over the cap in the last run: ${over.join(', ')}` : ''}`;
}

/** The status for a person, one fact a line. */
export function humanStatus(s: Status, why: string | null, now: number): string {
  const lines = [why === null ? 'healthy' : `NOT healthy: ${why}`];
  const inv = s.last_invocation;
  if (inv !== null) {
    const runs = inv.runs.length > 0 ? `; committed ${inv.runs.join(', ')}` : '';
    lines.push(`last invocation: ${inv.result} (exit ${inv.exit}) at ${when(inv.at, now)}${runs}`);
    if (inv.error) lines.push(`  error: ${visibleName(inv.error)}`);
  } else lines.push('last invocation: none recorded');
  const ok = s.last_success;
  const by = ok?.published_by === undefined ? '' : `; published by master ${ok.published_by} (remembered here, not published)`;
  lines.push(ok ? `last success: run ${ok.run}, committed at ${when(ok.at, now)}, in ${ok.seconds} s${by}` : 'last success: no run committed yet');
  const age = s.inbox.oldest_age_seconds;
  lines.push(`inbox: ${s.inbox.reflogs} reflog(s) waiting${age !== null ? `, the oldest for ${formatDuration(age * 1000)}` : ''}`);
  const backlog = Object.entries(s.backlog).map(([id, b]) => `Yacobot ${id}: ${b.urls} URLs in ${b.files} file(s)`);
  lines.push(`backlog: ${backlog.length > 0 ? backlog.join('; ') : 'no queue files waiting'}`);
  const l = s.lock;
  const held = s.lock_age_seconds === null ? '' : ` (${formatDuration(s.lock_age_seconds * 1000)}${s.stuck ? ', stuck' : ''})`;
  const left = (l.left ?? []).map((p) => `${p.pid} ${p.name}`).join(', ');
  const dead = l.holder_alive === false ? `, which has ended; ${left === '' ? 'processes this user cannot see hold it now' : `held now by ${left}`}` : '';
  lines.push(
    l.held ? `lock: held by process ${l.pid ?? '?'}${l.host ? ` on ${l.host}` : ''}${l.since ? ` since ${l.since}` : ''}${held}${dead}` : 'lock: free',
  );
  for (const r of s.interrupted) lines.push(`staging: run ${r.run} ${r.committed ? 'committed, not fully published' : 'not committed'}`);
  lines.push(`current_log: ${s.current_log_urls === null ? 'missing' : `${s.current_log_urls} URLs`}`);
  if (s.fenced !== null)
    lines.push(`identity: fenced, a copy of master ${visibleName(s.fenced.master)}'s state at ${visibleName(s.fenced.place)} (last at ${s.fenced.seen_at})`);
  if (s.carry !== null) lines.push(carryLine(s.carry));
  return lines.join('\n') + '\n';
}
