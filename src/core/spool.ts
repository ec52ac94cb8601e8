// A stream of lines written once and read back in order, in memory up to a budget and
// in a private temporary file beyond it: for a stage that needs its input twice.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { LF } from './bytes.js';
import { ioError } from './errors.js';
import { DEFAULT_MAX_LINE, FileLineReader } from './lines.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly } from './temps.js';

/** The prefix of a spool's temporary file in its directory (see ownedTempPrefix). */
export const SPOOL_PREFIX = 'master-server-spool-';

const CHUNK = 1 << 20;

/** Where the next line is read: `buf[start, end)`, no LF. */
export interface LineSlot {
  buf: Uint8Array;
  start: number;
  end: number;
}

/** Lines read back one at a time: `next` points the slot at the next line, false at the end. */
export interface LineSource {
  next(line: LineSlot): boolean;
  close(): void;
}

/**
 * A ByteSink of whole lines (each written after a `reserve` of its length), kept in
 * 1 MiB chunks while they fit `budget` bytes, all of it moved to a temporary file in
 * `tmpDir` once they do not. `finish()` ends the writing; `reader()` then reads the
 * lines back, as often as asked. `dispose()` removes the file (the stage runner
 * removes it on any exit, as it is in liveTempFiles).
 */
export class Spool {
  buf: Buffer = Buffer.allocUnsafeSlow(CHUNK);
  pos = 0;
  private chunks: Buffer[] = [];
  private held = 0;
  private fd = -1;
  private file: string | null = null;
  bytes = 0;

  constructor(
    private readonly budget: number,
    private readonly tmpDir: string,
  ) {}

  /** Whether the lines went to a file. */
  get spilled(): boolean {
    return this.file !== null;
  }

  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.seal();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafeSlow(n);
  }

  /** Ends the writing. */
  finish(): void {
    this.seal();
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }

  /** The lines, from the first (after finish()). */
  reader(): LineSource {
    if (this.file !== null) return new FileLineReader(this.file, CHUNK, this.file, 2 * DEFAULT_MAX_LINE);
    return new ChunkLines(this.chunks);
  }

  dispose(): void {
    if (this.fd >= 0) fs.closeSync(this.fd);
    this.fd = -1;
    this.chunks = [];
    if (this.file !== null) {
      removeQuietly(this.file);
      liveTempFiles.delete(this.file);
    }
  }

  /** Puts the lines of the current buffer away: a chunk kept, or written to the file. */
  private seal(): void {
    if (this.pos === 0) return;
    const used = this.buf.subarray(0, this.pos);
    this.bytes += this.pos;
    this.pos = 0;
    if (this.file === null && this.held + this.buf.length <= this.budget) {
      this.chunks.push(used);
      this.held += this.buf.length;
      this.buf = Buffer.allocUnsafeSlow(CHUNK);
      return;
    }
    if (this.file === null) this.open();
    for (const c of this.chunks) this.write(c);
    this.chunks = [];
    this.held = 0;
    this.write(used);
  }

  private open(): void {
    const file = path.join(this.tmpDir, `${ownedTempPrefix(SPOOL_PREFIX)}${Date.now().toString(36)}`);
    try {
      this.fd = fs.openSync(file, 'wx', 0o600);
    } catch (err) {
      throw ioError(err, this.tmpDir, 'create a temporary file in');
    }
    this.file = file;
    liveTempFiles.add(file);
  }

  private write(data: Uint8Array): void {
    try {
      for (let off = 0; off < data.length; ) off += fs.writeSync(this.fd, data, off, data.length - off);
    } catch (err) {
      throw ioError(err, this.file!, 'write');
    }
  }
}

/** The lines of chunks of whole lines. */
class ChunkLines implements LineSource {
  private c = 0;
  private at = 0;

  constructor(private readonly chunks: readonly Buffer[]) {}

  next(line: LineSlot): boolean {
    for (; this.c < this.chunks.length; this.c++, this.at = 0) {
      const chunk = this.chunks[this.c]!;
      if (this.at >= chunk.length) continue;
      const lf = chunk.indexOf(LF, this.at);
      line.buf = chunk;
      line.start = this.at;
      line.end = lf;
      this.at = lf + 1;
      return true;
    }
    return false;
  }

  close(): void {}
}
