// The cron runner's lock: one invocation per state directory, and the holder it names.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, runRunner, testEnv } from './lib/run.js';
import { Locked, acquireLock } from '../src/runner/state/lock.js';
import * as os from 'node:os';
import { sub, fresh } from './lib/runner.js';

/** What acquireLock(file) reports of the holder; fails the test if the lock was free. */
function lockedBy(file: string): Locked {
  try {
    acquireLock(file);
  } catch (e) {
    if (e instanceof Locked) return e;
    throw e;
  }
  assert.fail('the lock was free');
}

/**
 * A process that takes the lock on `file` and writes its pid line a moment later, as
 * the winner of a simultaneous start does; resolves once it holds the lock.
 */
async function lateHolder(file: string): Promise<ChildProcess> {
  // Blocking flock: our probe below may hold the lock for an instant just as the holder
  // starts (with -n the holder then gave up, and the probe loop waited forever).
  const holder = spawn('flock', [file, 'bash', '-c', `sleep 0.3; printf 'pid=%s host=%s started=now\\n' $$ "$(hostname)" > '${file}'; sleep 5`], {
    stdio: 'ignore',
  });
  const deadline = Date.now() + 20_000;
  while (spawnSync('flock', ['-n', file, 'true']).status === 0) {
    if (Date.now() >= deadline) {
      holder.kill();
      assert.fail('the holder never took the lock');
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return holder;
}

describe('the lock', () => {
  // A second runner on the same state directory exits 75 naming the holder.
  test('a second runner exits 75 naming the holder', async () => {
    const dir = fresh();
    // The first runner stops itself (SIGSTOP) just before its first chain, the lock held: left to
    // run, it could finish all three runs while a second runner on a loaded machine was starting.
    const stopAt = { REFLOG_RUNNER_FAILPOINT: '2011072806:chain', REFLOG_RUNNER_FAILSIGNAL: 'SIGSTOP' };
    const first = spawn(RUNNER, [], { cwd: dir, env: testEnv(stopAt), stdio: 'ignore', detached: true });
    const lock = path.join(dir, 'var/state/lock');
    const stopped = () => {
      try {
        return fs.readFileSync(`/proc/${first.pid}/stat`, 'utf8').split(') ')[1]!.startsWith('T');
      } catch {
        return false;
      }
    };
    const closed = new Promise((resolve) => first.on('close', resolve));
    try {
      const t0 = Date.now();
      while (!stopped()) {
        assert.ok(Date.now() - t0 < 60_000 && first.exitCode === null, 'first runner took the lock and reached its first chain');
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.match(fs.readFileSync(lock, 'utf8'), new RegExp(`^pid=${first.pid} `));
      // A guard against a second runner that waits for the lock instead of exiting 75.
      const second = runRunner(dir, [], 60_000);
      assert.equal(second.status, 75, second.stderr);
      assert.match(second.stderr, new RegExp(`process ${first.pid}\\b`));
      assert.ok(!fs.existsSync(path.join(dir, 'var/state/done/2011072808.reflog')), 'the first runner was still running');
    } finally {
      try {
        process.kill(-first.pid!, 'SIGKILL');
      } catch {
        /* ended already */
      }
      await closed;
      spawnSync('flock', ['-w', '10', lock, 'true']);
    }
  });

  // A lock just taken by a new holder, whose file still names an ended one, is reported as the new holder.
  test("a new holder over an ended one's line", async () => {
    const dir = sub('lock-');
    const file = path.join(dir, 'lock');
    fs.writeFileSync(file, `pid=999999999 host=${os.hostname()} started=earlier cmd=reflog-to-yacobot-queue\n`);
    const holder = await lateHolder(file);
    try {
      const err = lockedBy(file);
      assert.doesNotMatch(err.holder, /999999999|has ended/, err.holder);
      assert.match(err.holder, /^process \d+ on /);
    } finally {
      holder.kill();
    }
  });

  // The lock names its holder as the holder wrote it: not a former holder whose line is still in the file, not a pid
  // of another host taken for ended, and a holder that writes its pid a moment late.
  test('the holder as the holder wrote itself', async () => {
    const dir = sub('lockname-');
    const file = path.join(dir, 'lock');
    // A former holder's line, longer than ours: the new holder replaces it.
    fs.writeFileSync(file, `pid=999999999 host=${os.hostname()} started=2011-07-28T06:00:00.000Z cmd=reflog-to-yacobot-queue ${'x'.repeat(200)}\n`);
    const held = acquireLock(file);
    try {
      assert.match(fs.readFileSync(file, 'utf8'), new RegExp(`^pid=${process.pid} host=\\S+ started=\\S+ cmd=reflog-to-yacobot-queue\\n$`));
      const r = runRunner(dir, ['--inbox', '.', '--state', '.'], 20_000);
      assert.equal(r.status, 75, r.stderr);
      assert.match(r.stderr, new RegExp(`lock is locked by process ${process.pid} on `));
      assert.doesNotMatch(r.stderr, /999999999|has ended/);
      // A holder on another host (a shared state directory): its pid means nothing here.
      fs.writeFileSync(file, 'pid=999999999 host=elsewhere.example started=2011-07-28T06:00:00.000Z cmd=reflog-to-yacobot-queue\n');
      assert.equal(lockedBy(file).holder, 'process 999999999 on elsewhere.example, running since 2011-07-28T06:00:00.000Z');
    } finally {
      fs.closeSync(held.fd);
    }

    // A new lock file that its holder has not written yet: the pid it writes a moment later is named.
    const fresh = path.join(dir, 'lock2');
    const holder = await lateHolder(fresh);
    try {
      assert.match(lockedBy(fresh).holder, /^process \d+ on \S+, running since now$/);
    } finally {
      holder.kill();
    }
  });
});
