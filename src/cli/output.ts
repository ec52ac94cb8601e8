// Batched writing to stdout with backpressure at chunk boundaries (never per line),
// and a quiet stop when the reader goes away (`| head`).
import type { Writable } from 'node:stream';

/** Thrown by `flush()` once the reader of stdout has gone away (EPIPE). */
export class OutputClosed extends Error {
  constructor() {
    super('output closed');
    this.name = 'OutputClosed';
  }
}

/**
 * Collects output text and hands it to the stream in large writes (64 KiB). Stages
 * call `write()` freely; between input chunks they `await flushIfFull()`, which
 * waits only when the stream asked for a pause. On Linux, stdout writes to pipes
 * and files are synchronous, so memory stays bounded even within one chunk.
 */
export class Output {
  private parts: string[] = [];
  private pending = 0;
  private needDrain = false;
  private error: Error | null = null;
  closed = false;

  constructor(
    private readonly stream: Writable,
    private readonly highWater = 1 << 16,
  ) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') this.closed = true;
      else this.error = err;
    });
  }

  write(text: string): void {
    this.parts.push(text);
    this.pending += text.length;
    if (this.pending >= this.highWater) this.hand();
  }

  /** Writes bytes as they are; `buf` must not be changed afterwards. */
  writeBytes(buf: Buffer): void {
    this.hand();
    if (this.closed) return;
    if (!this.stream.write(buf)) this.needDrain = true;
  }

  /** Call between input chunks: waits only if the stream is full. */
  flushIfFull(): Promise<void> | undefined {
    if (this.error || this.closed) this.check();
    return this.needDrain ? this.flush() : undefined;
  }

  /** Writes out everything gathered, waiting for the stream to drain if it is full. */
  async flush(): Promise<void> {
    this.check();
    this.hand();
    if (this.needDrain) {
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
      this.needDrain = false;
    }
    this.check();
  }

  /** Flushes and waits until the stream has accepted every byte. */
  async end(): Promise<void> {
    await this.flush();
    await new Promise<void>((resolve) => {
      // An empty write's callback runs after every earlier write has been handled.
      this.stream.write('', () => resolve());
    });
    this.check();
  }

  private hand(): void {
    if (this.pending === 0 || this.closed) return;
    const text = this.parts.length === 1 ? this.parts[0]! : this.parts.join('');
    this.parts = [];
    this.pending = 0;
    if (!this.stream.write(text)) this.needDrain = true;
  }

  private check(): void {
    if (this.error) throw this.error;
    if (this.closed) throw new OutputClosed();
  }
}
