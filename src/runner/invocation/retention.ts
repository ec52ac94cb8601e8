// --keep-done: the processed reflogs (STATE/done/) and the rejects files
// (STATE/rejects/, STATE/rejects/failed/) older than a duration are removed after an
// invocation that committed a run.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { visibleName } from '../../core/errors.js';
import { formatDuration } from '../../core/time.js';
import type { Say } from '../say.js';
import { stateLayout } from '../state/layout.js';

/** The files --keep-done looks at: each directory and which of its entries. */
function retained(state: string): { dir: string; keep: (name: string) => boolean }[] {
  const tsv = (n: string) => n.endsWith('.tsv');
  const L = stateLayout(state);
  return [
    { dir: L.done, keep: () => true },
    { dir: L.rejects, keep: tsv },
    { dir: L.rejectsFailed, keep: tsv },
  ];
}

/**
 * Removes the files (and symlinks, not what they lead to) of done/, rejects/ and
 * rejects/failed/ last changed or moved there (the later of mtime and ctime; a rename
 * sets ctime) more than `keepMs` before `now`, but dot files (the runner's own temp
 * files). Returns the paths removed and, for each it could not, the error.
 */
export function removeOld(state: string, keepMs: number, now: number): { removed: string[]; failed: string[] } {
  const removed: string[] = [];
  const failed: string[] = [];
  for (const { dir, keep } of retained(state)) {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      continue; // none yet
    }
    let changed = false;
    for (const n of names.filter((x) => !x.startsWith('.') && keep(x))) {
      const f = path.join(dir, n);
      try {
        const st = fs.lstatSync(f);
        if (st.isDirectory() || now - Math.max(st.mtimeMs, st.ctimeMs) <= keepMs) continue;
        fs.unlinkSync(f);
        removed.push(f);
        changed = true;
      } catch (err) {
        failed.push(`${f}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
    }
    if (changed) fsyncPath(dir);
  }
  return { removed, failed };
}

/** --keep-done: removes done/ and rejects files older than `keepMs`, saying how many; what cannot be removed is warned about. */
export function keepDone(state: string, keepMs: number, say: Say): void {
  const { removed, failed } = removeOld(state, keepMs, Date.now());
  if (removed.length > 0) {
    say.tell(`removed ${removed.length} file(s) of done/ and rejects/ older than ${formatDuration(keepMs)} (--keep-done)`, {
      fields: { removed: removed.length, keep_done_ms: keepMs },
      msg: 'removed processed reflogs and rejects files older than --keep-done',
    });
  }
  for (const f of failed)
    say.warn(`cannot remove ${visibleName(f)} (older than --keep-done)`, { fields: { error: f }, msg: 'cannot remove a file older than --keep-done' });
}
