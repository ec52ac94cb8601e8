// Before the chain: QUEUE can take the queue files of every active Yacobot. A run
// copies each file beside its place (QUEUE/<id>/.RUN.tsv.publish) and renames it there,
// so QUEUE may lie on another file system than STATE; what it must be is writable where
// a run writes: QUEUE/<id>/ of each active Yacobot, or QUEUE (or its nearest existing
// ancestor) where that directory is still to be made.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { symlinkTarget } from '../../core/durable.js';
import { DataError, shellQuote } from '../../core/errors.js';
import { isYacobotDir } from '../state/queue-dir.js';

/**
 * Throws a DataError naming the first place a run would write a queue file of one of
 * the `active` Yacobots and cannot (with the command that mends it); returns its line
 * for `check`.
 */
export function checkQueueDir(queueDir: string, active: readonly number[]): string {
  const top = kindOf(queueDir);
  if (top === 'dangling') throw dangling(queueDir, 'the queue directory');
  if (top === 'missing') {
    const at = nearestAncestor(queueDir);
    mustWrite(at, `${queueDir} is made here by the first run`);
    return `${queueDir}: not there yet; the first run makes it in ${at}`;
  }
  if (top !== 'dir') throw notDir(queueDir, 'the queue directory');
  for (const id of active) {
    const dir = path.join(queueDir, String(id));
    const kind = kindOf(dir);
    if (kind === 'missing') mustWrite(queueDir, `Yacobot ${id}'s directory ${id}/ is made here`);
    else if (kind === 'dir') mustWrite(dir, `Yacobot ${id}'s queue files go here`);
    else if (kind === 'dangling') throw dangling(dir, `Yacobot ${id}'s queue directory`);
    else throw notDir(dir, `Yacobot ${id}'s queue directory`);
  }
  return active.length === 0
    ? `${queueDir}: a directory (no active Yacobot known to check)`
    : `${queueDir}: writable for the queue files of Yacobot(s) ${active.join(', ')}`;
}

/** The Yacobot ids that have a directory in `queueDir` (what is checked when the database could not say which are active). */
export function yacobotDirs(queueDir: string): number[] {
  try {
    return fs
      .readdirSync(queueDir)
      .filter(isYacobotDir)
      .map(Number)
      .sort((a, b) => a - b);
  } catch {
    return [];
  }
}

/** What `p` is: a directory, missing, a symbolic link to something missing, or something else (following a symbolic link). */
function kindOf(p: string): 'dir' | 'missing' | 'dangling' | 'other' {
  try {
    return fs.statSync(p).isDirectory() ? 'dir' : 'other';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') return 'other';
    return symlinkTarget(p) === null ? 'missing' : 'dangling';
  }
}

/** The nearest ancestor of `p` that exists. */
function nearestAncestor(p: string): string {
  let at = path.dirname(path.resolve(p));
  while (kindOf(at) === 'missing' && path.dirname(at) !== at) at = path.dirname(at);
  return at;
}

/** Throws unless this user may create and rename files in directory `dir` (`why`: what a run writes there). */
function mustWrite(dir: string, why: string): void {
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const fix = code === 'EROFS' ? 'a read-only file system: mount it read-write' : `give it to this user: chown ${os.userInfo().username} ${shellQuote(dir)}`;
    throw new DataError('QUEUE_NOT_WRITABLE', `cannot write here: ${code}; ${why} (${fix}); nothing was run`, { file: dir });
  }
}

/** The error for `p` (`what`), a symbolic link to nothing: a run could neither make the directory nor write through it. */
function dangling(p: string, what: string): DataError {
  const target = symlinkTarget(p) ?? '?';
  return new DataError(
    'QUEUE_NOT_WRITABLE',
    `is a symbolic link to ${target}, which is not there, where ${what} goes (make it: mkdir -p ${shellQuote(path.resolve(path.dirname(p), target))}, or remove the link); nothing was run`,
    { file: p },
  );
}

/** The error for `p` (`what`) in the way of a directory. */
function notDir(p: string, what: string): DataError {
  return new DataError('QUEUE_NOT_WRITABLE', `is not a directory, where ${what} goes (move it aside); nothing was run`, { file: p });
}
