// What the runner leaves for those who watch it, at every exit: STATE/last-invocation.json
// and, after an invocation that took the lock, the --metrics-file.
import { formatPlace, DataError, visibleName } from '../core/errors.js';
import { invocationRecord, lastCommittedRun, writeLastInvocation, type LastInvocation, type Seen } from './last-invocation.js';
import { writeMetrics } from './metrics.js';
import { PROG, type RunnerOptions } from './options.js';
import { lookFromOutside } from './outside.js';

/**
 * Records how the invocation ends (`exit`, `error`): the last-invocation file when
 * `state` is known and exists, the metrics file when `o` asks for one and the lock was
 * taken. A failure of either is a warning on stderr; it never changes the exit status.
 */
export async function recordEnd(o: RunnerOptions | null, state: string | null, seen: Seen, exit: number, error: string | null): Promise<void> {
  if (state === null) return;
  let rec: LastInvocation;
  try {
    rec = invocationRecord(state, seen, exit, error);
    writeLastInvocation(state, rec);
  } catch (err) {
    return warnNotRecorded(err);
  }
  if (!o?.metricsFile || !seen.lock) return;
  try {
    const run = lastCommittedRun(state);
    await writeMetrics(o.metricsFile, { invocation: rec, outside: lookFromOutside(o, run), run });
  } catch (err) {
    warnNotRecorded(err);
  }
}

/** Says on stderr that how this invocation ended could not be recorded, and why. */
function warnNotRecorded(err: unknown): void {
  const message = err instanceof DataError ? formatPlace(err.place, err.message) : String((err as Error)?.message ?? err);
  process.stderr.write(`${PROG}: warning: cannot record how this invocation ended: ${visibleName(message)}\n`);
}
