// Batched writing to stdout with backpressure at chunk boundaries (never per line),
// and a quiet stop when the reader goes away (`| head`).
import type { Writable } from 'node:stream';
import { putText, type ByteSink } from '../core/bytes.js';
import { ioError } from '../core/errors.js';

/** Thrown by `flush()` once the reader of stdout has gone away (EPIPE). */
export class OutputClosed extends Error {
  constructor() {
    super('output closed');
    this.name = 'OutputClosed';
  }
}

/** Written buffers kept for reuse: up to 4 MiB of them, about what a pipe may hold queued between two waits. */
const MAX_SPARE = 64;

/**
 * Gathers output, text or bytes, in a buffer and hands it to the stream in large
 * writes (64 KiB). Stages call `write()` freely, or write bytes straight into
 * `buf` after `reserve()` (it is a ByteSink); between input chunks they `await
 * flushIfFull()`, which waits only while the stream asks for a pause. Whether it
 * does is asked of the stream at that moment (`writableNeedDrain`), never
 * remembered from a write: a pipe (non-blocking, written asynchronously) may drain
 * while the stage awaits something else, such as a database's answer, and the
 * 'drain' it then emits is not emitted again.
 */
export class Output implements ByteSink {
  buf: Buffer;
  pos = 0;
  private error: Error | null = null;
  closed = false;
  /** Buffers the stream has written out, to fill again (recycling, not garbage: a stage writes thousands). */
  private readonly spare: Buffer[] = [];
  /** Bytes handed to the stream so far (for progress). */
  bytesOut = 0;

  /**
   * `reuseWritten`: fill again a buffer the stream has written through (its
   * writableLength 0 after the write); only for a stream that keeps no chunk once it
   * has written it, as process.stdout (a pipe, a file or a terminal) does.
   */
  constructor(
    private readonly stream: Writable,
    private readonly highWater = 1 << 16,
    private readonly reuseWritten = false,
  ) {
    this.buf = Buffer.allocUnsafeSlow(highWater);
    stream.on('error', (err: NodeJS.ErrnoException) => this.failed(err));
  }

  /** Takes a write's failure: a reader gone (EPIPE) closes the output, anything else is an error. */
  private failed(err: NodeJS.ErrnoException): void {
    if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') this.closed = true;
    else this.error ??= err;
  }

  write(text: string): void {
    putText(this, text);
  }

  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.hand();
    if (this.pos + n > this.buf.length) {
      const bigger = Buffer.allocUnsafeSlow(this.pos + n);
      this.buf.copy(bigger, 0, 0, this.pos);
      this.buf = bigger;
    }
  }

  /** Writes bytes as they are; `buf` must not be changed afterwards. */
  writeBytes(buf: Buffer): void {
    this.hand();
    if (this.closed || buf.length === 0) return;
    // The byte held back goes first, as a copy: its place in `buf` takes buf's last byte.
    if (this.pos > 0) this.send(Buffer.from(this.buf.subarray(0, this.pos)));
    this.send(buf.subarray(0, buf.length - 1));
    this.buf[0] = buf[buf.length - 1]!;
    this.pos = 1;
  }

  /** Call between input chunks: waits only if the stream is full. */
  flushIfFull(): Promise<void> | undefined {
    if (this.error || this.closed || this.stream.errored) this.check();
    return this.stream.writableNeedDrain ? this.flush() : undefined;
  }

  /** Writes out everything gathered, waiting for the stream to drain if it is full. */
  async flush(): Promise<void> {
    this.check();
    this.hand();
    // Asked now: a 'drain' that came before this call does not come again.
    while (this.stream.writableNeedDrain && !this.closed && !this.error) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.stream.off('drain', done);
          this.stream.off('error', done);
          this.stream.off('close', done);
          resolve();
        };
        this.stream.on('drain', done);
        this.stream.on('error', done);
        this.stream.on('close', done);
      });
    }
    this.check();
  }

  /** Flushes and waits until the stream has accepted every byte, the held-back last one too. */
  async end(): Promise<void> {
    await this.flush();
    // Every byte written went before the one held back, so there is one unless nothing was
    // ever written; then nothing is: an empty write fails on a full device (/dev/full).
    if (this.pos > 0 && !this.closed) {
      const last = this.buf.subarray(0, this.pos);
      this.buf = Buffer.allocUnsafeSlow(this.highWater);
      this.pos = 0;
      // Its callback runs after every earlier write has been handled (or failed).
      await new Promise<void>((resolve) => {
        this.stream.write(last, () => resolve());
      });
    }
    this.check();
  }

  /**
   * Hands the gathered bytes to the stream but the last (the stream keeps that buffer,
   * so a new one is taken, starting with the byte held back). Only end() writes the
   * last byte: the output of a run that fails, or is killed in any way, ends in a line
   * without its LF, which the next stage refuses as cut off.
   */
  private hand(): void {
    if (this.pos <= 1) return;
    const whole = this.buf;
    const bytes = whole.subarray(0, this.pos - 1);
    const last = whole[this.pos - 1]!;
    this.buf = this.spare.pop() ?? Buffer.allocUnsafeSlow(this.highWater);
    this.buf[0] = last;
    this.pos = 1;
    this.send(bytes, this.reuseWritten && whole.length === this.highWater ? whole : null);
  }

  /**
   * Writes `bytes`; `whole`, the buffer they are in, is filled again if the stream
   * wrote them at once (a pipe with room, a file on stdout): it holds no byte then.
   * (A callback would keep every buffer until the event loop turns, and a stage that
   * writes without waiting, such as analyze-dump to a file, would hold its whole output.)
   */
  private send(bytes: Buffer, whole: Buffer | null = null): void {
    if (this.closed || bytes.length === 0) return;
    this.bytesOut += bytes.length;
    if (whole === null) {
      this.stream.write(bytes);
      return;
    }
    // Written at once (a file, a pipe with room): filled again now. Queued (a pipe whose
    // reader is behind): filled again once written, not left to the garbage collector,
    // which let a group's worth of written buffers pile up between collections (80 MiB
    // more peak RSS for analyze-dump writing a 10M-line hour into a pipe).
    let taken = false;
    this.stream.write(bytes, () => {
      if (!taken) this.recycle(whole);
    });
    if (this.stream.writableLength === 0) {
      taken = true;
      this.recycle(whole);
    }
  }

  private recycle(whole: Buffer): void {
    if (this.spare.length < MAX_SPARE) this.spare.push(whole);
  }

  private check(): void {
    // A write that failed at once (a file on a full device is written synchronously)
    // marks the stream errored now and emits 'error' only later: asked of the stream too.
    if (this.stream.errored && !this.closed && !this.error) this.failed(this.stream.errored as NodeJS.ErrnoException);
    // Named as stdout's: thrown from the input loop, it would pass for a read error.
    if (this.error) throw ioError(this.error, 'stdout', 'write output');
    if (this.closed) throw new OutputClosed();
  }
}
