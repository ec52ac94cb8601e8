// Re-sent hours: a reflog byte-identical to one a committed run of its name archived in
// STATE/done/ is set aside there, unprocessed, with a warning.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError, visibleName } from '../../core/errors.js';
import { fsyncPath } from '../../core/dirs.js';
import { mkdirDurable, moveDurable, sameBytes } from '../../core/durable.js';
import type { RunnerOptions } from '../options/types.js';
import { REFLOG_EXT } from '../state/inbox.js';
import type { Say } from '../say.js';
import { stateLayout } from '../state/layout.js';

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
function resentOf(file: string, done: string, name: string): { archived: string; st: fs.Stats } | null {
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
function setAside(file: string, before: fs.Stats, done: string, name: string): string {
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
 * When INBOX/NAME.reflog repeats byte for byte a reflog a committed run of NAME archived:
 * sets it aside in done/ with a warning, and returns true (nothing else is done with it).
 */
export function setAsideResent(o: Pick<RunnerOptions, 'inbox' | 'state'>, say: Say, name: string): boolean {
  const file = path.join(o.inbox, name + REFLOG_EXT);
  const done = stateLayout(o.state).done;
  const same = resentOf(file, done, name);
  if (same === null) return false;
  const to = setAside(file, same.st, done, name);
  if (to === file) return false; // another file came under its name meanwhile: it runs
  say.warn(
    `${visibleName(file)}: the same bytes as ${visibleName(same.archived)}, which a committed run of ${visibleName(name)} read: ` +
      `a re-sent hour, set aside as ${visibleName(to)}; nothing was run (to replay the hour, move the reflog from done/ into the inbox)`,
    { fields: { run: name, reflog: file, archived: same.archived, set_aside: to }, msg: 're-sent hour set aside' },
  );
  return true;
}
