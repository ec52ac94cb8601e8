// The one TSV reader/writer: byte-level line splitting for streams and files, and
// buffered writers. Lines end in LF; fields are separated by one TAB; no quoting.
import { isAscii, isUtf8 } from 'node:buffer';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { getSystemErrorMap } from 'node:util';
import { LF, TAB, latin1, putText, type ByteSink } from './bytes.js';
import { fsyncPath } from './dirs.js';
import { DataError, ioError } from './errors.js';

/** Longest line a stage reading text lines buffers; a longer one is an error. */
export const DEFAULT_MAX_LINE = 1 << 20;

/**
 * Cuts a byte stream into batches of whole lines of about `target` bytes (a last
 * line without LF ends the final batch). A line that spans chunks and grows longer
 * than `maxLine` is cut to `maxLine + 2` bytes, so memory stays bounded and the
 * reader still sees it as too long, even after stripping a CR from its end (a line
 * of `maxLine` bytes and a CR is kept whole); its last byte is made a TAB if the
 * cut-off part had one, so whether the line has a TAB at all is kept. Nothing else
 * changes: the lines of the batches are the lines of the input (their first
 * `maxLine` bytes at least).
 */
export class LineBatcher {
  private parts: Buffer[] = [];
  private partsLen = 0;
  /** Buffers handed back for reuse. */
  private spare: Uint8Array[] = [];
  /** The line in progress (no LF seen yet), at most maxLine + 2 bytes. */
  private tail: Buffer[] = [];
  private tailLen = 0;

  constructor(
    private readonly target: number,
    private readonly maxLine: number,
  ) {}

  /** Takes a chunk; returns the batches it completed. */
  push(chunk: Buffer): Buffer[] {
    const lastLf = chunk.lastIndexOf(LF);
    if (lastLf === -1) {
      this.grow(chunk);
      return [];
    }
    const firstLf = chunk.indexOf(LF);
    this.grow(chunk.subarray(0, firstLf + 1));
    this.parts.push(...this.tail);
    this.partsLen += this.tailLen;
    this.tail = [];
    this.tailLen = 0;
    if (lastLf > firstLf) {
      this.parts.push(chunk.subarray(firstLf + 1, lastLf + 1));
      this.partsLen += lastLf - firstLf;
    }
    if (lastLf + 1 < chunk.length) this.grow(Buffer.from(chunk.subarray(lastLf + 1)));
    if (this.partsLen < this.target) return [];
    return [this.flush()];
  }

  /** The final batch (whatever is left, with a last line that has no LF), or null. */
  end(): Buffer | null {
    this.parts.push(...this.tail);
    this.partsLen += this.tailLen;
    this.tail = [];
    this.tailLen = 0;
    return this.partsLen > 0 ? this.flush() : null;
  }

  /** Takes back a batch's buffer (one this batcher made) for a later batch. */
  recycle(batch: Uint8Array): void {
    if (this.spare.length < 8) this.spare.push(batch);
  }

  /** The batch: its own whole ArrayBuffer (never a shared pool), so it can be transferred. */
  private flush(): Buffer {
    const n = this.partsLen;
    const i = this.spare.findIndex((b) => b.buffer.byteLength >= n);
    // Rounded up to 512 KiB so that buffers handed back fit later batches.
    const size = Math.ceil(n / (1 << 19)) * (1 << 19);
    const b = i >= 0 ? Buffer.from(this.spare.splice(i, 1)[0]!.buffer, 0, n) : Buffer.allocUnsafeSlow(size).subarray(0, n);
    let at = 0;
    for (const p of this.parts) {
      b.set(p, at);
      at += p.length;
    }
    this.parts = [];
    this.partsLen = 0;
    return b;
  }

  /** Adds bytes to the line in progress, keeping at most maxLine + 2 of them (and its LF). */
  private grow(piece: Buffer): void {
    const endsLine = piece.length > 0 && piece[piece.length - 1] === LF;
    const room = this.maxLine + 2 - this.tailLen;
    if (piece.length - (endsLine ? 1 : 0) > room) {
      if (room > 0) this.tail.push(Buffer.from(piece.subarray(0, room)));
      this.tailLen += room;
      // The last byte kept (past the maxLine a reader looks at) becomes a TAB when the
      // dropped part had one: a line with no TAB at all is still told apart.
      if (piece.subarray(room, piece.length - (endsLine ? 1 : 0)).indexOf(TAB) !== -1) this.markTab();
      if (endsLine) {
        this.tail.push(Buffer.from([LF]));
        this.tailLen++;
      }
      return;
    }
    this.tail.push(piece);
    this.tailLen += piece.length;
  }

  private markTab(): void {
    const k = this.tail.length - 1;
    if (k < 0) return;
    // A copy: the last piece may be a view of a chunk the caller still holds.
    const last = Buffer.from(this.tail[k]!);
    last[last.length - 1] = TAB;
    this.tail[k] = last;
  }
}

/**
 * Receives one line as the bytes `buf[start, end)` (no LF) and its 1-based number.
 * ByteLineSplitter never writes into a buffer it has handed out, so a stage may keep
 * a line past the call (join-current keeps those waiting for current_log).
 */
export type ByteLineFn = (buf: Buffer, start: number, end: number, lineNo: number) => void;

/** A carry that holds nothing (the splitter's starting point, and after each line it hands out). */
const EMPTY = Buffer.alloc(0);

/**
 * Splits a byte stream into lines without decoding them: the stages whose output
 * is made of their input's bytes never turn a line into a string. Every line must
 * end in LF: `end()` reports a last line without one.
 */
export class ByteLineSplitter {
  /** The start of a line that continues in the next chunk: `carry[0, carried)`; a buffer of its own for each such line. */
  private carry: Buffer = EMPTY;
  private carried = 0;
  lineNo = 0;

  constructor(
    private readonly file: string,
    private readonly maxLine = DEFAULT_MAX_LINE,
  ) {}

  push(chunk: Buffer, onLine: ByteLineFn): void {
    let from = 0;
    // Streams are UTF-8: one native pass clears a chunk that is all ASCII (the usual case).
    const ascii = isAscii(chunk);
    if (this.carried > 0) {
      const nl = chunk.indexOf(LF);
      if (nl === -1) {
        this.keep(chunk);
        return;
      }
      this.keep(chunk.subarray(0, nl));
      const line = this.carry;
      const n = this.carried;
      // Handed out for good, as a chunk is: a stage may keep a line past the call
      // (join-current keeps the lines that wait for current_log), and the carry of the
      // next line, in this same push, went into it (a record lost, exit 0).
      this.carry = EMPTY;
      this.carried = 0;
      if (!isUtf8(line.subarray(0, n))) throw badUtf8(this.file, this.lineNo + 1);
      onLine(line, 0, n, ++this.lineNo);
      from = nl + 1;
    }
    for (let nl = chunk.indexOf(LF, from); nl !== -1; nl = chunk.indexOf(LF, from)) {
      if (!ascii && !isUtf8(chunk.subarray(from, nl))) throw badUtf8(this.file, this.lineNo + 1);
      onLine(chunk, from, nl, ++this.lineNo);
      from = nl + 1;
    }
    if (from < chunk.length) this.keep(chunk.subarray(from));
  }

  /** Throws if the input ended inside a line (a cut-off file or a crashed producer). */
  end(): void {
    if (this.carried > 0) throw cutOff(this.file, this.lineNo + 1, 'input', this.carry.subarray(0, this.carried));
  }

  /**
   * Adds `part` to the line carried over (a copy: chunks may be reused). The buffer
   * doubles as it fills: a 1 MiB line arriving in 64 KiB pipe reads was built by a
   * concat per read, 8 MiB of copies and garbage for each such line (logsaver
   * reading 600 of them peaked at 297 MB).
   */
  private keep(part: Buffer): void {
    const need = this.carried + part.length;
    if (need > this.maxLine) throw lineTooLong(this.file, this.lineNo + 1, this.maxLine);
    if (need > this.carry.length) {
      const bigger = Buffer.allocUnsafe(Math.min(this.maxLine, Math.max(need, 2 * this.carry.length, 4096)));
      this.carry.copy(bigger, 0, 0, this.carried);
      this.carry = bigger;
    }
    part.copy(this.carry, this.carried);
    this.carried = need;
  }
}

const CUT_MARK_END = ': failed, output incomplete';

/** The last line, without LF, a stage that did not finish ends its stdout in (src/cli/stage.ts); cutOff names it. */
export function cutMark(stage: string): string {
  return `${stage}${CUT_MARK_END}`;
}

/** The stages whose output another stage reads: a cut mark after a record names one of them. */
const STREAM_WRITERS = ['analyze-dump', 'group-sum', 'join-current', 'filter-url', 'upload-domains', 'domains-from-db'];

/**
 * A last line without LF; `tail`, its bytes, may end in a failed stage's cut mark, which
 * the message names. The mark is the whole line when the stage had written nothing;
 * else it follows the last record it wrote, whose LF it held back (src/cli/output.ts).
 */
function cutOff(file: string, line: number, what: 'input' | 'file', tail: Uint8Array): DataError {
  const n = Math.min(tail.length, 80);
  const end = latin1(tail, tail.length - n, tail.length);
  if (end.endsWith(CUT_MARK_END)) {
    const before = end.slice(0, -CUT_MARK_END.length);
    const stage = n === tail.length && /^[a-z][a-z0-9-]*$/.test(before) ? before : STREAM_WRITERS.find((s) => before.endsWith(s));
    if (stage) return new DataError('TRUNCATED', `${what} cut off: it ends in "${cutMark(stage)}" (the stage that wrote it failed)`, { file, line });
  }
  return new DataError('TRUNCATED', `last line has no newline (${what} cut off?)`, { file, line });
}

function badUtf8(file: string, line: number): DataError {
  return new DataError('BAD_UTF8', 'invalid UTF-8 (streams are UTF-8 text)', { file, line });
}

function lineTooLong(file: string, line: number, max: number): DataError {
  return new DataError('LINE_TOO_LONG', `line longer than ${max} bytes`, { file, line });
}

/**
 * Reads a regular file line by line, as bytes, synchronously, in large blocks: the
 * second input of a merge-join, pulled one line at a time. Every line must end in LF.
 */
export class FileLineReader {
  private fd: number;
  private block: Buffer;
  /** The whole lines of the last block read: data[0, dataEnd), the last one's LF excluded. */
  private data: Buffer;
  private dataEnd = 0;
  /** Where the next line of `data` starts; past dataEnd once all are taken. */
  private at = 1;
  private carry: Buffer | null = null;
  private eof = false;
  /** Whether data[0, dataEnd) is all ASCII (then no line needs its own UTF-8 check). */
  private ascii = true;
  lineNo = 0;

  /**
   * Reads `source`; messages name it as `file` (a copy's reader names the original).
   * A line longer than `maxLine` bytes is an error.
   */
  constructor(
    source: string,
    blockSize = 1 << 20,
    readonly file = source,
    private readonly maxLine = DEFAULT_MAX_LINE,
  ) {
    try {
      this.fd = fs.openSync(source, 'r');
    } catch (err) {
      throw ioError(err, file, 'open');
    }
    this.block = Buffer.allocUnsafe(blockSize);
    this.data = this.block;
  }

  /** Opens `file` (named `name` in messages), or returns null if it does not exist. */
  static openIfExists(file: string, name = file): FileLineReader | null {
    try {
      return new FileLineReader(file, 1 << 20, name);
    } catch (err) {
      if (err instanceof DataError && /ENOENT/.test(err.message)) return null;
      throw err;
    }
  }

  /**
   * Points `line` at the next line's bytes (no LF), valid until the next call;
   * false at the end of the file.
   */
  next(line: { buf: Uint8Array; start: number; end: number }): boolean {
    if (this.at > this.dataEnd) {
      if (!this.fill()) return false;
      this.at = 0;
    }
    let nl = this.data.indexOf(LF, this.at);
    if (nl === -1 || nl > this.dataEnd) nl = this.dataEnd;
    line.buf = this.data;
    line.start = this.at;
    line.end = nl;
    this.lineNo++;
    if (!this.ascii && !isUtf8(this.data.subarray(this.at, nl))) throw badUtf8(this.file, this.lineNo);
    this.at = nl + 1;
    return true;
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }

  /** Reads blocks until one completes a line; false at the end of the file. */
  private fill(): boolean {
    for (;;) {
      if (this.eof) return false;
      let n: number;
      try {
        n = fs.readSync(this.fd, this.block, 0, this.block.length, null);
      } catch (err) {
        throw ioError(err, this.file, 'read');
      }
      if (n === 0) {
        this.eof = true;
        this.close();
        if (this.carry && this.carry.length) throw cutOff(this.file, this.lineNo + 1, 'file', this.carry);
        return false;
      }
      const chunk = this.block.subarray(0, n);
      const last = chunk.lastIndexOf(LF);
      if (last === -1) {
        this.carry = this.carry ? Buffer.concat([this.carry, chunk]) : Buffer.from(chunk);
        if (this.carry.length > this.maxLine) throw lineTooLong(this.file, this.lineNo + 1, this.maxLine);
        continue;
      }
      // A line begun in an earlier block ends here: it is held to the limit too.
      if (this.carry && this.carry.length + chunk.indexOf(LF) > this.maxLine) throw lineTooLong(this.file, this.lineNo + 1, this.maxLine);
      this.data = this.carry ? Buffer.concat([this.carry, chunk.subarray(0, last)]) : this.block;
      this.dataEnd = this.carry ? this.carry.length + last : last;
      this.ascii = isAscii(this.data.subarray(0, this.dataEnd));
      this.carry = last + 1 < n ? Buffer.from(chunk.subarray(last + 1)) : null;
      return true;
    }
  }
}

/**
 * A named file as a stream that a signal can always interrupt: in 1 MiB chunks, and a
 * FIFO opened without blocking and read as a pipe (epoll). A blocking open or read,
 * even on a libuv thread, would keep the process from exiting on a signal (it logged
 * "interrupted" and went on waiting for the writer). epoll reports the end only after
 * a writer came and went, so a writer that is late is waited for, not taken for an
 * empty file. `st`: the file's stat.
 */
export function readStreamFor(file: string, st: fs.Stats): Readable {
  return st.isFIFO()
    ? new net.Socket({ fd: fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK), readable: true, writable: false })
    : fs.createReadStream(file, { highWaterMark: 1 << 20 });
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
    throw new DataError('NOT_A_FILE', `is a ${st.isBlockDevice() ? 'block' : 'character'} device, not a log: give a file, a FIFO, or /dev/null for an empty one`, { file });
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

/** Temporary files to remove if the process exits before they are committed. */
export const liveTempFiles = new Set<string>();

/**
 * The tag in temporary names of the pid space this process lives in: 8 hex digits of
 * the FNV-1a hash of the host name, the kernel's boot id and the pid namespace (any of
 * them stays a safe file name). A pid names a process only within one pid namespace of
 * one boot of one kernel: a container with its own pid namespace (even one with the
 * host's name, as with --network host) or another host with the same name sharing
 * --tmp gets another tag, so removeStaleTemps never judges its files by a pid that
 * means another process here. Where /proc cannot be read, the host name alone.
 */
export const HOST_TAG = (() => {
  const read = (f: () => string) => {
    try {
      return f();
    } catch {
      return '';
    }
  };
  const boot = read(() => fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  const pidNs = read(() => fs.readlinkSync('/proc/self/ns/pid'));
  let h = 0x811c9dc5;
  for (const c of Buffer.from(`${os.hostname()}\n${boot}\n${pidNs}`, 'utf8')) h = Math.imul(h ^ c, 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
})();

/**
 * A name for a temporary file: `prefix`, this process's pid and HOST_TAG, as
 * `${prefix}${pid}-${HOST_TAG}`. A SIGKILL or a crash leaves such a file behind with
 * no process to remove it; removeStaleTemps finds it by that name.
 */
export function ownedTempName(prefix: string): string {
  return `${prefix}${process.pid}-${HOST_TAG}`;
}

/** ownedTempName(prefix) and a dash, for a name that goes on (mkdtemp's random part, a file name). */
export function ownedTempPrefix(prefix: string): string {
  return `${ownedTempName(prefix)}-`;
}

/**
 * Told each path removeStaleTemps removes: a stage logs a warning (set by the stage
 * runner), so that an operator learns a run was killed.
 */
export const staleTemps = { report: (_removed: string): void => {} };

/**
 * Removes the entries of `dir` named by ownedTempPrefix(prefix) on this host whose
 * process has ended (left by a stage that was SIGKILLed or crashed); returns their
 * paths. A pid that is alive (or reused: it cannot be told apart) keeps its files;
 * the files of other hosts (a shared --tmp), other boots and other pid namespaces
 * (containers) carry another HOST_TAG and are never touched, nor is an entry of another
 * user or a symbolic link (a stage makes neither). Errors are ignored: an
 * unreadable directory or an entry another process removes first is not this run's
 * concern.
 */
export function removeStaleTemps(dir: string, prefix: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const m = /^(\d+)-([0-9a-f]{8})(?:-|$)/.exec(name.slice(prefix.length));
    if (!m || m[2] !== HOST_TAG) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || processAlive(pid)) continue;
    const p = path.join(dir, name);
    try {
      // Only what a stage of this user made: in a shared, world-writable directory (the
      // system temp dir) anyone can give an entry such a name, and a stage run as root
      // would otherwise remove another user's files, walking directories they control.
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink() || (process.getuid !== undefined && st.uid !== process.getuid())) continue;
      fs.rmSync(p, { recursive: true, force: true });
      removed.push(p);
      staleTemps.report(p);
    } catch {
      /* not ours to remove after all (permissions): left as it was */
    }
  }
  return removed;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}

export function removeQuietly(file: string): void {
  try {
    fs.rmSync(file, { force: true, recursive: true });
  } catch {
    /* best effort on the way out */
  }
}

/**
 * Finds the TAB positions of `buf[start, end)` into `at`; returns the number of
 * fields, `at.length + 2` when the line has more fields than `at` can describe,
 * or -1 when it holds a CR (no field of a stream may). Lets a stage take fields
 * as ranges of the line instead of splitting it.
 */
export function findTabsAt(buf: Uint8Array, start: number, end: number, at: Int32Array): number {
  let n = 0;
  for (let i = start; i < end; i++) {
    const c = buf[i]!;
    if (c <= 13) {
      if (c === TAB) {
        if (n === at.length) return n + 2;
        at[n++] = i;
      } else if (c === 13) return -1;
    }
  }
  return n + 1;
}
