// --keep-done at the end of an invocation.
import type { Logger } from 'pino';
import { visibleName } from '../core/errors.js';
import { formatDuration } from '../core/time.js';
import { PROG, type RunnerOptions } from './options.js';
import { removeOld } from './retention.js';

/** --keep-done: removes done/ and rejects files older than `keepMs`, saying how many; what cannot be removed is warned about. */
export function keepDone(o: RunnerOptions, log: Logger, keepMs: number): void {
  const { removed, failed } = removeOld(o.state, keepMs, Date.now());
  if (removed.length > 0) {
    log.info({ removed: removed.length, keep_done_ms: keepMs }, 'removed processed reflogs and rejects files older than --keep-done');
    process.stderr.write(`${PROG}: removed ${removed.length} file(s) of done/ and rejects/ older than ${formatDuration(keepMs)} (--keep-done)\n`);
  }
  for (const f of failed) {
    log.warn({ error: f }, 'cannot remove a file older than --keep-done');
    process.stderr.write(`${PROG}: warning: cannot remove ${visibleName(f)} (older than --keep-done)\n`);
  }
}
