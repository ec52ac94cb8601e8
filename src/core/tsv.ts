// The one TSV reader/writer: byte-level line splitting for streams and files, and
// buffered writers. Lines end in LF; fields are separated by one TAB; no quoting.
import * as fs from 'node:fs';
import { DataError, ioError } from './errors.js';

/** Longest line any stage buffers; a longer one is cut to this many bytes and flagged. */
export const DEFAULT_MAX_LINE = 1 << 20;

const LF = 10;

/** Receives one line as bytes `buf[start, end)` without its LF. */
export type RawLineFn = (buf: Buffer, start: number, end: number, lineNo: number, overlong: boolean) => void;

/**
 * Splits a byte stream into lines without copying complete lines. Memory is bounded by
 * `maxLine`: the bytes of a longer line past that are dropped and the line is passed
 * on as `overlong` (its first `maxLine` bytes). Line numbers count from 1.
 */
export class RawLineSplitter {
  private carry: Buffer[] = [];
  private carryLen = 0;
  private overlong = false;
  lineNo = 0;

  constructor(private readonly maxLine = DEFAULT_MAX_LINE) {}

  push(chunk: Buffer, onLine: RawLineFn): void {
    let pos = 0;
    const n = chunk.length;
    while (pos < n) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) {
        this.keep(chunk.subarray(pos));
        return;
      }
      if (this.carryLen === 0 && !this.overlong) {
        onLine(chunk, pos, nl, ++this.lineNo, false);
      } else {
        this.keep(chunk.subarray(pos, nl));
        this.emitCarry(onLine);
      }
      pos = nl + 1;
    }
  }

  /** Passes on a last line that has no LF; returns whether there was one. */
  end(onLine: RawLineFn): boolean {
    if (this.carryLen === 0 && !this.overlong) return false;
    this.emitCarry(onLine);
    return true;
  }

  private emitCarry(onLine: RawLineFn): void {
    const line = Buffer.concat(this.carry, this.carryLen);
    const over = this.overlong;
    this.carry = [];
    this.carryLen = 0;
    this.overlong = false;
    onLine(line, 0, line.length, ++this.lineNo, over);
  }

  private keep(piece: Buffer): void {
    if (this.overlong) return;
    const room = this.maxLine - this.carryLen;
    if (piece.length > room) {
      this.overlong = true;
      piece = piece.subarray(0, room);
    }
    // Copy: the stream may hand us views into a buffer it reuses.
    if (piece.length) {
      this.carry.push(Buffer.from(piece));
      this.carryLen += piece.length;
    }
  }
}

/** Receives one decoded line (no LF) and its 1-based number. */
export type TextLineFn = (line: string, lineNo: number) => void;

/**
 * Splits a UTF-8 byte stream into string lines, decoding a whole chunk at a time
 * (much faster than decoding line by line). Used for the project's own streams,
 * where every line must end in LF: `end()` reports a last line without one.
 */
export class TextLineSplitter {
  private carry: Buffer | null = null;
  lineNo = 0;

  constructor(
    private readonly file: string,
    private readonly maxLine = DEFAULT_MAX_LINE,
  ) {}

  push(chunk: Buffer, onLine: TextLineFn): void {
    const last = chunk.lastIndexOf(LF);
    if (last === -1) {
      this.carry = this.carry ? Buffer.concat([this.carry, chunk]) : Buffer.from(chunk);
      if (this.carry.length > this.maxLine) {
        throw new DataError('LINE_TOO_LONG', `line longer than ${this.maxLine} bytes`, {
          file: this.file,
          line: this.lineNo + 1,
        });
      }
      return;
    }
    let text: string;
    if (this.carry) {
      text = Buffer.concat([this.carry, chunk.subarray(0, last)]).toString('utf8');
    } else {
      text = chunk.toString('utf8', 0, last);
    }
    this.carry = last + 1 < chunk.length ? Buffer.from(chunk.subarray(last + 1)) : null;
    let from = 0;
    for (;;) {
      const nl = text.indexOf('\n', from);
      if (nl === -1) {
        onLine(from === 0 ? text : text.slice(from), ++this.lineNo);
        break;
      }
      onLine(text.slice(from, nl), ++this.lineNo);
      from = nl + 1;
    }
  }

  /** Throws if the input ended inside a line (a cut-off file or a crashed producer). */
  end(): void {
    if (this.carry && this.carry.length > 0) {
      throw new DataError('TRUNCATED', 'last line has no newline (input cut off?)', {
        file: this.file,
        line: this.lineNo + 1,
      });
    }
  }
}

/**
 * Reads a regular file line by line, synchronously, in large blocks: the second
 * input of a merge-join, pulled one line at a time. Every line must end in LF.
 */
export class FileLineReader {
  private fd: number;
  private buf: Buffer;
  private lines: string[] = [];
  private idx = 0;
  private carry: Buffer | null = null;
  private eof = false;
  lineNo = 0;

  constructor(
    readonly file: string,
    blockSize = 1 << 20,
  ) {
    try {
      this.fd = fs.openSync(file, 'r');
    } catch (err) {
      throw ioError(err, file, 'open');
    }
    this.buf = Buffer.allocUnsafe(blockSize);
  }

  /** Opens `file`, or returns null if it does not exist. */
  static openIfExists(file: string): FileLineReader | null {
    try {
      return new FileLineReader(file);
    } catch (err) {
      if (err instanceof DataError && /ENOENT/.test(err.message)) return null;
      throw err;
    }
  }

  /** The next line, or null at the end of the file. */
  next(): string | null {
    while (this.idx >= this.lines.length) {
      if (this.eof) return null;
      this.fill();
    }
    this.lineNo++;
    return this.lines[this.idx++]!;
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }

  private fill(): void {
    let n: number;
    try {
      n = fs.readSync(this.fd, this.buf, 0, this.buf.length, null);
    } catch (err) {
      throw ioError(err, this.file, 'read');
    }
    this.lines = [];
    this.idx = 0;
    if (n === 0) {
      this.eof = true;
      this.close();
      if (this.carry && this.carry.length) {
        throw new DataError('TRUNCATED', 'last line has no newline (file cut off?)', {
          file: this.file,
          line: this.lineNo + 1,
        });
      }
      return;
    }
    const chunk = this.buf.subarray(0, n);
    const last = chunk.lastIndexOf(LF);
    if (last === -1) {
      this.carry = this.carry ? Buffer.concat([this.carry, chunk]) : Buffer.from(chunk);
      if (this.carry.length > DEFAULT_MAX_LINE) {
        throw new DataError('LINE_TOO_LONG', `line longer than ${DEFAULT_MAX_LINE} bytes`, {
          file: this.file,
          line: this.lineNo + 1,
        });
      }
      return;
    }
    const text = this.carry
      ? Buffer.concat([this.carry, chunk.subarray(0, last)]).toString('utf8')
      : chunk.toString('utf8', 0, last);
    this.carry = last + 1 < n ? Buffer.from(chunk.subarray(last + 1)) : null;
    this.lines = text.split('\n');
  }
}

/**
 * A buffered, synchronous file writer. Errors (ENOSPC, EACCES, ...) surface as a
 * DataError naming the file, at the write or flush that hit them.
 */
export class FileWriter {
  private fd: number;
  // Text is encoded straight into one reused buffer: no joined strings, no garbage.
  private buf: Buffer;
  private pos = 0;
  bytes = 0;

  constructor(
    readonly file: string,
    flags: string = 'w',
    highWater = 1 << 18,
  ) {
    try {
      this.fd = fs.openSync(file, flags, 0o644);
    } catch (err) {
      throw ioError(err, file, 'open for writing');
    }
    this.buf = Buffer.allocUnsafeSlow(highWater);
  }

  write(data: string | Uint8Array): void {
    const room = this.buf.length - this.pos;
    if (typeof data === 'string') {
      // Up to 3 bytes per UTF-16 unit; most text is ASCII and takes the fast path.
      if (data.length * 3 <= room || (data.length <= room && Buffer.byteLength(data) <= room)) {
        this.pos += this.buf.write(data, this.pos);
        return;
      }
      data = Buffer.from(data, 'utf8');
    }
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
  }

  /** Flushes, optionally fsyncs, and closes. */
  close(sync = false): void {
    if (this.fd < 0) return;
    try {
      this.flush();
      if (sync) fs.fsyncSync(this.fd);
    } finally {
      const fd = this.fd;
      this.fd = -1;
      try {
        fs.closeSync(fd);
      } catch (err) {
        throw ioError(err, this.file, 'close');
      }
    }
  }

  /** Closes without flushing; for abandoning a temporary file. */
  abandon(): void {
    if (this.fd < 0) return;
    try {
      fs.closeSync(this.fd);
    } catch {
      /* already failing */
    }
    this.fd = -1;
    this.pos = 0;
  }
}

/**
 * Writes `file` atomically: content goes to a temporary file in the same directory,
 * which is renamed over `file` by `commit()`; `abort()` removes it.
 */
export class AtomicFileWriter extends FileWriter {
  readonly target: string;
  private done = false;

  constructor(target: string) {
    super(`${target}.tmp-${process.pid}`, 'w');
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
  }

  abort(): void {
    if (this.done) return;
    this.abandon();
    removeQuietly(this.file);
    liveTempFiles.delete(this.file);
    this.done = true;
  }
}

/** Temporary files to remove if the process exits before they are committed. */
export const liveTempFiles = new Set<string>();

export function removeQuietly(file: string): void {
  try {
    fs.rmSync(file, { force: true, recursive: true });
  } catch {
    /* best effort on the way out */
  }
}

/**
 * Finds the TAB positions of `line` into `at`; returns the number of fields, or
 * `at.length + 2` when the line has more fields than `at` can describe. Lets a stage
 * take fields as slices of the line instead of splitting it into an array.
 */
export function findTabs(line: string, at: Int32Array): number {
  let n = 0;
  let p = line.indexOf('\t');
  while (p !== -1) {
    if (n === at.length) return n + 2;
    at[n++] = p;
    p = line.indexOf('\t', p + 1);
  }
  return n + 1;
}
