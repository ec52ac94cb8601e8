// --keep-done at the end of an invocation.
import { visibleName } from '../core/errors.js';
import { formatDuration } from '../core/time.js';
import { removeOld } from './retention.js';
import type { Say } from './say.js';

/** --keep-done: removes done/ and rejects files older than `keepMs`, saying how many; what cannot be removed is warned about. */
export function keepDone(state: string, keepMs: number, say: Say): void {
  const { removed, failed } = removeOld(state, keepMs, Date.now());
  if (removed.length > 0) {
    say.tell(`removed ${removed.length} file(s) of done/ and rejects/ older than ${formatDuration(keepMs)} (--keep-done)`, {
      fields: { removed: removed.length, keep_done_ms: keepMs },
      msg: 'removed processed reflogs and rejects files older than --keep-done',
    });
  }
  for (const f of failed) say.warn(`cannot remove ${visibleName(f)} (older than --keep-done)`, { fields: { error: f }, msg: 'cannot remove a file older than --keep-done' });
}
