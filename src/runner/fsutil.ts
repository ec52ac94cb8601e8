// Durable file operations for the commit: fsync of files and directories, atomic
// writes, copies and moves that also work across file systems. Errors are
// DataErrors naming the file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath, mkdirEach } from '../core/dirs.js';
import { ioError } from '../core/errors.js';
import { redactDeep } from '../core/secrets.js';

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
      for (let n; (n = fs.readSync(fa, ba, 0, ba.length, null)) > 0; ) {
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

/** Where the reflog step parks `file` before copying or relinking it: `.<name>.moving` beside it. */
export function parkedPath(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.moving`);
}

/** Number of LF-terminated lines in a file (plus one for a last line without LF). */
export function countLines(file: string): number {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.allocUnsafe(1 << 20);
  let n = 0;
  let last = 10;
  try {
    for (;;) {
      const got = fs.readSync(fd, buf, 0, buf.length, null);
      if (got === 0) break;
      let i = buf.indexOf(10, 0);
      while (i !== -1 && i < got) {
        n++;
        i = buf.indexOf(10, i + 1);
      }
      last = buf[got - 1]!;
    }
  } finally {
    fs.closeSync(fd);
  }
  return last === 10 ? n : n + 1;
}

/**
 * The complete lines of the last `maxBytes` of a file (LF removed, empty ones kept),
 * oldest first: a line cut by the window's start and a partial last line are left out.
 * None when the file cannot be read or is not a regular file (opened without blocking:
 * opening a FIFO to read waits for a writer, for ever).
 */
function tailLines(file: string, maxBytes: number): string[] {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch {
    return [];
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return [];
    const size = st.size;
    const tail = Buffer.alloc(Math.min(size, maxBytes));
    for (let got = 0; got < tail.length; ) {
      const n = fs.readSync(fd, tail, got, tail.length - got, size - tail.length + got);
      if (n === 0) break;
      got += n;
    }
    const end = tail.lastIndexOf(10);
    // Unless the window starts at the file's start, its first line may be cut.
    const start = tail.length < size ? tail.indexOf(10) + 1 : 0;
    return start <= end ? tail.subarray(start, end).toString('utf8').split('\n') : [];
  } catch {
    return [];
  } finally {
    fs.closeSync(fd);
  }
}

/** The last complete line of a JSON-lines file, parsed; null when there is none, or it is not JSON. */
export function lastRecord(file: string): unknown {
  const last = tailLines(file, 1 << 20).at(-1);
  if (last === undefined) return null;
  try {
    return JSON.parse(last);
  } catch {
    return null;
  }
}

/**
 * The complete lines of the last `maxBytes` of a JSON-lines file, parsed, oldest first
 * (a line cut by the window's start, a partial last line and lines that are not JSON are
 * left out); none when the file cannot be read or is not a regular file.
 */
export function tailRecords(file: string, maxBytes = 1 << 20): unknown[] {
  const out: unknown[] = [];
  for (const l of tailLines(file, maxBytes)) {
    if (l === '') continue;
    try {
      out.push(JSON.parse(l));
    } catch {
      /* a foreign or damaged line */
    }
  }
  return out;
}

/**
 * Appends one JSON line to `file` unless its last line already carries the same
 * `run_id` and `attempt` (a retried commit; a failed attempt's line and the next
 * attempt's are both kept). A partial last line left by a crash is cut off first.
 * The append is fsynced; no credential is written (redactDeep).
 */
export function appendRecordOnce(file: string, record: { run_id: string; attempt?: number }): boolean {
  let fd: number;
  const created = !fs.existsSync(file);
  try {
    fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  } catch (err) {
    throw ioError(err, file, 'open');
  }
  try {
    const size = fs.fstatSync(fd).size;
    const tailLen = Math.min(size, 1 << 20);
    const tail = Buffer.alloc(tailLen);
    if (tailLen > 0) fs.readSync(fd, tail, 0, tailLen, size - tailLen);
    let end = size;
    if (tailLen > 0 && tail[tailLen - 1] !== 10) {
      const lf = tail.lastIndexOf(10);
      end = lf < 0 ? size - tailLen : size - tailLen + lf + 1;
      fs.ftruncateSync(fd, end);
    }
    const body = tail.subarray(0, tailLen - (size - end)).toString('utf8');
    const lines = body.split('\n').filter((l) => l !== '');
    const lastLine = lines[lines.length - 1];
    if (lastLine !== undefined) {
      try {
        const last = JSON.parse(lastLine) as { run_id?: unknown; attempt?: unknown };
        if (last.run_id === record.run_id && last.attempt === record.attempt) return false;
      } catch {
        /* a foreign or damaged line: append after it */
      }
    }
    const data = Buffer.from(JSON.stringify(redactDeep(record)) + '\n');
    try {
      // A nearly full disk takes part of the line and says so only on the next write:
      // one writeSync would leave a torn line that the next append cuts off, record lost.
      for (let done = 0; done < data.length; ) done += fs.writeSync(fd, data, done, data.length - done, end + done);
      fs.fsyncSync(fd);
    } catch (err) {
      try {
        fs.ftruncateSync(fd, end);
      } catch {
        /* the next append cuts the torn line */
      }
      throw err;
    }
  } catch (err) {
    throw ioError(err, file, 'append to');
  } finally {
    fs.closeSync(fd);
  }
  if (created) fsyncPath(path.dirname(file));
  return true;
}

/** Whether `file` is there (a dangling link too); false when it cannot be looked at. */
export function exists(file: string): boolean {
  try {
    return fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}
