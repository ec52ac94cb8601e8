// status and the metrics file give one honest verdict: a run a kill left unfinished is
// not healthy and named; a lock held past --max-run-time is stuck (exit 1, its pid and
// age); an exit 75 beside a run that is not stuck is healthy; the run_* series outlive a
// rotation of runs.jsonl; a runner killed alone, its stages holding the lock on, is dead.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RUNNER, runRunner, testEnv } from './lib/run.js';
import { committedJob, deliver, runJob } from './lib/job.js';
import { runsJsonl } from './lib/runner-state.js';
import { freshBig, processesWhere } from './lib/runner.js';

/** Runs `status ARGS`: its exit code, its first line (the verdict) and its JSON (with --json). */
function status(dir: string, args: string[] = []): { code: number | null; verdict: string; json: Record<string, unknown> } {
  const human = runRunner(dir, ['status', ...args]);
  const json = runRunner(dir, ['status', '--json', ...args]);
  assert.equal(json.status, human.status, json.stderr);
  return { code: human.status, verdict: human.stdout.split('\n')[0]!, json: JSON.parse(json.stdout) as Record<string, unknown> };
}

/** Runs the runner in `dir`, killed (SIGKILL) by itself just before commit step STEP of run RUN (`failpoint` RUN:STEP). */
function killedAt(dir: string, failpoint: string, args: string[]): SpawnSyncReturns<string> {
  return spawnSync(RUNNER, ['--log-level', 'silent', ...args], {
    cwd: dir,
    env: testEnv({ REFLOG_RUNNER_FAILPOINT: failpoint }),
    encoding: 'utf8',
    timeout: 120_000,
  });
}

/** The samples of metrics file `file`: 'name{labels}' -> value. */
function samples(file: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(l);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** Holds STATE/lock with flock(1) (its own process group), the lock file naming `pid` started at `since`; resolves once held. */
async function holdLock(dir: string, pid: number, since: Date): Promise<ChildProcess> {
  const lock = path.join(dir, 'var/state/lock');
  fs.writeFileSync(lock, `pid=${pid} host=${os.hostname()} started=${since.toISOString()} cmd=reflog-to-yacobot-queue\n`);
  const holder = spawn('flock', [lock, 'sleep', '60'], { stdio: 'ignore', detached: true });
  const ino = `:${fs.statSync(lock).ino} `;
  for (let i = 0; i < 200 && !fs.readFileSync('/proc/locks', 'utf8').includes(ino); i++) await new Promise((r) => setTimeout(r, 25));
  return holder;
}

test('a run a SIGKILL left unfinished: status and the metrics are not healthy and name it; the next invocation makes them healthy', () => {
  const metrics = ['--metrics-file', 'var/job.prom'];
  const dir = committedJob('ms-health-kill-', ['2011072806'], metrics);
  assert.equal(status(dir).code, 0);
  deliver(dir, '2011072807');
  const killed = killedAt(dir, '2011072807:chain', metrics);
  assert.equal(killed.signal, 'SIGKILL');
  const s = status(dir);
  assert.equal(s.code, 1);
  assert.equal(
    s.verdict,
    'NOT healthy: run 2011072807 was interrupted: its invocation was killed or stopped before its commit, nothing of it was published; the next invocation runs it again',
  );
  assert.deepEqual(s.json.interrupted, [{ run: '2011072807', committed: false }]);
  // Killed before a commit step: committed, not fully published.
  assert.equal(runJob(dir, metrics).status, 0);
  assert.equal(status(dir).code, 0);
  deliver(dir, '2011072808');
  const atCommit = killedAt(dir, '2011072808:record', metrics);
  assert.equal(atCommit.signal, 'SIGKILL');
  assert.equal(
    status(dir).verdict,
    'NOT healthy: run 2011072808 is committed but not fully published (its invocation was killed, or a publish step failed): the next invocation finishes it',
  );
  // The metrics written by an exit 75 beside the killed one's stray holder would say so too; here the next
  // invocation writes them healthy.
  assert.equal(runJob(dir, metrics).status, 0);
  assert.equal(samples(path.join(dir, 'var/job.prom')).get('master_server_healthy'), 1);
  assert.equal(samples(path.join(dir, 'var/job.prom')).get('master_server_interrupted_runs'), 0);
  assert.equal(status(dir).code, 0);
});

test('exit 75 beside a run that is not stuck is healthy; a lock held past --max-run-time is stuck (exit 1, pid and age), in the metrics too', async () => {
  const metrics = ['--metrics-file', 'var/job.prom'];
  const dir = committedJob('ms-health-lock-', ['2011072806'], metrics);
  const prom = path.join(dir, 'var/job.prom');

  let holder = await holdLock(dir, 4242, new Date(Date.now() - 10 * 60_000));
  try {
    assert.equal(runJob(dir, metrics).status, 75);
    const s = status(dir);
    assert.equal(s.code, 0, s.verdict);
    assert.equal(s.verdict, 'healthy');
    assert.equal(s.json.stuck, false);
    const m = samples(prom);
    assert.deepEqual([m.get('master_server_healthy'), m.get('master_server_lock_stuck'), m.get('master_server_last_invocation_exit_code')], [1, 0, 75]);
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }

  const since = new Date(Date.now() - 2 * 3600_000);
  holder = await holdLock(dir, 4243, since);
  try {
    assert.equal(runJob(dir, metrics).status, 75);
    const s = status(dir);
    assert.equal(s.code, 1);
    assert.match(
      s.verdict,
      new RegExp(
        `^NOT healthy: stuck: process 4243 on \\S+ has held the lock for 2h(\\d+s)? \\(since ${since.toISOString()}\\), more than --max-run-time 50m$`,
      ),
    );
    assert.equal(s.json.stuck, true);
    assert.ok((s.json.lock_age_seconds as number) >= 7200);
    const m = samples(prom);
    assert.deepEqual([m.get('master_server_healthy'), m.get('master_server_lock_stuck')], [0, 1]);
    assert.ok(m.get('master_server_lock_held_seconds')! >= 7200);
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }
  // The holder gone without recording how it ended: the exit 75 is the last word, and it is not healthy.
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(
    status(dir).verdict,
    'NOT healthy: the last invocation found the lock held (exit 75), and its holder has ended since without recording how (killed?)',
  );
});

test('the run_* series outlive a rotation of runs.jsonl: an invocation with nothing to do keeps them', () => {
  const metrics = ['--metrics-file', 'var/job.prom'];
  const dir = committedJob('ms-health-rotate-', ['2011072806'], metrics);
  const prom = path.join(dir, 'var/job.prom');
  const before = [...samples(prom)].filter(([k]) => k.startsWith('master_server_run_'));
  assert.ok(before.length > 5);
  assert.equal(runsJsonl(dir).length, 1);
  fs.renameSync(path.join(dir, 'var/state/runs.jsonl'), path.join(dir, 'var/state/runs.jsonl.1')); // logrotate's create
  assert.equal(runJob(dir, metrics).status, 0);
  const after = [...samples(prom)].filter(([k]) => k.startsWith('master_server_run_'));
  assert.deepEqual(after, before);
});

test('a kill -9 of the runner alone: its stages hold the lock on; status says the runner is dead, names them and what to do', async () => {
  const dir = freshBig();
  const child = spawn(RUNNER, [], { cwd: dir, env: testEnv(), detached: true, stdio: 'ignore' });
  const exited = new Promise((r) => child.on('exit', r));
  try {
    // analyze-dump stopped (SIGSTOP) as soon as it runs: the chain cannot end while the runner is killed.
    let stages: number[] = [];
    for (let i = 0; i < 2000 && stages.length === 0; i++) {
      // The stage itself (node), not the bash whose script names it.
      stages = processesWhere((cmd) => /^\S*node .*\/bin\/analyze-dump /.test(cmd) && cmd.includes(dir));
      if (stages.length === 0) await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(stages.length > 0, 'analyze-dump started');
    for (const pid of stages) process.kill(pid, 'SIGSTOP');
    process.kill(child.pid!, 'SIGKILL');
    await exited;
    const s = status(dir);
    assert.equal(s.code, 1, s.verdict);
    assert.match(
      s.verdict,
      new RegExp(
        `^NOT healthy: the runner \\(process ${child.pid}\\) has ended \\(killed\\?\\), and the stages it started still run and hold the lock: .*\\b${stages[0]} analyze-dump\\b.*\\. ` +
          'Nothing of run 2011072806 was published, and nothing of it will be: stop them \\(`kill [\\d ]+`\\) or let them end; the next invocation then runs the hour again$',
      ),
    );
    const lock = s.json.lock as { held: boolean; pid: number; holder_alive: boolean; left: { pid: number; name: string }[] };
    assert.deepEqual([lock.held, lock.pid, lock.holder_alive], [true, child.pid, false]);
    assert.ok(
      lock.left.some((p) => p.pid === stages[0] && p.name === 'analyze-dump'),
      JSON.stringify(lock.left),
    );
    assert.match(
      runRunner(dir, ['status']).stdout,
      new RegExp(`^lock: held by process ${child.pid} .*, which has ended; held now by .*\\b${stages[0]} analyze-dump\\b`, 'm'),
    );
  } finally {
    process.kill(-child.pid!, 'SIGKILL'); // its process group: the stages and their bash
  }
  spawnSync('flock', ['-w', '10', path.join(dir, 'var/state/lock'), 'true']);
  // They are gone: the interrupted run, as after a kill of the whole invocation.
  assert.match(status(dir).verdict, /^NOT healthy: run 2011072806 was interrupted: /);
});
