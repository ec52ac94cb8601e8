// reflog-to-yacobot-queue status, run for real after a committed, a nothing-to-do, a
// failed, a lock-busy and a config-error invocation: its exit code (0 healthy, 1 not)
// and its JSON, checked against runs.jsonl and the files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runRunner } from './lib/run.js';
import { committedJob, deliver, deliverBad, newJob, runJob } from './lib/job.js';
import { runsJsonl } from './lib/runner-state.js';
import { countLines } from '../src/core/lines.js';

interface StatusJson {
  healthy: boolean;
  last_success: { run: string; at: string; seconds: number } | null;
  last_invocation: { result: string; success: boolean; exit: number; at: string; error: string | null; runs: string[] } | null;
  inbox: { reflogs: number; oldest_age_seconds: number | null };
  backlog: Record<string, { files: number; urls: number }>;
  lock: { held: boolean; pid: number | null };
  current_log_urls: number | null;
  carry: unknown;
}

/** Runs `status --json ARGS`; its exit code and parsed output. */
function status(dir: string, args: string[] = []): { code: number | null; s: StatusJson } {
  const r = runRunner(dir, ['status', '--json', ...args]);
  assert.ok(r.status === 0 || r.status === 1, `status exit ${r.status}: ${r.stderr}`);
  return { code: r.status, s: JSON.parse(r.stdout) as StatusJson };
}

/** Files of the directory that hold `run`'s queue files, summed per Yacobot. */
function queued(dir: string): Record<string, { files: number; urls: number }> {
  const out: Record<string, { files: number; urls: number }> = {};
  for (const y of fs.readdirSync(path.join(dir, 'var/queue'))) {
    const files = fs.readdirSync(path.join(dir, 'var/queue', y));
    out[y] = { files: files.length, urls: files.reduce((n, f) => n + countLines(path.join(dir, 'var/queue', y, f)), 0) };
  }
  return out;
}

test('status: exit code and JSON after a committed, a nothing-to-do and a failed invocation', () => {
  const dir = newJob('ms-status-');
  const before = status(dir);
  assert.equal(before.code, 1, 'no invocation recorded yet: not healthy');
  assert.equal(before.s.last_invocation, null);

  deliver(dir, '2011072806');
  assert.equal(runJob(dir).status, 0);
  const committed = status(dir);
  assert.deepEqual(
    Object.keys(committed.s).sort(),
    [
      'backlog',
      'carry',
      'current_log_urls',
      'fenced',
      'healthy',
      'inbox',
      'interrupted',
      'last_invocation',
      'last_success',
      'lock',
      'lock_age_seconds',
      'reason',
      'stuck',
    ].sort(),
  );
  assert.equal(committed.code, 0);
  assert.equal(committed.s.healthy, true);
  assert.equal(committed.s.last_invocation?.result, 'committed');
  assert.deepEqual(committed.s.last_invocation?.runs, ['2011072806']);
  const rec = runsJsonl(dir).at(-1)!;
  assert.equal(committed.s.last_success?.run, '2011072806');
  assert.equal(committed.s.last_success?.seconds, rec.seconds);
  assert.equal(Date.parse(committed.s.last_success!.at), Date.parse(rec.start as string) + (rec.seconds as number) * 1000);
  assert.deepEqual(committed.s.inbox, { reflogs: 0, oldest_age_seconds: null });
  assert.deepEqual(committed.s.backlog, queued(dir));
  assert.equal(committed.s.current_log_urls, countLines(path.join(dir, 'var/state/current_log')));
  assert.equal(committed.s.lock.held, false);
  assert.equal(status(dir, ['--max-age', '1d']).code, 0, 'committed within a day');
  assert.equal(status(dir, ['--max-age', '0']).code, 1, 'older than 0 s');

  assert.equal(runJob(dir).status, 0);
  const idle = status(dir);
  assert.equal(idle.code, 0);
  assert.equal(idle.s.last_invocation?.result, 'nothing to do');
  assert.deepEqual(idle.s.last_success, committed.s.last_success, 'nothing to do changes no last success');
  assert.ok(idle.s.last_invocation!.at > committed.s.last_invocation!.at);

  deliverBad(dir, '2011072807');
  assert.equal(runJob(dir).status, 1);
  const failed = status(dir);
  assert.equal(failed.code, 1);
  assert.equal(failed.s.healthy, false);
  assert.equal(failed.s.last_invocation?.result, 'failed');
  assert.equal(failed.s.last_invocation?.exit, 1);
  assert.match(failed.s.last_invocation?.error ?? '', /run 2011072807 failed: .*reject/);
  assert.deepEqual(failed.s.last_success, committed.s.last_success, 'a failed run leaves the last success alone');
  assert.equal(failed.s.inbox.reflogs, 1);
  assert.ok(failed.s.inbox.oldest_age_seconds !== null && failed.s.inbox.oldest_age_seconds >= 0);

  const human = runRunner(dir, ['status']);
  assert.equal(human.status, 1);
  assert.match(human.stdout, /^NOT healthy: the last invocation ended with exit 1 \(failed\)\n/);
  assert.match(human.stdout, /last success: run 2011072806/);
});

test('status: a lock-busy and a config-error invocation are seen, and the lock holder is named', async () => {
  const dir = committedJob('ms-status-lock-', ['2011072806']);
  const lockFile = path.join(dir, 'var/state/lock');
  // Its own process group: the sleep holds the lock too, and goes with flock.
  const holder: ChildProcess = spawn('flock', [lockFile, 'sleep', '30'], { stdio: 'ignore', detached: true });
  try {
    await waitFor(() => fs.readFileSync('/proc/locks', 'utf8').includes(`:${fs.statSync(lockFile).ino} `));
    const busy = runJob(dir);
    assert.equal(busy.status, 75);
    const s = status(dir);
    assert.equal(s.code, 0, 'an exit 75 beside a run that is not stuck is healthy');
    assert.equal(s.s.last_invocation?.result, 'locked');
    assert.equal(s.s.lock.held, true);
    assert.equal(s.s.last_success?.run, '2011072806');
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }
  await waitFor(() => !fs.readFileSync('/proc/locks', 'utf8').includes(`:${fs.statSync(lockFile).ino} `));
  assert.equal(status(dir).s.lock.held, false);

  assert.equal(runJob(dir, ['--keep', '1x']).status, 2);
  const bad = status(dir);
  assert.equal(bad.code, 1);
  assert.equal(bad.s.last_invocation?.result, 'config error');
  assert.match(bad.s.last_invocation?.error ?? '', /keep/);

  fs.writeFileSync(path.join(dir, 'job.conf'), 'state = var/state\nbogus = 1\n');
  assert.equal(runJob(dir, ['--config', 'job.conf']).status, 2);
  assert.match(status(dir).s.last_invocation?.error ?? '', /job\.conf:2: unknown key 'bogus'/, 'the state key of a config file refused for another line');
});

test('status: usage errors exit 2', () => {
  const dir = newJob('ms-status-usage-');
  for (const args of [['--max-age', 'soon'], ['extra'], ['--bogus', 'x']]) {
    const r = runRunner(dir, ['status', ...args]);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /^reflog-to-yacobot-queue status: /);
  }
});

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), 'timed out');
}
