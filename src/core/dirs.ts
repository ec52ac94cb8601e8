// Creating directories so that a failure says why.
import * as fs from 'node:fs';
import * as path from 'node:path';

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
