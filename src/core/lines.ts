// Line splitting for the streams and files the stages read: bytes cut into lines
// (never decoded), checked as UTF-8, held to a longest line; the TAB positions of a line.
// Lines end in LF; fields are separated by one TAB; no quoting.
import { isAscii, isUtf8 } from 'node:buffer';
import * as fs from 'node:fs';
import { LF, TAB, latin1 } from './bytes.js';
import { DataError, ioError } from './errors.js';

/** Longest line a stage reading text lines buffers; a longer one is an error. */
export const DEFAULT_MAX_LINE = 1 << 20;

/**
 * Cuts a byte stream into batches of whole lines of at least `target` bytes (a last
 * line without LF ends the final batch). The bytes are read straight into the
 * batch's own buffer (`room()`, then `filled(n)`), so that a batch is handed on
 * without a copy: only the start of the line that spans two batches is copied, to
 * the front of the next buffer. A line too long for a buffer (longer than `maxLine`
 * + 2 bytes) is cut to `maxLine + 2` bytes, so memory stays bounded and the reader
 * still sees it as too long, even after stripping a CR from its end (a line of
 * `maxLine` bytes and a CR is kept whole); its last byte is made a TAB if the cut-off
 * part had one, so whether the line has a TAB at all is kept. Nothing else changes:
 * the lines of the batches are the lines of the input (their first `maxLine` bytes at
 * least).
 */
export class LineBatcher {
  /** The batch being filled: buf[0, used). */
  private buf: Buffer | null = null;
  private used = 0;
  /** Dropping the rest of a line cut to maxLine + 2 bytes, up to its LF; and whether a TAB was dropped. */
  private cutting = false;
  private droppedTab = false;
  /** Buffers handed back for reuse. */
  private spare: ArrayBuffer[] = [];
  /** Bytes of a batch buffer: room for the target, and for a line of maxLine + 2 bytes and more. */
  private readonly size: number;

  constructor(
    private readonly target: number,
    private readonly maxLine: number,
  ) {
    this.size = Math.max(target, maxLine + 3);
  }

  /** Where the next input bytes go: the free end of the batch buffer (never empty). */
  room(): Buffer {
    this.buf ??= this.fresh();
    return this.buf.subarray(this.used);
  }

  /** Takes `n` bytes written at the start of the last `room()`; returns the batch they completed, or null. */
  filled(n: number): Buffer | null {
    const b = this.buf!;
    const from = this.used;
    this.used += n;
    if (this.cutting && !this.dropUntilLf(b, from)) return null;
    if (this.used < this.target && this.used < b.length) return null;
    const lastLf = this.used === 0 ? -1 : b.lastIndexOf(LF, this.used - 1);
    if (lastLf !== -1) return this.hand(lastLf + 1);
    // One line fills the buffer: it keeps maxLine + 2 bytes.
    if (this.used === b.length) {
      const keep = this.maxLine + 2;
      this.droppedTab = b.subarray(keep, this.used).indexOf(TAB) !== -1;
      this.used = keep;
      this.cutting = true;
    }
    return null;
  }

  /** Copies a chunk in (for input read as a stream); returns the batches it completed. */
  push(chunk: Uint8Array): Buffer[] {
    const out: Buffer[] = [];
    for (let at = 0; at < chunk.length; ) {
      const room = this.room();
      const n = Math.min(room.length, chunk.length - at);
      room.set(chunk.subarray(at, at + n));
      at += n;
      const batch = this.filled(n);
      if (batch) out.push(batch);
    }
    return out;
  }

  /** The final batch (whatever is left, with a last line that has no LF), or null. */
  end(): Buffer | null {
    const b = this.buf;
    if (this.cutting) this.endCut(b!, this.used);
    const n = this.used;
    this.buf = null;
    this.used = 0;
    return b !== null && n > 0 ? b.subarray(0, n) : null;
  }

  /** Takes back a batch's buffer (one this batcher made) for a later batch. */
  recycle(batch: Uint8Array): void {
    if (this.spare.length < 8 && batch.buffer.byteLength >= this.size) this.spare.push(batch.buffer as ArrayBuffer);
  }

  /**
   * Drops the new bytes b[from, used) of a line being cut, up to its LF, which then
   * follows the kept bytes with whatever came after it; returns whether it came.
   */
  private dropUntilLf(b: Buffer, from: number): boolean {
    const lf = b.indexOf(LF, from);
    const found = lf !== -1 && lf < this.used;
    const dropEnd = found ? lf : this.used;
    if (!this.droppedTab && b.subarray(from, dropEnd).indexOf(TAB) !== -1) this.droppedTab = true;
    if (!found) {
      this.used = from;
      return false;
    }
    this.endCut(b, from);
    b.copyWithin(from, lf, this.used);
    this.used = from + (this.used - lf);
    return true;
  }

  /** Ends the cut of a line kept as b[.., keptEnd): its last byte becomes a TAB if a dropped one was. */
  private endCut(b: Buffer, keptEnd: number): void {
    if (this.droppedTab) b[keptEnd - 1] = TAB;
    this.cutting = false;
    this.droppedTab = false;
  }

  /** Hands out buf[0, end) as a batch (its own whole ArrayBuffer, so it can be transferred); the rest starts the next one. */
  private hand(end: number): Buffer {
    const b = this.buf!;
    const next = this.fresh();
    b.copy(next, 0, end, this.used);
    this.used -= end;
    this.buf = next;
    return b.subarray(0, end);
  }

  private fresh(): Buffer {
    const spare = this.spare.pop();
    return spare ? Buffer.from(spare, 0, this.size) : Buffer.allocUnsafeSlow(this.size);
  }
}

/**
 * Receives one line as the bytes `buf[start, end)` (no LF) and its 1-based number.
 * The line is the caller's chunk's bytes (or a buffer of the splitter's own, for a
 * line that spans two chunks, which it never writes again): valid as long as the
 * chunk is (join-current keeps the lines of a chunk that wait for current_log).
 */
export type ByteLineFn = (buf: Buffer, start: number, end: number, lineNo: number, checked: boolean) => void;

/**
 * A line format's one pass over a line from `start` in `buf[.., limit)` (record-checks.ts:
 * RecordScanner): the LF that ends a line the format's check passes, else -1. A
 * splitter given one hands such a line on as `checked`, found and checked at once.
 * `fresh` is true for the first line of a chunk or block: a reused buffer may hold
 * new bytes where a scanner looked ahead.
 */
export type LineScan = (buf: Uint8Array, start: number, limit: number, fresh: boolean) => number;

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

  push(chunk: Buffer, onLine: ByteLineFn, scan?: LineScan): void {
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
      // Handed out for good: a stage may keep a line past the call
      // (join-current keeps the lines that wait for current_log), and the carry of the
      // next line, in this same push, went into it (a record lost, exit 0).
      this.carry = EMPTY;
      this.carried = 0;
      if (!isUtf8(line.subarray(0, n))) throw badUtf8(this.file, this.lineNo + 1);
      onLine(line, 0, n, ++this.lineNo, false);
      from = nl + 1;
    }
    const n = chunk.length;
    const first = from;
    while (from < n) {
      const scanned = scan ? scan(chunk, from, n, from === first) : -1;
      const nl = scanned >= 0 ? scanned : chunk.indexOf(LF, from);
      if (nl === -1) break;
      if (!ascii && !isUtf8(chunk.subarray(from, nl))) throw badUtf8(this.file, this.lineNo + 1);
      onLine(chunk, from, nl, ++this.lineNo, scanned >= 0);
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
const STREAM_WRITERS = ['analyze-dump', 'group-sum', 'join-current', 'filter-url', 'limit-domains', 'upload-domains', 'domains-from-db'];

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

/** The error for a line longer than `max` bytes, at `line` of `file`. */
export function lineTooLong(file: string, line: number, max: number): DataError {
  return new DataError('LINE_TOO_LONG', `line longer than ${max} bytes`, { file, line });
}

/**
 * Reads a regular file line by line, as bytes, synchronously, in large blocks: the
 * second input of a merge-join, pulled one line at a time. Every line must end in LF.
 */
export class FileLineReader {
  private fd: number;
  /**
   * Each read goes into this one buffer: the whole lines it completed are
   * block[0, dataEnd), the last one's LF excluded, and the start of the line after
   * them, block[carryFrom, carryTo), moves to the front before the next read.
   */
  private block: Buffer;
  private dataEnd = 0;
  private carryFrom = 0;
  private carryTo = 0;
  /** Where the next line of `block` starts; past dataEnd once all are taken. */
  private at = 1;
  private eof = false;
  /** Whether block[0, dataEnd) is all ASCII (then no line needs its own UTF-8 check). */
  private ascii = true;
  lineNo = 0;
  /** Whether `next`'s scan passed the line it gave. */
  checked = false;

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
   * false at the end of the file. With `scan`, `checked` says whether it passed the
   * line (see LineScan).
   */
  next(line: { buf: Uint8Array; start: number; end: number }, scan?: LineScan): boolean {
    if (this.at > this.dataEnd) {
      if (!this.fill()) return false;
      this.at = 0;
    }
    const scanned = scan ? scan(this.block, this.at, this.dataEnd, this.at === 0) : -1;
    this.checked = scanned >= 0;
    let nl = scanned >= 0 ? scanned : this.block.indexOf(LF, this.at);
    if (nl === -1 || nl > this.dataEnd) nl = this.dataEnd;
    line.buf = this.block;
    line.start = this.at;
    line.end = nl;
    this.lineNo++;
    if (!this.ascii && !isUtf8(this.block.subarray(this.at, nl))) throw badUtf8(this.file, this.lineNo);
    this.at = nl + 1;
    return true;
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }

  /**
   * Reads blocks until one completes a line; false at the end of the file. The lines
   * of the block before are overwritten: a line is valid until the next call of next().
   */
  private fill(): boolean {
    for (;;) {
      if (this.eof) return false;
      const kept = this.keepCarry();
      let n: number;
      try {
        n = fs.readSync(this.fd, this.block, kept, this.block.length - kept, null);
      } catch (err) {
        throw ioError(err, this.file, 'read');
      }
      if (n === 0) {
        this.eof = true;
        this.close();
        if (kept > 0) throw cutOff(this.file, this.lineNo + 1, 'file', this.block.subarray(0, kept));
        return false;
      }
      const end = kept + n;
      const last = this.block.lastIndexOf(LF, end - 1);
      this.carryFrom = last + 1;
      this.carryTo = end;
      if (last === -1) {
        if (end > this.maxLine) throw lineTooLong(this.file, this.lineNo + 1, this.maxLine);
        continue;
      }
      // A line begun in an earlier block ends here: it is held to the limit too.
      if (kept > 0 && this.block.indexOf(LF, kept) > this.maxLine) throw lineTooLong(this.file, this.lineNo + 1, this.maxLine);
      this.dataEnd = last;
      this.ascii = isAscii(this.block.subarray(0, last));
      return true;
    }
  }

  /** Moves the start of a line that the last read left to the front of the block (grown if it fills it); returns its length. */
  private keepCarry(): number {
    const n = this.carryTo - this.carryFrom;
    if (n === this.block.length) {
      const bigger = Buffer.allocUnsafe(2 * n);
      this.block.copy(bigger, 0, 0, n);
      this.block = bigger;
    } else if (n > 0) this.block.copyWithin(0, this.carryFrom, this.carryTo);
    this.carryFrom = 0;
    this.carryTo = 0;
    return n;
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
