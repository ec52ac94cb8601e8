// STATE/done/: the reflogs of the committed runs, as the commit archived them (an earlier
// run's of the same name kept under a numbered name, RUN.reflog.~N~, is not listed).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REFLOG_EXT } from './inbox.js';
import { stateLayout } from './layout.js';

/** A committed run's reflog in done/: its run name and its path. */
export interface DoneReflog {
  run: string;
  file: string;
}

/** The reflogs in STATE/done/ (`*.reflog`, dot files left out), by name; none when done/ is missing. */
export function doneReflogs(state: string): DoneReflog[] {
  const dir = stateLayout(state).done;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.endsWith(REFLOG_EXT) && n.length > REFLOG_EXT.length && !n.startsWith('.'))
    .sort()
    .map((n) => ({ run: n.slice(0, -REFLOG_EXT.length), file: path.join(dir, n) }));
}
