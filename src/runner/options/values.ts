// Each option's value checked as its reader will read it (a value a stage would refuse
// would fail every run), with its default; a UsageError names where a wrong one was set.
import * as os from 'node:os';
import { DEFAULT_CARRY_KEEP, DEFAULT_KEEP, DEFAULT_RESEND_AFTER } from '../../core/defaults.js';
import { dbNameProblem } from '../../core/db-uri.js';
import { UsageError, clipText } from '../../core/errors.js';
import { parseGroupedCount, parseRatio, ratioError } from '../../core/numbers.js';
import { parseBudget } from '../../core/size.js';
import { TIMEOUT_OPTIONS, camelOf, isPgUri, timeoutsOf } from '../../core/store/store.js';
import { isValidTimestamp, parseDuration } from '../../core/time.js';
import { stateLayout } from '../state/layout.js';
import type { OptionReader } from './reader.js';
import type { RunnerOptions } from './types.js';

/** --max-run-time when unset. */
export const DEFAULT_MAX_RUN_TIME = '50m';

/** The longest --kill-after and --max-run-time: a day (a timer cannot wait beyond about 24 days). */
const MAX_KILL_AFTER_MS = 86400 * 1000;

/** --now, checked as a real time, or null. */
export function nowOption(o: OptionReader): string | null {
  const now = o.get('now') ?? null;
  if (now !== null && !isValidTimestamp(now)) throw new UsageError(`${o.named('now')} wants a real time as YYYYMMDDhhmmss, got '${clipText(now)}'`);
  return now;
}

/** --master-name (printable, no spaces; default the host name) and --claim-lease. */
export function masterOptions(o: OptionReader): Pick<RunnerOptions, 'masterName' | 'claimLeaseMs'> {
  const masterName = o.get('master-name') ?? os.hostname();
  if (!/^[\x21-\x7e]{1,200}$/.test(masterName))
    throw new UsageError(`${o.named('master-name')} wants a name of 1 to 200 printable ASCII characters without spaces, got '${clipText(masterName)}'`);
  const cl = o.get('claim-lease') ?? '2m';
  const claimLeaseMs = parseDuration(cl);
  if (claimLeaseMs === null) throw new UsageError(`${o.named('claim-lease')} wants a duration like 2m, 90s or seconds, got '${clipText(cl)}'`);
  return { masterName, claimLeaseMs };
}

/** --backlog-warn as a number of URLs. */
export function backlogWarnOption(o: OptionReader): number {
  const bw = o.get('backlog-warn') ?? '1000000';
  const backlogWarn = parseGroupedCount(bw);
  if (backlogWarn === null) throw new UsageError(`${o.named('backlog-warn')} wants a number of URLs, got '${clipText(bw)}'`);
  return backlogWarn;
}

/** --keep and --resend-after (filter-url's defaults when unset), each as given and in ms; keep may not be the shorter. */
export function keepOptions(o: OptionReader): { keep: { v: string; ms: number }; resend: { v: string; ms: number } } {
  const duration = (k: 'keep' | 'resend-after') => {
    const v = o.get(k) ?? (k === 'keep' ? DEFAULT_KEEP : DEFAULT_RESEND_AFTER);
    const ms = parseDuration(v);
    if (ms === null) throw new UsageError(`${o.named(k)} wants a duration like 90s, 30m, 1h, 10h, 1d or seconds (at most 3650d), got '${clipText(v)}'`);
    return { v, ms };
  };
  const keep = duration('keep');
  const resend = duration('resend-after');
  // The job promises a URL at most once per resend-after; a current_log entry dropped
  // after a shorter keep would let it come back as new and be sent early.
  if (keep.ms < resend.ms) {
    throw new UsageError(
      `keep (${keep.v}) is shorter than resend-after (${resend.v}): a URL unseen for longer than keep would be sent again before resend-after; set keep at least as long`,
    );
  }
  return { keep, resend };
}

/** --max-per-domain (none when unset) and --carry-keep (limit-domains' default when unset). */
export function capOptions(o: OptionReader): Pick<RunnerOptions, 'maxPerDomain' | 'carryKeepMs'> {
  const m = o.get('max-per-domain');
  const maxPerDomain = m === undefined ? null : parseGroupedCount(m);
  if (maxPerDomain === 0 || (maxPerDomain === null && m !== undefined) || (maxPerDomain ?? 0) > 2 ** 31) {
    throw new UsageError(`${o.named('max-per-domain')} wants a number of URLs from 1 to 2147483648, got '${clipText(m!)}'`);
  }
  const ck = o.get('carry-keep') ?? DEFAULT_CARRY_KEEP;
  const carryKeepMs = parseDuration(ck);
  if (carryKeepMs === null) throw new UsageError(`${o.named('carry-keep')} wants a duration like 10h, 1d or seconds (at most 3650d), got '${clipText(ck)}'`);
  return { maxPerDomain, carryKeepMs };
}

/** --max-reject-ratio, --memory, --log-level, --kill-after and --keep-done, each checked as its reader would. */
export function stageOptions(o: OptionReader): Pick<RunnerOptions, 'maxRejectRatio' | 'memory' | 'logLevel' | 'killAfterMs' | 'keepDoneMs'> {
  const ratio = o.get('max-reject-ratio');
  // Read as analyze-dump reads it: a value it would refuse would fail every run.
  if (ratio !== undefined && parseRatio(ratio) === null) throw ratioError(o.named('max-reject-ratio'), clipText(ratio));
  const memory = o.get('memory');
  const budget = memory === undefined ? 0 : parseBudget(memory);
  if (typeof budget !== 'number') throw new UsageError(`${o.named('memory')} ${budget.error}`);
  const logLevel = o.get('log-level') ?? 'info';
  if (!['debug', 'info', 'warn', 'error', 'silent'].includes(logLevel)) {
    throw new UsageError(`${o.named('log-level')} is one of debug, info, warn, error, silent; got '${clipText(logLevel)}'`);
  }
  const ka = o.get('kill-after') ?? '10s';
  const killAfterMs = parseDuration(ka);
  if (killAfterMs === null || killAfterMs > MAX_KILL_AFTER_MS) {
    throw new UsageError(`${o.named('kill-after')} wants a duration like 5s, 1m or seconds, at most 1d; got '${clipText(ka)}'`);
  }
  const kd = o.get('keep-done');
  const keepDoneMs = kd === undefined ? null : parseDuration(kd);
  if (keepDoneMs === null && kd !== undefined)
    throw new UsageError(`${o.named('keep-done')} wants a duration like 7d, 12h or seconds (at most 3650d), got '${clipText(kd)}'`);
  return { maxRejectRatio: ratio ?? null, memory: memory ?? null, logLevel, killAfterMs, keepDoneMs };
}

/** --max-run-time in ms: a duration above 0, at most a day (50m when unset: an hourly job ends before the next hour's). */
export function maxRunTimeOption(o: OptionReader): number {
  const v = o.get('max-run-time') ?? DEFAULT_MAX_RUN_TIME;
  const ms = parseDuration(v);
  if (ms === null || ms === 0 || ms > MAX_KILL_AFTER_MS)
    throw new UsageError(`${o.named('max-run-time')} wants a duration like 50m, 2h or seconds, above 0 and at most 1d; got '${clipText(v)}'`);
  return ms;
}

/** --db (STATE/partner.db by default; a postgres:// URI as it is; one that is neither a file path nor a PostgreSQL URI refused) and the time-outs, as the stages take them. */
export function dbOptions(o: OptionReader, state: string): Pick<RunnerOptions, 'db' | 'dbArgs' | 'dbTimeouts'> {
  const given = o.get('db');
  const problem = given === undefined ? null : dbNameProblem(given);
  if (problem !== null) throw new UsageError(`${o.named('db')} is ${problem}`);
  const db = given !== undefined ? (isPgUri(given) ? given : o.pathOf('db', '')) : stateLayout(state).partnerDb;
  const dbArgs: string[] = [];
  const raw: Record<string, string> = {};
  for (const [k] of TIMEOUT_OPTIONS) {
    const v = o.get(k);
    if (v === undefined) continue;
    raw[camelOf(k)] = v;
    dbArgs.push(`--${k}`, v);
  }
  // Read as the stages read them: a value they would refuse would fail every run.
  return { db, dbArgs, dbTimeouts: timeoutsOf(raw) };
}
