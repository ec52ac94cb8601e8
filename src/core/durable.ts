// Durable file operations: fsync of files and directories, atomic writes, copies and
// moves that also work across file systems. Errors are DataErrors naming the file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath, mkdirEach } from './dirs.js';
import { ioError } from './errors.js';

/** Creates `dir` (and parents); fsyncs the parent of every directory it created. */
export function mkdirDurable(dir: string): void {
  let made: string[];
  try {
    made = mkdirEach(dir);
  } catch (err) {
    throw ioError(err, dir, 'create directory');
  }
  for (const m of made) fsyncPath(path.dirname(m));
}

/** fsyncs every regular file and directory under `root` (the root included). */
export function fsyncTree(root: string): void {
  for (const e of fs.readdirSync(root, { withFileTypes: true })) {
    const p = path.join(root, e.name);
    if (e.isDirectory()) fsyncTree(p);
    else if (e.isFile()) fsyncPath(p);
  }
  fsyncPath(root);
}

/** Writes `data` to `file` atomically and durably: temp file, fsync, rename, fsync of the directory. */
export function writeFileDurable(file: string, data: string | Buffer): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
  try {
    const fd = fs.openSync(tmp, 'w', 0o644);
    try {
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (err) {
    throw ioError(err, file, 'write');
  }
  fsyncPath(path.dirname(file));
}

/**
 * Publishes a copy of `src` as `dst`: copies to a dot-named temp file next to `dst`,
 * fsyncs it, renames it over `dst`, fsyncs the directory. Idempotent; readers never
 * see a partial `dst`.
 */
export function publishCopy(src: string, dst: string): void {
  renameIntoPlace(prepareCopy(src, dst), dst);
}

/** Removes a file if it is there; never a directory (unlike core/temps' removeQuietly, which is recursive). */
function removeQuietly(f: string): void {
  try {
    fs.rmSync(f, { force: true });
  } catch {
    /* not there, or its directory is not one */
  }
}

/** Where prepareCopy puts the copy of `dst`: `.<name>.publish` beside it. */
export function preparedPath(dst: string): string {
  return path.join(path.dirname(dst), `.${path.basename(dst)}.publish`);
}

/** Copies `src` beside `dst` (preparedPath) and fsyncs the copy; returns its path. A failed copy leaves nothing. */
export function prepareCopy(src: string, dst: string): string {
  const tmp = preparedPath(dst);
  try {
    fs.copyFileSync(src, tmp);
    fsyncPath(tmp);
  } catch (err) {
    removeQuietly(tmp);
    throw ioError(err, dst, 'copy into place');
  }
  return tmp;
}

/** Whether the files `a` and `b` hold the same bytes (read 1 MiB at a time). */
export function sameBytes(a: string, b: string): boolean {
  const fa = fs.openSync(a, 'r');
  try {
    const fb = fs.openSync(b, 'r');
    try {
      if (fs.fstatSync(fa).size !== fs.fstatSync(fb).size) return false;
      const ba = Buffer.allocUnsafe(1 << 20);
      const bb = Buffer.allocUnsafe(1 << 20);
      for (let n: number; (n = fs.readSync(fa, ba, 0, ba.length, null)) > 0; ) {
        // As much of b as was read of a (a read may return less than asked).
        for (let m = 0; m < n; ) {
          const k = fs.readSync(fb, bb, m, n - m, null);
          if (k === 0) return false;
          m += k;
        }
        if (!ba.subarray(0, n).equals(bb.subarray(0, n))) return false;
      }
      return fs.readSync(fb, bb, 0, 1, null) === 0; // and b ends there too
    } finally {
      fs.closeSync(fb);
    }
  } finally {
    fs.closeSync(fa);
  }
}

/** Renames a prepared copy over `dst` and makes the rename durable. */
export function renameIntoPlace(tmp: string, dst: string): void {
  try {
    fs.renameSync(tmp, dst);
  } catch (err) {
    throw ioError(err, dst, 'rename into place');
  }
  fsyncPath(path.dirname(dst));
}

/**
 * Moves `src` over `dst` durably: a rename when both are on one file system, else
 * a published copy followed by removing `src`. A crash in between leaves `src` in
 * place, so calling it again finishes the move.
 */
export function moveDurable(src: string, dst: string): void {
  if (renameDurable(src, dst)) return;
  publishCopy(src, dst);
  try {
    fs.unlinkSync(src);
  } catch (e) {
    throw ioError(e, src, 'remove after copying');
  }
  fsyncPath(path.dirname(dst));
  fsyncPath(path.dirname(src));
}

/**
 * Renames `src` over `dst` and fsyncs both directories; false, touching nothing, when
 * they are on two file systems (EXDEV: the caller copies).
 */
export function renameDurable(src: string, dst: string): boolean {
  try {
    fs.renameSync(src, dst);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw ioError(err, dst, `move ${src} here`);
    return false;
  }
  fsyncPath(path.dirname(dst));
  fsyncPath(path.dirname(src));
  return true;
}

/**
 * Moves the symlink `src` to `dst` as a new symlink to `target`: a temp link beside
 * `dst`, renamed over it, the directory fsynced; then `src` is removed. A crash in
 * between leaves `src` in place, so calling it again finishes the move.
 */
export function relinkDurable(src: string, dst: string, target: string): void {
  const tmp = path.join(path.dirname(dst), `.${path.basename(dst)}.link`);
  try {
    fs.rmSync(tmp, { force: true });
    fs.symlinkSync(target, tmp);
    fs.renameSync(tmp, dst);
  } catch (err) {
    removeQuietly(tmp);
    throw ioError(err, dst, `move ${src} here`);
  }
  fsyncPath(path.dirname(dst));
  try {
    fs.unlinkSync(src);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(err, src, 'remove after linking');
  }
  fsyncPath(path.dirname(src));
}

/** The target of symbolic link `p`, or null when `p` is not one (or is not there). */
export function symlinkTarget(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}

/** Whether `file` is there (a dangling link too); false when it cannot be looked at. */
export function exists(file: string): boolean {
  try {
    return fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

/** `stat(file)` (bigint), or undefined when nothing is there (ENOENT, or ENOTDIR: a file in the way of a directory). */
export function statQuiet(file: string, stat: typeof fs.statSync | typeof fs.lstatSync): fs.BigIntStats | undefined {
  try {
    return stat(file, { bigint: true, throwIfNoEntry: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw ioError(err, file, 'stat');
    return undefined;
  }
}

/** Removes `file` if it is there, durably (a DataError naming it when it cannot). */
export function removeDurable(file: string): void {
  if (!fs.existsSync(file)) return;
  try {
    fs.rmSync(file, { force: true });
  } catch (err) {
    throw ioError(err, file, 'remove');
  }
  fsyncPath(path.dirname(file));
}
