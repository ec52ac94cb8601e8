// The checks on the inbox and the state directory before an invocation runs anything:
// the inbox is a directory this user can move reflogs out of, runs.jsonl is a regular
// file, and each place a run's commit writes can be written.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { symlinkTarget } from '../../core/durable.js';
import { DataError, UsageError } from '../../core/errors.js';
import type { StateDirs } from '../options/types.js';
import { COMMIT_WRITES, stateLayout } from '../state/layout.js';

/**
 * Throws before anything runs when the inbox is not a directory (a UsageError: a wrong
 * --inbox, found before anything is created under --state) or cannot be written (a
 * DataError).
 */
export function checkInbox(inbox: string): void {
  if (!isDirectoryOrUnreadable(inbox)) throw new UsageError(`--inbox ${inbox}: is not an existing directory (check --inbox, or create it)`);
  // A committed run's last step moves its reflog out of the inbox. In an inbox that does
  // not allow it, every run would publish its queue files and then fail, and every later
  // invocation would roll it forward, publishing them again, hour after hour.
  try {
    fs.accessSync(inbox, fs.constants.W_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new DataError('INBOX_READ_ONLY', `cannot move processed reflogs out of the inbox: ${code}; nothing was run`, { file: inbox });
  }
}

/**
 * Throws a DataError unless `file` (runs.jsonl) is missing or a regular file. Each run's
 * commit steps append its line there, after its queue files are out: into a FIFO or a
 * directory that append fails, and so does the roll forward of every later invocation,
 * each run held up behind it. (Opening a FIFO to read the newest committed run would
 * also hold the start-up for ever, deaf to SIGTERM.)
 */
export function checkRunsFile(file: string): void {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file, { throwIfNoEntry: false });
  } catch {
    return; // what cannot be stat'ed is reported by the read or append that fails on it
  }
  if (st === undefined || st.isFile()) return;
  const what = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'not a regular file';
  throw new DataError('RUNS_NOT_FILE', `is ${what}: the run records go to a regular file; move it aside (the runner starts a new one); nothing was run`, {
    file,
  });
}

/**
 * Throws a DataError naming the first place a run's commit must write but this user
 * cannot: the state directory and its done/, rejects/, rejects/failed/ and staging/,
 * and runs.jsonl (a missing one: its parent). Found at the commit instead, after the
 * queue files were published, the failure would leave a COMMIT that every later
 * invocation rolls forward and fails on again (a directory made by root running the
 * runner by hand is the usual cause).
 */
export function checkWritable(o: StateDirs): void {
  // Not QUEUE nor its Yacobot directories: the run writes there before its COMMIT
  // (prepareQueues), where a failure publishes nothing. Checked here, a QUEUE owned by
  // root with each Yacobot's directory given to this user, or a directory of a Yacobot
  // that gets nothing, would stop every run.
  const L = stateLayout(o.state);
  const runs = L.runs;
  const places = [o.state, ...COMMIT_WRITES.map((k) => L[k]), runs];
  for (const p of places) {
    let at = p;
    if (!fs.existsSync(at)) {
      // A symbolic link whose target is missing (a disk not mounted): mkdir takes it for
      // a directory that is there, and the commit's rename into it fails (ENOENT).
      // runs.jsonl is created through it, in the target's directory.
      const target = symlinkTarget(p);
      if (target !== null) at = path.resolve(path.dirname(p), target);
      at = path.dirname(at);
      if (target !== null && (p !== runs || !fs.existsSync(at))) {
        throw new DataError(
          'STATE_NOT_WRITABLE',
          `is a symbolic link, and its target ${target} is missing: a run's commit writes there (restore it, or remove the link); nothing was run`,
          { file: p },
        );
      }
      if (!fs.existsSync(at)) continue; // made by mkdir -p from an ancestor checked above, or reported when made
    }
    try {
      fs.accessSync(at, fs.constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      // The usual cause of each: a guess for EACCES only (a mode 444 file is this user's own doing).
      const why =
        code === 'EROFS'
          ? ' (a read-only file system)'
          : code === 'EACCES' && ownerOf(at) !== process.getuid?.()
            ? ' (made by another user, such as root running the runner by hand?)'
            : '';
      throw new DataError('STATE_NOT_WRITABLE', `cannot write here: ${code}; a run's commit writes here${why}; nothing was run`, { file: at });
    }
  }
}

/** The uid that owns `p`, or undefined when it cannot be stat'ed. */
function ownerOf(p: string): number | undefined {
  try {
    return fs.statSync(p).uid;
  } catch {
    return undefined;
  }
}

/** False when `p` is missing or not a directory; true otherwise, including when stat itself fails (reported when it is read). */
function isDirectoryOrUnreadable(p: string): boolean {
  try {
    return fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOTDIR';
  }
}
