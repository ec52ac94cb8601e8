// Buffered synchronous file writers: a plain one, and one that replaces its file
// atomically (a temporary file in the same directory, renamed over it on commit).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { putText, type ByteSink } from './bytes.js';
import { fsyncPath } from './dirs.js';
import { DataError, ioError } from './errors.js';
import { liveTempFiles, ownedTempName, removeQuietly, removeStaleTemps } from './temps.js';

/** How often a file fsynced at its end is sent to the disk while it is written (FileWriter's syncAhead). */
export const SYNC_AHEAD = 4 << 20;

/**
 * A buffered, synchronous file writer. Errors (ENOSPC, EACCES, ...) surface as a
 * DataError naming the file, at the write or flush that hit them.
 */
export class FileWriter implements ByteSink {
  private fd: number;
  // Text is encoded straight into one reused buffer: no joined strings, no garbage.
  buf: Buffer;
  pos = 0;
  bytes = 0;
  /** With `syncAhead`: bytes written when the last background fdatasync was asked for, and whether one is under way. */
  private synced = 0;
  private syncing = false;

  /**
   * `syncAhead` (bytes, 0 for none): a file that will be fsynced when closed has what
   * was written so far sent to the disk every `syncAhead` bytes, by an fdatasync on a
   * libuv thread, so that the fsync at the end waits for the last part only.
   */
  constructor(
    readonly file: string,
    flags: string = 'w',
    highWater = 1 << 18,
    private readonly syncAhead = 0,
  ) {
    try {
      this.fd = fs.openSync(file, flags, 0o644);
    } catch (err) {
      throw ioError(err, file, 'open for writing');
    }
    this.buf = Buffer.allocUnsafeSlow(highWater);
  }

  write(data: string | Uint8Array): void {
    if (typeof data === 'string') {
      putText(this, data);
      return;
    }
    const room = this.buf.length - this.pos;
    if (data.length <= room) {
      this.buf.set(data, this.pos);
      this.pos += data.length;
      return;
    }
    this.flush();
    if (data.length < this.buf.length) {
      this.buf.set(data, 0);
      this.pos = data.length;
    } else {
      this.writeOut(data);
    }
  }

  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.flush();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafeSlow(n);
  }

  flush(): void {
    if (this.pos === 0) return;
    const n = this.pos;
    this.pos = 0;
    this.writeOut(this.buf.subarray(0, n));
  }

  private writeOut(data: Uint8Array): void {
    let off = 0;
    try {
      while (off < data.length) off += fs.writeSync(this.fd, data, off, data.length - off);
    } catch (err) {
      throw ioError(err, this.file, 'write');
    }
    this.bytes += data.length;
    if (this.syncAhead > 0 && !this.syncing && this.bytes - this.synced >= this.syncAhead) {
      this.synced = this.bytes;
      this.syncing = true;
      const fd = this.fd;
      // Its error, if any, is the final fsync's to report. A close() asked for meanwhile
      // leaves the descriptor open to it (see closeFd), and it is closed here.
      fs.fdatasync(fd, () => {
        this.syncing = false;
        if (this.fd !== fd) fs.close(fd, () => undefined);
      });
    }
  }

  /** Flushes, optionally fsyncs, and closes. */
  close(sync = false): void {
    if (this.fd < 0) return;
    try {
      this.flush();
      if (sync) fs.fsyncSync(this.fd);
    } finally {
      this.closeFd(true);
    }
  }

  /** Closes without flushing; for abandoning a temporary file. */
  abandon(): void {
    if (this.fd < 0) return;
    this.closeFd(false);
    this.pos = 0;
  }

  /**
   * Closes the descriptor, or while a background fdatasync is under way leaves that to
   * it: closed now, the number could go to another file before the fdatasync runs, which
   * would then flush that file, or fail on a closed descriptor. The writer is closed
   * either way (the file's data went to the disk with close(true)'s fsync, which waits for it).
   */
  private closeFd(report: boolean): void {
    const fd = this.fd;
    this.fd = -1;
    if (this.syncing) return;
    try {
      fs.closeSync(fd);
    } catch (err) {
      if (report) throw ioError(err, this.file, 'close');
    }
  }
}

/**
 * Writes `file` atomically: content goes to a temporary file in the same directory,
 * which is renamed over `file` by `commit()`; `abort()` removes it. A symlink is
 * written through (the file it points to is replaced, the link stays); anything
 * else that is not a regular file (`/dev/null`, a directory, a FIFO) is refused
 * with a DataError before anything is written, as a rename would replace it.
 */
export class AtomicFileWriter extends FileWriter {
  readonly target: string;
  private done = false;

  constructor(file: string) {
    const target = replaceableTarget(file);
    // A temporary file of this target that a SIGKILLed run left (as big as the file) goes first.
    const prefix = `${path.basename(target)}.tmp-`;
    removeStaleTemps(path.dirname(target), prefix);
    try {
      super(path.join(path.dirname(target), ownedTempName(prefix)), 'w', 1 << 18, SYNC_AHEAD);
    } catch (err) {
      // Name the file the operator gave, not the temporary one.
      throw err instanceof DataError && err.place ? new DataError(err.code, err.message, { file }) : err;
    }
    this.target = target;
    liveTempFiles.add(this.file);
  }

  commit(): void {
    this.close(true);
    try {
      fs.renameSync(this.file, this.target);
    } catch (err) {
      throw ioError(err, this.target, 'rename into place');
    }
    liveTempFiles.delete(this.file);
    this.done = true;
    fsyncPath(path.dirname(this.target));
  }

  abort(): void {
    if (this.done) return;
    this.abandon();
    removeQuietly(this.file);
    liveTempFiles.delete(this.file);
    this.done = true;
  }
}

/** Where a rename puts `file`: itself, or the file its symlink points to; a DataError if that is not a regular file. */
export function replaceableTarget(file: string): string {
  try {
    // Followed to its end, the path is a regular file or nothing at all (a dangling
    // link: a first run's state file). /dev/stdout on a pipe is a link to "pipe:[N]".
    if (!fs.statSync(file).isFile()) throw new DataError('NOT_A_FILE', 'is not a regular file: refusing to replace it', { file });
  } catch (err) {
    if (err instanceof DataError) throw err;
  }
  let target = file;
  try {
    // Link by link, so that a dangling link names where the file is to be made,
    // rather than being replaced by it.
    for (let hops = 0; fs.lstatSync(target).isSymbolicLink(); hops++) {
      if (hops === 40) throw new DataError('NOT_A_FILE', 'too many levels of symbolic links', { file });
      // Relative to the directory the link really is in (a path through a linked
      // directory and '..' in the link's text would resolve elsewhere as text).
      target = path.resolve(fs.realpathSync(path.dirname(target)), fs.readlinkSync(target));
    }
  } catch (err) {
    if (err instanceof DataError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return target; // absent: made there
    throw ioError(err, file, 'look up');
  }
  return target;
}
