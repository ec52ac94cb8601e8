// What the runner leaves for those who watch it, at every exit: STATE/last-invocation.json
// and, after an invocation that took the lock or found it held (exit 75), the --metrics-file.
import { formatPlace, DataError, visibleName } from '../../core/errors.js';
import { interruptedRuns, isStuck, lockAgeMs, maxRunTimeOf, unhealthy, type HealthInput } from './health.js';
import { invocationRecord, writeLastInvocation, type LastInvocation, type Seen } from '../state/last-invocation.js';
import { lastRunKept } from '../state/last-run.js';
import { runsLog } from '../state/runs-log.js';
import { writeMetrics, type Health } from './metrics.js';
import type { RunnerOptions } from '../options/types.js';
import { lookFromOutside, type Outside } from './outside.js';
import { sayTo } from '../say.js';

/**
 * Records how the invocation ends (`exit`, `error`): the metrics file when `o` asks for
 * one and the lock was taken or found held, then the last-invocation file (saying whether
 * the metrics file was written) when `state` is known and exists. A failure of either is a
 * warning on stderr naming the file; it never changes the exit status.
 */
export async function recordEnd(o: RunnerOptions | null, state: string | null, seen: Seen, exit: number, error: string | null): Promise<void> {
  if (state === null) return;
  const runs = runsLog(state).tail();
  let rec: LastInvocation;
  try {
    rec = invocationRecord(state, seen, exit, error, runs);
  } catch (err) {
    return warnNotRecorded(err);
  }
  if (o?.metricsFile && (seen.lock || exit === 75)) rec.metrics_error = await recordMetrics(o, o.metricsFile, rec, runs);
  try {
    writeLastInvocation(state, rec);
  } catch (err) {
    warnNotRecorded(err);
  }
}

/** Writes the metrics file `file` for invocation `rec` (`runs`: runs.jsonl's tail); null when written, else the error (naming the file), also said on stderr. */
async function recordMetrics(o: RunnerOptions, file: string, rec: LastInvocation, runs: readonly unknown[]): Promise<string | null> {
  try {
    const run = lastRunKept(o.state, runs);
    const outside = lookFromOutside(o, run);
    await writeMetrics(file, { invocation: rec, outside, run, health: healthOf(o, rec, outside) });
    return null;
  } catch (err) {
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : `${file}: ${String((err as Error)?.message ?? err)}`;
    sayTo(null).warn(`cannot write the metrics file: ${visibleName(message)}`);
    return message;
  }
}

/** The health verdict as status gives it, seen at the end of invocation `rec` (the lock this process holds counts as free). */
function healthOf(o: RunnerOptions, rec: LastInvocation, outside: Outside): Health {
  const own = outside.lock.held && outside.lock.pid === process.pid;
  const lock = own ? { held: false, pid: null, host: null, since: null } : outside.lock;
  const h: HealthInput = {
    last: rec,
    success: rec.last_success,
    lock,
    interrupted: interruptedRuns(o.state),
    maxAgeMs: null,
    maxRunMs: maxRunTimeOf(o),
    now: Date.now(),
    fenced: rec.fenced ?? null,
  };
  const age = lockAgeMs(lock, h.now);
  return {
    healthy: unhealthy(h) === null,
    stuck: isStuck(h),
    lockAgeSeconds: age === null ? 0 : age / 1000,
    interrupted: h.interrupted.length,
    fenced: h.fenced !== null,
  };
}

/** Says on stderr that how this invocation ended could not be recorded, and why. */
function warnNotRecorded(err: unknown): void {
  const message = err instanceof DataError ? formatPlace(err.place, err.message) : String((err as Error)?.message ?? err);
  sayTo(null).warn(`cannot record how this invocation ended: ${visibleName(message)}`);
}
