// The now of a run: from --now, the hour its name starts with, or the clock; the hours
// that must wait (not begun, no real hour); the warning of a replay whose URLs
// current_log has forgotten.
import { formatDuration, formatTimestamp, isValidTimestamp, timestampToMs } from '../../core/time.js';
import type { CommittedNow } from '../state/run-history.js';
import type { NowSource } from '../state/run-record.js';

/** The start of the hour a run name starts with (YYYYMMDDhh...) as a timestamp, or null when it starts with no real hour. */
function hourStartOf(name: string): string | null {
  const m = /^(\d{10})/.exec(name);
  if (!m) return null;
  const start = `${m[1]}0000`;
  return isValidTimestamp(start) ? start : null;
}

/**
 * The end of the hour a run name starts with (YYYYMMDDhh...), as a timestamp in the
 * local zone, or null when the name does not start with a real hour.
 */
export function hourEndOf(name: string): string | null {
  const start = hourStartOf(name);
  if (start === null) return null;
  const end = formatTimestamp(new Date(timestampToMs(start) + 3_600_000));
  // The last hour of 9999 ends in a year of five digits, which no stage takes as a time.
  return isValidTimestamp(end) ? end : null;
}

/**
 * Why a run whose now comes from its name must wait: its hour has not begun by `clock`
 * (a typo, 2107 for 2011). Its now would have filter-url drop every current_log entry
 * last seen `keepMs` before it, and the hours after it send all of them again. Null
 * when the name starts with no hour, or one that has begun.
 */
export function hourNotBegun(name: string, clock: Date, keepMs: number): string | null {
  const start = hourStartOf(name);
  if (start === null || timestampToMs(start) <= clock.getTime()) return null;
  const end = hourEndOf(name);
  const forgets = end === null ? 'every URL' : `every URL last seen before ${formatTimestamp(new Date(timestampToMs(end) - keepMs))}`;
  return (
    `its hour (${start}) has not begun by this machine's clock (${formatTimestamp(clock)}): a typo in the name? ` +
    `Run now, it would make current_log forget ${forgets}; it runs once its hour has begun (or rename it)`
  );
}

/**
 * Why a run whose now would come from the clock must wait: its name starts with what
 * reads as an hour stamp YYYYMMDDhh (month 01-12, day 01-31, hour 00-29) but is no real
 * hour (2011072824, 2011023112: a typo), so its now would be the clock's, far from the
 * hour meant, and filter-url would drop every current_log entry not seen within `--keep`
 * of that. Null for a real hour, and for other names, ten digits too (epoch seconds
 * 1311836400, a sequence number 0000000042): those run on the clock.
 */
export function notAnHour(name: string): string | null {
  if (!/^\d{4}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])[0-2]\d/.test(name) || hourEndOf(name) !== null) return null;
  return (
    `its name starts with ${name.slice(0, 10)}, which is no real hour (YYYYMMDDhh): a typo in the name? ` +
    "Its now would be this machine's clock, and current_log would forget every URL not seen since --keep before that; rename it (or give --now)"
  );
}

/** The "now" of a new run: --now, else the end of the name's hour, else the clock (see USAGE). */
export function resolveNow(name: string, flagNow: string | null, clock: Date): { now: string; source: NowSource } {
  if (flagNow !== null) return { now: flagNow, source: 'flag' };
  const h = hourEndOf(name);
  if (h !== null) return { now: h, source: 'name' };
  return { now: formatTimestamp(clock), source: 'clock' };
}

/**
 * The warning for run `run` with `now` when run `most` (mostForgetful) has made
 * current_log forget what was last seen at `now` (`replayed`: a run of that name was
 * committed before) or after it (a reflog that comes late), else null. filter-url, at
 * that run, dropped every current_log entry last seen its --keep (`most.keepMs`, else
 * `keepMs`) or more before its now: at exactly that, all of this run's own hour, which
 * only a replay had recorded; beyond, the hours after it as well.
 */
export function replayWarning(run: string, now: string, most: CommittedNow | null, keepMs: number, replayed: boolean): string | null {
  if (most === null) return null;
  const keep = most.keepMs ?? keepMs;
  const mostMs = timestampToMs(most.now);
  const older = mostMs - timestampToMs(now);
  if (older <= 0 || older < keep || (older === keep && !replayed)) return null;
  const forgotten = formatTimestamp(new Date(mostMs - keep));
  const ran = most.keepMs === undefined ? `, and --keep is ${formatDuration(keep)}` : `, which ran with --keep ${formatDuration(keep)}`;
  return (
    `${run}: its now (${now}) is ${formatDuration(older)} older than that of run ${most.run} (${most.now})${ran}: ` +
    `current_log has forgotten the URLs last seen up to ${forgotten}, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)`
  );
}
