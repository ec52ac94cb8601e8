// Named files that may be FIFOs, read and written so that a signal still stops the
// stage: a FIFO as a non-blocking stream, a FIFO writer on the event loop, and a
// regular-file copy of a FIFO for the readers that read synchronously.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { getSystemErrorMap } from 'node:util';
import { LF, type ByteSink } from './bytes.js';
import { DataError, ioError } from './errors.js';
import { DEFAULT_MAX_LINE, lineTooLong } from './lines.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly } from './temps.js';

/**
 * A named file as a stream that a signal can always interrupt: in 1 MiB chunks, and a
 * FIFO opened without blocking and read as a pipe (epoll). A blocking open or read,
 * even on a libuv thread, would keep the process from exiting on a signal (it logged
 * "interrupted" and went on waiting for the writer). epoll reports the end only after
 * a writer came and went, so a writer that is late is waited for, not taken for an
 * empty file. `st`: the file's stat.
 */
export function readStreamFor(file: string, st: fs.Stats): Readable {
  return st.isFIFO() ? new net.Socket({ fd: openFifoToRead(file), readable: true, writable: false }) : fs.createReadStream(file, { highWaterMark: 1 << 20 });
}

/** Opens the FIFO `file` for reading without blocking (no wait for a writer in open(2)); returns its descriptor, to read on the event loop. */
export function openFifoToRead(file: string): number {
  return fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
}

/**
 * For a `file` that is a FIFO, waits without blocking the thread until it has a reader,
 * and returns a write descriptor (non-blocking) to it, for a FifoWriter. A blocking open
 * of a FIFO waits in open(2) for a reader, and a signal could not stop the stage
 * meanwhile (SIGTERM, Ctrl-C did nothing while no reader came). Null for anything else.
 * `onWait` is called once if there is no reader yet.
 */
export async function heldFifoWriter(file: string, onWait?: () => void): Promise<number | null> {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return null; // missing: the open says what is wrong
  }
  if (!st.isFIFO()) return null;
  for (;;) {
    try {
      return fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw ioError(err, file, 'open for writing');
    }
    // ENXIO: no reader yet.
    onWait?.();
    onWait = undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Writes a FIFO through a non-blocking descriptor (from heldFifoWriter) on the event
 * loop: a reader that stops reading holds the writer back, never the thread, so a
 * signal still stops the stage. (A write(2) that blocks once the pipe is full kept
 * SIGTERM from being handled for as long as the reader read nothing.) A ByteSink:
 * bytes gathered in `buf` go out `highWater` at a time; `ready()` is the back-pressure,
 * to await before producing more. A failed write (EPIPE: the reader went away) is
 * thrown, naming `file`, by the next reserve(), ready() or close().
 */
export class FifoWriter implements ByteSink {
  buf: Buffer;
  pos = 0;
  private readonly socket: net.Socket;
  private error: Error | null = null;
  /** Buffers the socket has written out, to gather in again (recycling, not garbage). */
  private free: Buffer[] = [];

  constructor(
    readonly file: string,
    fd: number,
    private readonly highWater = 1 << 18,
  ) {
    this.socket = new net.Socket({ fd, readable: false, writable: true });
    this.socket.on('error', (err) => (this.error ??= err));
    this.buf = Buffer.allocUnsafeSlow(highWater);
  }

  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.hand();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafeSlow(n);
  }

  /** Resolves once at most `highWater` bytes wait for the reader (at once if so). */
  async ready(): Promise<void> {
    this.check();
    while (this.socket.writableLength > this.highWater && !this.socket.destroyed) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.on('drain', done);
        this.socket.on('close', done);
      });
    }
    this.check();
  }

  /** Writes out everything and closes, waiting for the reader to take it all. */
  async close(): Promise<void> {
    this.hand();
    if (!this.socket.destroyed) {
      await new Promise<void>((resolve) => {
        this.socket.once('close', () => resolve());
        this.socket.end();
      });
    }
    this.check();
  }

  /** Closes without writing out what waits (a failed or stopped run). */
  abandon(): void {
    this.pos = 0;
    this.socket.destroy();
  }

  /** Hands the gathered bytes to the socket, which keeps that buffer until written: a free one is taken. */
  private hand(): void {
    this.check();
    if (this.pos === 0) return;
    const full = this.buf;
    this.buf = this.free.pop() ?? Buffer.allocUnsafeSlow(this.highWater);
    const bytes = full.subarray(0, this.pos);
    this.pos = 0;
    this.socket.write(bytes, () => {
      if (full.length === this.highWater) this.free.push(full);
    });
  }

  private check(): void {
    const e = this.error as NodeJS.ErrnoException | null;
    if (!e) return;
    // A socket's error reads "write EPIPE": told as a file write's is, "EPIPE: broken pipe, write".
    const sys = typeof e.errno === 'number' ? getSystemErrorMap().get(e.errno) : undefined;
    throw ioError(sys ? Object.assign(new Error(`${sys[0]}: ${sys[1]}, ${e.syscall}`), { code: e.code }) : e, this.file, 'write');
  }
}

/** The prefix of regularFileFor's copies in the system temp dir (see ownedTempPrefix). */
export const COPY_PREFIX = '.master-server-';

/**
 * A path FileLineReader can read without blocking the thread indefinitely: `file`
 * itself when it is a regular file or /dev/null (or missing, or a directory: the
 * reader says so), else (a FIFO: `--current <(zcat current_log.gz)`) a temporary copy
 * in the system temp directory, made asynchronously so that a signal still stops the
 * stage while the writer is slow or never comes. The copy is removed by `onExit`. Any
 * other device is a DataError naming `file`, before anything is read. A line longer
 * than `maxLine` bytes fails the copy as soon as it is seen, as FileLineReader would
 * fail on it (a DataError naming `file` and the line), and the copy is removed.
 */
export async function regularFileFor(file: string, onExit: (fn: () => void) => void, maxLine = DEFAULT_MAX_LINE): Promise<string> {
  let st: fs.Stats | undefined;
  try {
    st = await fs.promises.stat(file);
  } catch {
    return file;
  }
  if (st.isFile() || st.isDirectory() || isDevNull(st)) return file;
  // A device is no log: /dev/zero or /dev/urandom never ends (its copy filled the temp
  // directory), a terminal waits for typing, a disk is copied whole.
  if (st.isCharacterDevice() || st.isBlockDevice()) {
    throw new DataError(
      'NOT_A_FILE',
      `is a ${st.isBlockDevice() ? 'block' : 'character'} device, not a log: give a file, a FIFO, or /dev/null for an empty one`,
      { file },
    );
  }
  const copy = path.join(os.tmpdir(), `${ownedTempPrefix(COPY_PREFIX)}${path.basename(file)}.copy`);
  liveTempFiles.add(copy);
  const remove = () => {
    removeQuietly(copy);
    liveTempFiles.delete(copy);
  };
  onExit(remove);
  let fd = -1;
  try {
    const source = readStreamFor(file, st);
    // The copy is created here, synchronously: a signal's exit hooks then either run before
    // (and the process exits without making it) or find it. Left to a write stream, its
    // open ran on a libuv thread and could create the file after the hooks had removed it.
    try {
      fd = fs.openSync(copy, 'wx+', 0o644); // read back to number a line too long
    } catch (err) {
      source.destroy();
      throw ioError(err, copy, 'copy');
    }
    await copyLines(source, fd, copy, file, maxLine);
  } catch (err) {
    remove();
    if (err instanceof DataError) throw err;
    throw ioError(err, file, 'read');
  } finally {
    if (fd >= 0) fs.closeSync(fd);
  }
  return copy;
}

/**
 * Copies `source` to `fd` (the file `copy`) with synchronous writes, holding each
 * line to `maxLine` bytes: a line longer fails at once, with the line number it has
 * in `file`. A limit that a FIFO sending one endless line (`<(cat /dev/zero)`) would
 * otherwise never meet, filling the temp directory.
 */
async function copyLines(source: Readable, fd: number, copy: string, file: string, maxLine: number): Promise<void> {
  let written = 0; // bytes of the stream in the copy
  let lineStart = 0; // stream offset where the line in progress starts
  const tooLong = (start: number, chunk: Buffer): DataError => {
    source.destroy();
    return lineTooLong(file, countLf(fd, copy, Math.min(start, written)) + countInChunk(chunk, start - written) + 1, maxLine);
  };
  for await (const c of source) {
    const chunk = c as Buffer;
    const first = chunk.indexOf(LF);
    if (first === -1) {
      if (written + chunk.length - lineStart > maxLine) throw tooLong(lineStart, chunk);
    } else {
      if (written + first - lineStart > maxLine) throw tooLong(lineStart, chunk);
      // Only a chunk longer than the limit can hold a whole line that is too long.
      if (chunk.length > maxLine) {
        for (let from = first + 1, nl = chunk.indexOf(LF, from); from < chunk.length; from = nl + 1, nl = chunk.indexOf(LF, from)) {
          if ((nl === -1 ? chunk.length : nl) - from > maxLine) throw tooLong(written + from, chunk);
          if (nl === -1) break;
        }
      }
      lineStart = written + chunk.lastIndexOf(LF) + 1;
    }
    try {
      for (let at = 0; at < chunk.length; ) at += fs.writeSync(fd, chunk, at, chunk.length - at);
    } catch (err) {
      source.destroy();
      throw ioError(err, copy, 'copy');
    }
    written += chunk.length;
  }
}

/** The LF bytes among the first `n` bytes of file `fd` (read back: an error path only). */
function countLf(fd: number, copy: string, n: number): number {
  const block = Buffer.allocUnsafe(1 << 20);
  let count = 0;
  for (let pos = 0; pos < n; ) {
    let got: number;
    try {
      got = fs.readSync(fd, block, 0, Math.min(block.length, n - pos), pos);
    } catch (err) {
      throw ioError(err, copy, 'read');
    }
    if (got === 0) break;
    count += countInChunk(block.subarray(0, got), got);
    pos += got;
  }
  return count;
}

/** The LF bytes among the first `n` (at most all) bytes of `b`. */
function countInChunk(b: Buffer, n: number): number {
  let count = 0;
  for (let i = b.indexOf(LF); i !== -1 && i < n; i = b.indexOf(LF, i + 1)) count++;
  return count;
}

/** Whether `st` is the null device (by its device number: a chroot's mknod copy is one too). */
function isDevNull(st: fs.Stats): boolean {
  if (!st.isCharacterDevice()) return false;
  try {
    const n = fs.statSync('/dev/null');
    return n.isCharacterDevice() && n.rdev === st.rdev;
  } catch {
    return false;
  }
}
