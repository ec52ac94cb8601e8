// Handing line-oriented work to worker threads: the input cut into batches of whole
// lines with bounded memory, and a pool whose results come back in the order asked.
import { Worker } from 'node:worker_threads';

const LF = 10;

/**
 * Cuts a byte stream into batches of whole lines of about `target` bytes (a last
 * line without LF ends the final batch). A line that spans chunks and grows longer
 * than `maxLine` is cut to `maxLine + 1` bytes, so memory stays bounded and the
 * reader still sees it as too long; nothing else changes, so the lines of the
 * batches are the lines of the input (their first `maxLine + 1` bytes at least).
 */
export class LineBatcher {
  private parts: Buffer[] = [];
  private partsLen = 0;
  /** Buffers handed back for reuse. */
  private spare: Uint8Array[] = [];
  /** The line in progress (no LF seen yet), at most maxLine + 1 bytes. */
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

  /** Adds bytes to the line in progress, keeping at most maxLine + 1 of them (and its LF). */
  private grow(piece: Buffer): void {
    const endsLine = piece.length > 0 && piece[piece.length - 1] === LF;
    const room = this.maxLine + 1 - this.tailLen;
    if (piece.length - (endsLine ? 1 : 0) > room) {
      if (room > 0) this.tail.push(Buffer.from(piece.subarray(0, room)));
      this.tailLen += room;
      if (endsLine) {
        this.tail.push(Buffer.from([LF]));
        this.tailLen++;
      }
      return;
    }
    this.tail.push(piece);
    this.tailLen += piece.length;
  }
}

/**
 * A fixed set of worker threads running one module. Jobs go to the workers in turn;
 * their answers are handed to `onResult` strictly in the order the jobs were posted,
 * as soon as each is ready (so progress does not wait for more input).
 */
export class WorkerPool<J, R> {
  private workers: Worker[] = [];
  private posted = 0;
  private applied = 0;
  private ready = new Map<number, R>();
  private failure: unknown = null;
  private wake: (() => void) | null = null;

  constructor(file: URL, workerData: unknown, size: number, private readonly onResult: (r: R) => void) {
    for (let i = 0; i < size; i++) {
      const w = new Worker(file, { workerData });
      // Each worker answers its own jobs in order.
      const jobs: number[] = [];
      w.on('message', (r: R) => {
        this.ready.set(jobs.shift()!, r);
        this.deliver();
      });
      w.on('error', (err) => this.fail(err));
      w.on('exit', (code) => {
        if (jobs.length > 0) this.fail(new Error(`worker thread exited (code ${code}) with work pending`));
      });
      (w as Worker & { jobs: number[] }).jobs = jobs;
      this.workers.push(w);
    }
  }

  /** Posts a job to the next worker, handing over the buffers in `transfer`. */
  post(job: J, transfer: ArrayBuffer[] = []): void {
    const w = this.workers[this.posted % this.workers.length] as Worker & { jobs: number[] };
    w.jobs.push(this.posted++);
    w.postMessage(job, transfer);
  }

  /** Waits until at most `pending` posted jobs are still to be handed over; throws the first failure. */
  async settle(pending: number): Promise<void> {
    for (;;) {
      if (this.failure !== null) throw this.failure;
      if (this.posted - this.applied <= pending) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Stops the workers (pending jobs are dropped). */
  close(): void {
    for (const w of this.workers) void w.terminate();
    this.workers = [];
  }

  private deliver(): void {
    try {
      while (this.failure === null && this.ready.has(this.applied)) {
        const r = this.ready.get(this.applied)!;
        this.ready.delete(this.applied);
        this.applied++;
        this.onResult(r);
      }
    } catch (err) {
      this.fail(err);
    }
    this.notify();
  }

  private fail(err: unknown): void {
    this.failure ??= err;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}
