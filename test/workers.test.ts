// WorkerPool (analyze-dump's worker threads): answers in the order asked whatever
// order the threads finish in, and a thread that throws or ends with work pending
// fails the caller's wait with a reason instead of leaving it waiting forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkerPool } from '../src/core/workers.js';
import type { PoolJob } from './lib/pool-worker.js';

const WORKER = new URL('./lib/pool-worker.js', import.meta.url);
/** A pool that never wakes its caller fails by this, not by hanging the suite. */
const LIMIT = { timeout: 20_000 };

interface Answer {
  n: number;
  tag: string;
}

/**
 * A pool of `size` test workers; returns it, `post` (a job with no limit on pending
 * ones: posted at once, the jobs go to the workers in turn) and the answers in the
 * order handed over.
 */
function pool(size: number, onResult?: (a: Answer) => void) {
  const got: number[] = [];
  const p = new WorkerPool<PoolJob, Answer>(WORKER, { tag: 'x' }, size, (a) => {
    assert.equal(a.tag, 'x', 'workerData reached the thread');
    got.push(a.n);
    onResult?.(a);
  });
  const post = (job: PoolJob) => assert.ok(p.offer(job, [], Infinity));
  return { p, post, got };
}

test('answers are handed over in the order the jobs were posted, though later jobs finish first', LIMIT, async () => {
  const { p, post, got } = pool(3);
  try {
    // Job 0 is the slowest: every other answer is ready before it and must wait.
    const delays = [120, 5, 60, 0, 30, 10, 90, 1];
    for (const [n, delayMs] of delays.entries()) post({ n, delayMs, action: 'answer' });
    await p.settle(4);
    assert.ok(got.length >= 4, `at most 4 left pending: ${got}`);
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7].slice(0, got.length));
    await p.settle(0);
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7]);
  } finally {
    p.close();
  }
});

test('a worker that throws fails settle() with its error; answers after the failure are not handed over', LIMIT, async () => {
  const { p, post, got } = pool(2);
  try {
    // Answer 0 is handed over before job 1 is posted: the two threads start independently,
    // and a throw on the other one (20 ms after it started) could come before the first
    // one's answer. Job 2 (on the other thread) answers after the throw, or before it, but
    // in either case after a failure that comes first in posting order.
    post({ n: 0, delayMs: 0, action: 'answer' });
    await p.settle(0);
    post({ n: 1, delayMs: 20, action: 'throw' });
    post({ n: 2, delayMs: 200, action: 'answer' });
    await assert.rejects(p.settle(0), /job 1 failed in the worker/);
    assert.deepEqual(got, [0]);
  } finally {
    p.close();
  }
});

test('a worker thread that ends with work pending fails settle() saying so, rather than a wait forever', LIMIT, async () => {
  const { p, post, got } = pool(2);
  try {
    post({ n: 0, delayMs: 0, action: 'answer' });
    post({ n: 1, delayMs: 0, action: 'exit' });
    post({ n: 2, delayMs: 0, action: 'answer' });
    post({ n: 3, delayMs: 0, action: 'answer' });
    await assert.rejects(p.settle(0), /worker thread exited \(code 3\) with work pending/);
    assert.ok(!got.includes(1) && !got.includes(3), `nothing of the dead thread: ${got}`);
  } finally {
    p.close();
  }
});

test('a worker thread that ends while idle fails the next settle() rather than taking jobs it never answers', LIMIT, async () => {
  const { p, post, got } = pool(1);
  let exited = false;
  try {
    post({ n: 0, delayMs: 0, action: 'answer-exit' });
    await p.settle(0);
    assert.deepEqual(got, [0]);
    // Its thread ends with nothing pending (as when the main thread parsed the batches meanwhile).
    const w = (p as unknown as { workers: import('node:worker_threads').Worker[] }).workers[0]!;
    await new Promise<void>((resolve) => w.once('exit', () => resolve()));
    exited = true;
    // Before: offer() posted to the ended thread, and settle() waited for an answer that never
    // came; with no other handle open, Node then exited 0, and analyze-dump with it (no output, no summary).
    p.offer({ n: 1, delayMs: 0, action: 'answer' }, [], 2);
    await assert.rejects(p.settle(0), /worker thread exited \(code 0\)/);
  } finally {
    assert.ok(exited);
    p.close();
  }
});

test('an error thrown while handing an answer over fails settle() with it', LIMIT, async () => {
  const { p, post, got } = pool(2, (a) => {
    if (a.n === 1) throw new Error('sink refused answer 1');
  });
  try {
    for (let n = 0; n < 4; n++) post({ n, delayMs: 0, action: 'answer' });
    await assert.rejects(p.settle(0), /sink refused answer 1/);
    assert.deepEqual(got, [0, 1], 'no answer handed over after the failure');
  } finally {
    p.close();
  }
});

test('offer() posts to the worker with the fewest jobs, up to a limit; local() answers take their place in the order', LIMIT, async () => {
  const { p, got } = pool(2);
  try {
    const job = (n: number) => ({ n, delayMs: 50, action: 'answer' as const });
    // Two workers, at most two jobs each: jobs 0-3 are posted, 4 is refused.
    for (let n = 0; n < 4; n++) assert.equal(p.offer(job(n), [], 2), true, `job ${n} posted`);
    assert.equal(p.offer(job(4), [], 2), false, 'every worker has two jobs');
    // Done here instead, as job 4: handed over only after 0-3, though ready first.
    p.local({ n: 4, tag: 'x' });
    assert.deepEqual(got, [], 'job 4 waits for the jobs posted before it');
    await p.settle(0);
    assert.deepEqual(got, [0, 1, 2, 3, 4]);
    // With nothing pending, a local answer is handed over at once.
    p.local({ n: 5, tag: 'x' });
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5]);
    assert.equal(p.offer(job(6), [], 1), true, 'room again');
    await p.settle(0);
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6]);
  } finally {
    p.close();
  }
});
