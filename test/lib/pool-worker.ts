// A worker module for test/workers.test.ts: answers each job after its delay, or
// throws, or ends its thread, as the job says; one job at a time, in the order
// received, as analyze-dump's worker does (the pool relies on it). Loaded as a
// plain module (the test runner runs every file under test/), it does nothing.
import { parentPort, workerData } from 'node:worker_threads';

export interface PoolJob {
  n: number;
  delayMs: number;
  /** 'answer-exit': answers, then ends its thread (idle: no job of its pending). */
  action: 'answer' | 'throw' | 'exit' | 'answer-exit';
}

let previous = Promise.resolve();
parentPort?.on('message', (job: PoolJob) => {
  previous = previous.then(
    () =>
      new Promise<void>((resolve) =>
        setTimeout(() => {
          if (job.action === 'throw') throw new Error(`job ${job.n} failed in the worker`);
          if (job.action === 'exit') process.exit(3);
          parentPort!.postMessage({ n: job.n, tag: (workerData as { tag: string }).tag });
          if (job.action === 'answer-exit') setTimeout(() => process.exit(0), 20);
          resolve();
        }, job.delayMs),
      ),
  );
});
