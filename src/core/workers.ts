// Handing work to worker threads: a pool whose results come back in the order asked.
import { Worker } from 'node:worker_threads';

/**
 * A fixed set of worker threads running one module. A job goes to the worker with
 * the fewest pending (`offer`) or is done by the caller (`local`); answers are handed
 * to `onResult` strictly in the order the jobs were given, as soon as each is ready
 * (so progress does not wait for more input).
 */
export class WorkerPool<J, R> {
  private workers: Worker[] = [];
  /** Per worker, the numbers of its jobs not yet answered (each worker answers in order). */
  private jobs: number[][] = [];
  private posted = 0;
  private applied = 0;
  private ready = new Map<number, R>();
  private failure: unknown = null;
  private wake: (() => void) | null = null;
  private closed = false;

  constructor(
    file: URL,
    workerData: unknown,
    size: number,
    private readonly onResult: (r: R) => void,
  ) {
    for (let i = 0; i < size; i++) {
      const w = new Worker(file, { workerData });
      const jobs: number[] = [];
      w.on('message', (r: R) => {
        this.ready.set(jobs.shift()!, r);
        this.deliver();
      });
      w.on('error', (err) => this.fail(err));
      // Any end before close() is a failure, idle or not: a job posted to an ended thread is
      // never answered, and a wait with no handle left open let the process exit 0 unfinished.
      w.on('exit', (code) => {
        if (!this.closed) this.fail(new Error(`worker thread exited (code ${code})${jobs.length > 0 ? ' with work pending' : ''}`));
      });
      this.workers.push(w);
      this.jobs.push(jobs);
    }
  }

  /**
   * Posts a job to the worker with the fewest jobs pending (the first of equals), handing
   * over the buffers in `transfer`, if it has fewer than `max`; returns false, posting
   * nothing, when every worker has `max` or more.
   */
  offer(job: J, transfer: ArrayBuffer[], max: number): boolean {
    let best = 0;
    for (let i = 1; i < this.jobs.length; i++) if (this.jobs[i]!.length < this.jobs[best]!.length) best = i;
    if (this.jobs[best]!.length >= max) return false;
    this.jobs[best]!.push(this.posted++);
    this.workers[best]!.postMessage(job, transfer);
    return true;
  }

  /** Jobs posted to the workers and not yet answered. */
  get pending(): number {
    let n = 0;
    for (const jobs of this.jobs) n += jobs.length;
    return n;
  }

  /** Takes the answer of a job done outside the workers, as the next job's: handed on in order like theirs. */
  local(r: R): void {
    this.ready.set(this.posted++, r);
    this.deliver();
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
    this.closed = true;
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
