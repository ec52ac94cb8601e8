// Creating directories so that a failure says why, and making files and directory
// entries durable.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from './errors.js';

/**
 * fsyncs a file or directory by path (a directory: the entries renamed or created
 * in it). An error is a DataError naming `p`, except EINVAL and EISDIR: some file
 * systems refuse fsync on a directory, and the files themselves were synced.
 */
export function fsyncPath(p: string): void {
  let fd: number;
  try {
    fd = fs.openSync(p, 'r');
  } catch (err) {
    throw ioError(err, p, 'open for fsync');
  }
  try {
    fs.fsyncSync(fd);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR') throw ioError(err, p, 'fsync');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Creates `dir` and its missing parents one level at a time; returns the ones it
 * created, outermost first. Throws the system error of the level that failed:
 * Node's recursive mkdir reports ENOENT on a read-only file system, where this
 * reports EROFS (or EACCES, ENOTDIR, ENOSPC).
 */
export function mkdirEach(dir: string): string[] {
  const missing: string[] = [];
  let d = path.resolve(dir);
  while (!fs.existsSync(d)) {
    missing.push(d);
    const up = path.dirname(d);
    if (up === d) break;
    d = up;
  }
  missing.reverse();
  const made: string[] = [];
  for (const m of missing) {
    try {
      fs.mkdirSync(m);
      made.push(m);
    } catch (err) {
      // Another process may have made it meanwhile; anything else is the real reason.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return made;
}
