// Re-sent hours: a reflog byte-identical to one a committed run of its name archived in
// STATE/done/ is set aside there, unprocessed; a run whose name still has queue files a
// Yacobot has not taken gets queue files of a name of its own.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from '../core/errors.js';
import { formatTimestamp } from '../core/time.js';
import { fsyncPath } from '../core/dirs.js';
import { mkdirDurable, moveDurable, sameBytes } from '../core/durable.js';
import { queueNameTaken } from './commit.js';
import { REFLOG_EXT } from './plan.js';

/** The reflogs committed runs of `name` archived: done/NAME.reflog and its numbered backups done/NAME.reflog.~N~. */
function archivedReflogs(done: string, name: string): string[] {
  let entries: string[];
  try {
    entries = fs.readdirSync(done);
  } catch {
    return [];
  }
  const base = name + REFLOG_EXT;
  return entries.filter((f) => f === base || (f.startsWith(`${base}.~`) && /^\d{1,9}~$/.test(f.slice(base.length + 2)))).map((f) => path.join(done, f));
}

/**
 * The archived reflog of a committed run of `name` that `file` (a regular file in the
 * inbox, not a link) repeats byte for byte, or null. A file that is the archived one
 * itself (a replay made with ln) is no re-send.
 */
export function resentOf(file: string, done: string, name: string): { archived: string; st: fs.Stats } | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch {
    return null; // the run reports what it cannot read
  }
  if (!st.isFile()) return null;
  for (const a of archivedReflogs(done, name)) {
    try {
      const at = fs.statSync(a);
      if (!at.isFile() || at.size !== st.size || (at.dev === st.dev && at.ino === st.ino)) continue;
      if (sameBytes(file, a)) return { archived: a, st };
    } catch {
      /* unreadable: not the same */
    }
  }
  return null;
}

/**
 * Moves the re-sent reflog `file` (`before`: its lstat when compared) to
 * done/NAME.reflog.resent.~N~ (N one more than the highest there) and returns that path.
 * Should another file have been renamed over the inbox name since, that one is put back.
 */
export function setAside(file: string, before: fs.Stats, done: string, name: string): string {
  const prefix = `${name}${REFLOG_EXT}.resent.~`;
  let last = 0;
  for (const f of fs.readdirSync(done)) {
    const m = f.startsWith(prefix) ? /^(\d{1,9})~$/.exec(f.slice(prefix.length)) : null;
    if (m) last = Math.max(last, Number(m[1]));
  }
  mkdirDurable(done);
  const to = path.join(done, `${prefix}${last + 1}~`);
  moveDurable(file, to);
  const after = fs.statSync(to);
  if (after.ino !== before.ino && after.dev === before.dev) {
    try {
      fs.linkSync(to, file);
      fs.unlinkSync(to);
      fsyncPath(path.dirname(file));
    } catch (err) {
      throw ioError(err, file, `put back (it came while ${to} was set aside as a re-sent hour)`);
    }
    return file;
  }
  return to;
}

/**
 * The name of the queue files of a new run of `name` started at `started`: the run's,
 * unless files of that name are still in a Yacobot's directory (a replay or a re-sent
 * hour whose earlier run's files were not taken yet): then NAME.replay-YYYYMMDDhhmmss,
 * with -2, -3... if that is there too. Publishing over them would replace URLs that
 * current_log records as sent.
 */
export function queueNameFor(queueDir: string, name: string, started: Date): string {
  if (!queueNameTaken(queueDir, name)) return name;
  const base = `${name}.replay-${formatTimestamp(started)}`;
  for (let k = 1; ; k++) {
    const candidate = k === 1 ? base : `${base}-${k}`;
    if (!queueNameTaken(queueDir, candidate)) return candidate;
  }
}
