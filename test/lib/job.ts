// A scratch directory laid out as the cron runner's defaults (var/inbox, var/state with
// a partner database of two Yacobots, var/queue), and the reflogs that drive it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, madeDb, runRunner, scratch } from './run.js';

export const FIXTURE_REFLOGS = path.join(ROOT, 'fixtures', 'reflogs');

/** A fresh job directory: inbox, state with partner.db (Yacobots 1 'y1' weight 1, 2 'y2' weight 2). */
export function newJob(prefix: string): string {
  const dir = scratch(prefix);
  fs.mkdirSync(path.join(dir, 'var/inbox'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'var/state'), { recursive: true });
  madeDb(dir, 'var/state/partner.db', [
    ['add', 'y1'],
    ['add', 'y2', '--weight', '2'],
  ]);
  return dir;
}

/** Puts fixture reflog RUN (2011072806, ...) into the job's inbox. */
export function deliver(dir: string, run: string): void {
  fs.copyFileSync(path.join(FIXTURE_REFLOGS, `${run}.reflog`), path.join(dir, 'var/inbox', `${run}.reflog`));
}

/** Puts a reflog RUN whose every line is rejected (bad timestamps) into the inbox: its run fails. */
export function deliverBad(dir: string, run: string): void {
  const lines = Array.from({ length: 20 }, (_, i) => `1000\t5\t2011072899${i}\t7\thttp://bad.example/${i}\t1\n`);
  fs.writeFileSync(path.join(dir, 'var/inbox', `${run}.reflog`), lines.join(''));
}

/** Runs the runner in the job directory; returns its exit status and stderr. */
export function runJob(dir: string, args: string[] = []): { status: number | null; stderr: string } {
  const r = runRunner(dir, ['--log-level', 'silent', ...args]);
  return { status: r.status, stderr: r.stderr };
}

const committedJobs = new Map<string, string>();

/**
 * A job directory (newJob) after the runner, invoked with `args`, committed the fixture
 * hours `runs`, all delivered before its one invocation, which must exit 0: run so once
 * per test process for each list of hours and arguments, and copied from there (the same
 * files and times).
 */
export function committedJob(prefix: string, runs: string[], args: string[] = []): string {
  const key = JSON.stringify([runs, args]);
  let made = committedJobs.get(key);
  if (made === undefined) {
    made = newJob('ms-job-');
    for (const run of runs) deliver(made, run);
    const r = runJob(made, args);
    if (r.status !== 0) throw new Error(`the runner on ${runs.join(', ')} exited ${r.status}: ${r.stderr}`);
    committedJobs.set(key, made);
  }
  const dir = scratch(prefix);
  fs.cpSync(made, dir, { recursive: true, preserveTimestamps: true });
  return dir;
}
