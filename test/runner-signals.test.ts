// The cron runner on SIGTERM, SIGINT and SIGHUP: it stops its stages, exits 128+N, and the run
// under way is finished or redone later.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { ROOT, RUNNER, hasStackTrace, runRunner, testEnv } from './lib/run.js';
import { assertSameState, newDomains, runsJsonl, snapshot } from './lib/runner-state.js';
import { RUNS, type Done, runner, processesWhere, processRunning, fresh, ref, RUN0, freshFirstOnly, ref1, freshBig } from './lib/runner.js';

/**
 * Starts the runner on a big reflog with an analyze-dump deaf to SIGTERM and SIGINT
 * that never ends by itself (test/lib/deaf-stage), SIGTERMs the runner, checks that it
 * waits for that stage, then runs `then`. Returns how the runner ended (status null:
 * it had not exited 20 s after `then`, and the group was SIGKILLed).
 */
async function withStuckStage(
  args: string[],
  then: (runner: ChildProcess) => void,
): Promise<{ dir: string; status: number | null; stderr: string; ms: number; left: number[]; lockFree: boolean }> {
  const dir = freshBig();
  const lock = path.join(dir, 'var/state/lock');
  const ready = path.join(dir, 'deaf-ready');
  const env = { NODE_OPTIONS: `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/deaf-stage.js')).href}`, DEAF_STAGE: 'analyze-dump', DEAF_READY: ready };
  const child = spawn(RUNNER, args, { cwd: dir, env: testEnv(env), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const closed = new Promise<number | null>((resolve) => child.on('close', (status) => resolve(status)));
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  for (const deadline = Date.now() + 30_000; !fs.existsSync(ready) && Date.now() < deadline && child.exitCode === null; ) await pause(5);
  assert.ok(fs.existsSync(ready), `analyze-dump started, deaf to SIGTERM: ${stderr}`);
  process.kill(child.pid!, 'SIGTERM');
  await pause(300);
  assert.equal(child.exitCode, null, `the runner waits for its stuck analyze-dump: ${stderr}`);
  const t0 = Date.now();
  then(child);
  const status = await Promise.race([closed, pause(20_000).then(() => null)]);
  const ms = Date.now() - t0;
  const left = processesWhere((cmd) => cmd.includes(dir));
  const lockFree = spawnSync('flock', ['-n', lock, 'true']).status === 0;
  if (status === null) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
    await closed;
  }
  return { dir, status, stderr, ms, left, lockFree };
}

describe('while the chain runs', () => {
  // SIGTERM to the runner alone while a chain runs: it stops its stages, exits 143 publishing nothing of that run,
  // and a rerun finishes the same.
  test('SIGTERM: exit 143, nothing published', async () => {
    const { snap: want } = await ref();
    for (const [k, run] of RUNS.map((f) => f.replace(/\.reflog$/, '')).entries()) {
      const dir = fresh();
      // Signalled as soon as run k's chain has started (its first stage's log exists).
      const started = path.join(dir, 'var/state/staging', run, 'work/log/1.analyze-dump.log');
      const r = await runner(dir, [], { termWhen: () => fs.existsSync(started) });
      const what = `SIGTERM during run ${run}`;
      // The lock is free when runner() returns: no stage outlived the runner.
      assert.equal(r.status, 143, `${what}: status ${r.status} ${r.signal}: ${r.stderr}`);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      assert.ok(
        r.stderr.includes(
          `stopped by SIGTERM; nothing of the interrupted run ${run} was published (the next invocation runs it again); ${RUNS.length - k} reflog(s) stay in`,
        ),
        `${what}: ${r.stderr}`,
      );
      const done = runsJsonl(dir)
        .filter((x) => x.status === 'ok')
        .map((x) => String(x.run));
      assert.deepEqual(
        done,
        RUNS.slice(0, k).map((f) => f.replace(/\.reflog$/, '')),
        `${what}: the runs before it are recorded`,
      );
      const left = fs.readdirSync(path.join(dir, 'var/inbox')).sort();
      assert.deepEqual(left, RUNS.slice(k), `${what}: it and the runs after it stay in the inbox`);
      const final = await runner(dir);
      assert.equal(final.status, 0, `${what}: ${final.stderr}`);
      // Its summary line says what happened, not "after a crash".
      assert.match(final.stderr, new RegExp(`: ${run}: .* s \\(rerun of an interrupted attempt\\)\n`), `${what}: ${final.stderr}`);
      assertSameState(snapshot(dir), want, what);
      assert.deepEqual(newDomains(dir), newDomains((await ref()).dir), `${what}: new_domains`);
    }
  });

  // SIGTERM, SIGINT or SIGHUP to the runner while a chain runs: it stops its stages and exits 143, 130 or 129,
  // publishing nothing of that run; a rerun finishes it.
  test('SIGTERM, SIGINT, SIGHUP: exit 143, 130, 129', async () => {
    const run = RUN0;
    // SIGHUP (the terminal went away) must be handled like the others, not kill the runner
    // and leave its stages running.
    for (const [sig, status] of [
      ['SIGTERM', 143],
      ['SIGINT', 130],
      ['SIGHUP', 129],
    ] as const) {
      const dir = freshFirstOnly();
      const started = path.join(dir, 'var/state/staging', run, 'work/log/1.analyze-dump.log');
      const r = await runner(dir, [], { termWhen: () => fs.existsSync(started), termSignal: sig });
      const what = `${sig} during run ${run}: status ${r.status} ${r.signal}: ${r.stderr}`;
      assert.equal(r.signal, null, `${what}: the runner handled it`);
      assert.equal(r.status, status, what);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      assert.ok(
        r.stderr.includes(`stopped by ${sig}; nothing of the interrupted run ${run} was published (the next invocation runs it again); 1 reflog(s) stay in`),
        what,
      );
      assert.deepEqual(runsJsonl(dir), [], `${sig}: no run recorded`);
      assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]], `${sig}: the reflog stays in the inbox`);
      assert.ok(!fs.existsSync(path.join(dir, 'var/queue')) || fs.readdirSync(path.join(dir, 'var/queue')).length === 0, `${sig}: no queue file`);
      assert.ok(!fs.existsSync(path.join(dir, 'var/state/current_log')), `${sig}: no current_log`);
      const final = await runner(dir);
      assert.equal(final.status, 0, `${sig}, then a rerun: ${final.stderr}`);
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status]),
        [[run, 'ok']],
        `${sig}, then a rerun`,
      );
    }
  });

  // SIGTERM while analyze-dump reads a big reflog: exit 143, not a silent 0.
  test('SIGTERM amid a big reflog exits 143', async () => {
    // The chain dies with the reflog's rest unread: the runner once fed it through a
    // pipe, saw the pipe destroyed without an error, waited for a drain that never
    // came, and exited 0 without a word (3 of 7 tries by hand).
    const dir = freshBig();
    const staging = path.join(dir, 'var/state/staging');
    for (const delay of [0, 20, 50, 100]) {
      // Signalled `delay` ms after analyze-dump's process appears: the pipe is full by then.
      let seen = 0;
      const r = await runner(dir, [], {
        termWhen: () => {
          if (seen === 0 && processRunning((cmd) => cmd.includes('analyze-dump') && cmd.includes(dir))) seen = Date.now();
          return seen > 0 && Date.now() - seen >= delay;
        },
      });
      assert.equal(r.status, 143, `${delay} ms after analyze-dump started: status ${r.status} ${r.signal}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /stopped by SIGTERM; nothing of the interrupted run 2011072806 was published \(the next invocation runs it again\); 1 reflog\(s\) stay in/,
      );
      assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), ['2011072806.reflog']);
      assert.equal(fs.existsSync(path.join(dir, 'var/queue')) && fs.readdirSync(path.join(dir, 'var/queue')).length > 0, false, 'no queue file');
      fs.rmSync(staging, { recursive: true, force: true });
    }
  });

  // A SIGTERM that comes just as the chain would start stops the run before the chain starts.
  test('SIGTERM just before the chain starts', async () => {
    // It once went unseen until the chain had run the whole hour.
    const { snap: want } = await ref();
    const names = RUNS.map((f) => f.replace(/\.reflog$/, ''));
    const dir = fresh();
    const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${names[1]}:chain`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
    assert.equal(r.status, 143, r.stderr);
    assert.ok(
      r.stderr.includes(
        `stopped by SIGTERM; nothing of the interrupted run ${names[1]} was published (the next invocation runs it again); ${names.length - 1} reflog(s) stay in`,
      ),
      r.stderr,
    );
    const logs = fs.readdirSync(path.join(dir, 'var/state/staging', names[1]!, 'work/log'));
    assert.deepEqual(logs, [], 'no chain stage started');
    const final = await runner(dir);
    assert.equal(final.status, 0, final.stderr);
    assertSameState(snapshot(dir), want, 'then a rerun');
  });

  // SIGTERM to the runner stops its stages at once: analyze-dump does not read on through a big reflog after the
  // runner exited.
  test('SIGTERM stops the stages at once', async () => {
    const dir = freshBig();
    const lines = fs.readFileSync(path.join(dir, 'var/inbox/2011072806.reflog')).reduce((n, c) => n + (c === 10 ? 1 : 0), 0);
    // Signalled as soon as analyze-dump's process appears, long before it can have read 4 MiB.
    const r = await runner(dir, [], { termWhen: () => processRunning((cmd) => cmd.includes('analyze-dump') && cmd.includes(dir)) });
    assert.equal(r.status, 143, r.stderr);
    // runner() waited for the lock, so any stage left running has ended by now; the interrupted attempt's logs stay in staging.
    // (No log at all: the signal came before bash had even redirected analyze-dump's stderr.)
    const logFile = path.join(dir, 'var/state/staging/2011072806/work/log/1.analyze-dump.log');
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
    assert.doesNotMatch(log, new RegExp(`"lines_in":${lines}\\b`), `analyze-dump was stopped, not left to read all ${lines} lines: ${log}`);
    const ud = path.join(dir, 'var/state/staging/2011072806/work/log/5.upload-domains.log');
    assert.ok(!fs.existsSync(ud) || !/new domains committed/.test(fs.readFileSync(ud, 'utf8')), 'upload-domains committed nothing');
  });

  // SIGTERM to the runner while bash starts the chain: no stage outlives the runner, none runs on to the end.
  test('SIGTERM as bash starts the chain', async () => {
    // The runner once SIGTERMed the chain's bash along with the stages it found in /proc:
    // a bash still forking the pipeline died, and a stage forked after the scan was
    // orphaned, ran the whole hour and committed its assignments after the runner had
    // exited 143 (CI, 1 run in many). Signalled in that window, round after round.
    const rounds = Number(process.env.RUNNER_TERM_ROUNDS ?? 12);
    // Four times the usual big reflog: with two test suites on two cores, analyze-dump once
    // read all 4 MiB before the runner's SIGTERM reached it (a pass that looked like a stage
    // running the hour on). Each round is stopped within milliseconds, so the size costs nothing.
    const dir = freshBig(240_000);
    const lock = path.join(dir, 'var/state/lock');
    const logs = path.join(dir, 'var/state/staging/2011072806/work/log');
    for (let round = 0; round < rounds; round++) {
      const delayUs = (round % 6) * 400;
      const r = await new Promise<{ status: number | null; stderr: string; left: number[]; lockFree: boolean }>((resolve) => {
        const child = spawn(RUNNER, [], { cwd: dir, env: testEnv(), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
        let seen: bigint | null = null;
        let sent = false;
        // A tight poll, not a timer: bash forks the six stages within a millisecond or two.
        const poll = () => {
          if (sent || child.exitCode !== null) return;
          if (seen === null && processRunning((cmd) => cmd.startsWith('bash') && cmd.includes(dir))) seen = process.hrtime.bigint();
          if (seen !== null && process.hrtime.bigint() - seen >= BigInt(delayUs * 1000)) {
            sent = true;
            process.kill(child.pid!, 'SIGTERM');
            return;
          }
          setImmediate(poll);
        };
        poll();
        child.on('close', (status) => {
          sent = true;
          // At once, before anything waits: a stage still running holds the lock (fd 3).
          const left = processesWhere((cmd) => cmd.includes(dir));
          const lockFree = spawnSync('flock', ['-n', lock, 'true']).status === 0;
          spawnSync('flock', ['-w', '60', lock, 'true']);
          resolve({ status, stderr, left, lockFree });
        });
      });
      const what = `round ${round}, SIGTERM ${delayUs} us after bash appeared`;
      assert.equal(r.status, 143, `${what}: ${r.stderr}`);
      assert.deepEqual(r.left, [], `${what}: no process of the run outlived the runner`);
      assert.ok(r.lockFree, `${what}: the lock was free when the runner exited`);
      const finished = fs.existsSync(logs) ? fs.readdirSync(logs).filter((f) => /"status":"ok"/.test(fs.readFileSync(path.join(logs, f), 'utf8'))) : [];
      // A stage reaching its end on the cut input of a stopped upstream is fine; one reading the whole reflog is not.
      const ad = path.join(logs, '1.analyze-dump.log');
      assert.ok(
        !(fs.existsSync(ad) && /"status":"ok"/.test(fs.readFileSync(ad, 'utf8'))),
        `${what}: analyze-dump was stopped (finished: ${finished.join(', ')})`,
      );
      const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
      try {
        assert.equal(db.prepare('SELECT COUNT(*) FROM partner_domain').pluck().get(), 0, `${what}: no assignment committed`);
      } finally {
        db.close();
      }
    }
  });
});

describe('while publishing', () => {
  // SIGTERM while a run is being published: that run is committed and reported so, exit 143, the rest stay.
  test('SIGTERM: the run commits, exit 143', async () => {
    const { snap: want } = await ref();
    const names = RUNS.map((f) => f.replace(/\.reflog$/, ''));
    // The signal is raised just before a commit step of the second run; it is handled after the commit.
    for (const step of ['commit', 'queue:1', 'cleanup']) {
      const dir = fresh();
      const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${names[1]}:${step}`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
      const what = `SIGTERM before step ${step} of ${names[1]}`;
      assert.equal(r.status, 143, `${what}: ${r.stderr}`);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      assert.ok(r.stderr.includes(`stopped by SIGTERM; after run ${names[1]} was committed; ${names.length - 2} reflog(s) stay in`), `${what}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /nothing of the interrupted run/, what);
      assert.deepEqual(
        runsJsonl(dir)
          .filter((x) => x.status === 'ok')
          .map((x) => x.run),
        names.slice(0, 2),
        what,
      );
      assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')).sort(), RUNS.slice(2), what);
      const final = await runner(dir);
      assert.equal(final.status, 0, `${what}: ${final.stderr}`);
      assertSameState(snapshot(dir), want, what);
    }
  });

  // A signal while the last run is being published, or a roll forward with nothing after it: seen all the same, exit
  // 128+N.
  test('on the last run, or a roll forward alone', async () => {
    // The handler runs only when the event loop polls, and nothing awaited after the last
    // publish: the signal went unseen, and the invocation exited 0 with "1 run(s) committed".
    const { snap: want } = await ref1();
    const line = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith(`reflog-to-yacobot-queue: ${RUN0}: `)).length;
    const stopped = (r: Done, sig: string, status: number, what: string) => {
      assert.equal(r.status, status, `${what}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`stopped by ${sig}; after run ${RUN0} was committed; 0 reflog(s) stay in`), `${what}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /run\(s\) committed/, what);
      assert.equal(line(r.stderr), 1, `${what}: its summary line, once: ${r.stderr}`);
    };
    for (const [sig, step, status] of [
      ['SIGTERM', 'queue:1', 143],
      ['SIGINT', 'cleanup', 130],
    ] as const) {
      const dir = freshFirstOnly();
      const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:${step}`, REFLOG_RUNNER_FAILSIGNAL: sig } });
      stopped(r, sig, status, `${sig} before step ${step} of the only run`);
      assertSameState(snapshot(dir), want, `${sig} before step ${step}`);
    }
    // Killed before its line was written, the run is rolled forward by the next invocation, which a SIGHUP reaches there.
    const dir = freshFirstOnly();
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:record` } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:reflog`, REFLOG_RUNNER_FAILSIGNAL: 'SIGHUP' } });
    assert.match(r.stderr, /rolling forward/);
    stopped(r, 'SIGHUP', 129, 'SIGHUP before the reflog step of a roll forward');
    assertSameState(snapshot(dir), want, 'SIGHUP in a roll forward');
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status, x.recovered]),
      [[RUN0, 'ok', 'roll-forward']],
    );
    // A run that fails is reported as failed (exit 1), a signal as its failure is recorded or not.
    const failing = freshFirstOnly();
    const f = await runner(failing, ['--max-reject-ratio', '0'], {
      env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:failed:cleanup`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' },
    });
    assert.equal(f.status, 1, f.stderr);
    assert.ok(f.stderr.includes(`run ${RUN0} failed: `), f.stderr);
    assert.doesNotMatch(f.stderr, /stopped by|before any run started/);
  });
});

describe('stages that do not stop', () => {
  // A stage that does not stop on SIGTERM: a second signal SIGKILLs it, the runner exits 143 with no process left,
  // and a rerun finishes the run.
  test('a second signal SIGKILLs a deaf stage', async () => {
    const r = await withStuckStage([], (child) => process.kill(child.pid!, 'SIGINT'));
    assert.equal(r.status, 143, `the runner exited after the second signal, with the first one's status (${r.ms} ms): ${r.stderr}`);
    assert.match(r.stderr, /SIGINT again while the stages stop: killing them \(SIGKILL\)/);
    assert.match(r.stderr, /stopped by SIGTERM/);
    assert.deepEqual(r.left, [], 'no process of the run outlived the runner');
    assert.ok(r.lockFree, 'the lock was free when the runner exited');
    const again = await runner(r.dir);
    assert.equal(again.status, 0, again.stderr);
    assert.ok(fs.existsSync(path.join(r.dir, 'var/state/done/2011072806.reflog')), 'the rerun committed the run');
  });

  // A stage that does not stop on SIGTERM is SIGKILLed --kill-after later; a bad --kill-after is a usage error.
  test('--kill-after SIGKILLs a deaf stage', async () => {
    const r = await withStuckStage(['--kill-after', '1s'], () => {});
    assert.equal(r.status, 143, `the runner exited after --kill-after (${r.ms} ms after it was seen waiting): ${r.stderr}`);
    assert.equal(r.stderr.match(/killing them \(SIGKILL\)/g)?.length, 1, r.stderr);
    assert.match(r.stderr, /the stages did not stop within 1s of SIGTERM: killing them \(SIGKILL\)/);
    assert.deepEqual(r.left, [], 'no process of the run outlived the runner');
    assert.ok(r.lockFree, 'the lock was free when the runner exited');
    for (const bad of ['soon', '2d', '-1s']) {
      const u = runRunner(fresh(), ['--kill-after', bad]);
      assert.equal(u.status, 2, `--kill-after ${bad}: ${u.stderr}`);
      assert.match(u.stderr, /kill-after wants a duration/);
    }
  });

  // A stopped stage and a stopped chain shell (Ctrl-Z, SIGSTOP) still stop on the runner's SIGTERM, at once and
  // cleanly, not --kill-after later.
  test('stopped (SIGSTOP) stages still stop at once', async () => {
    const dir = freshBig();
    const child = spawn(RUNNER, ['--kill-after', '1d'], { cwd: dir, env: testEnv(), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const closed = new Promise<number | null>((resolve) => child.on('close', (status) => resolve(status)));
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const isAnalyzeDump = (cmd: string) => !cmd.startsWith('bash') && cmd.includes('/bin/analyze-dump ') && cmd.includes(dir);
    let ad: number[] = [];
    for (const deadline = Date.now() + 30_000; ad.length === 0 && Date.now() < deadline && child.exitCode === null; ) {
      ad = processesWhere(isAnalyzeDump);
      if (ad.length === 0) await pause(2);
    }
    assert.equal(ad.length, 1, `analyze-dump started: ${stderr}`);
    // The chain's bash: the runner's child (its subshells are bash's children).
    const ppid = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
    const bash = processesWhere((cmd) => cmd.startsWith('bash') && cmd.includes(dir)).filter((pid) => {
      try {
        return ppid(pid) === child.pid;
      } catch {
        return false;
      }
    });
    assert.equal(bash.length, 1, "the chain's bash");
    // Its SIGTERM handler in place first (it is reading its input: the reflog's offset has moved), then both stopped.
    const log = path.join(dir, 'var/state/staging/2011072806/work/log/1.analyze-dump.log');
    const reading = () => {
      try {
        return Number(/^pos:\s*(\d+)/m.exec(fs.readFileSync(`/proc/${ad[0]}/fdinfo/0`, 'utf8'))?.[1] ?? 0) > 0;
      } catch {
        return false;
      }
    };
    for (const deadline = Date.now() + 30_000; !reading() && Date.now() < deadline; ) await pause(1);
    for (const pid of [...ad, ...bash]) process.kill(pid, 'SIGSTOP');
    // SIGSTOP acts when the process is next scheduled: wait until every thread is stopped.
    const stopped = (pid: number) => {
      try {
        return fs.readdirSync(`/proc/${pid}/task`).every((t) => /^\d+ \(.*\) T /s.test(fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8')));
      } catch {
        return false;
      }
    };
    for (const deadline = Date.now() + 30_000; ![...ad, ...bash].every(stopped) && Date.now() < deadline; ) await pause(2);
    assert.ok([...ad, ...bash].every(stopped), 'analyze-dump and bash stopped');
    process.kill(child.pid!, 'SIGTERM');
    const status = await Promise.race([closed, pause(20_000).then(() => null)]);
    if (status === null) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
      await closed;
    }
    assert.equal(status, 143, `the runner exited by itself: ${stderr}`);
    assert.doesNotMatch(stderr, /SIGKILL/);
    assert.match(fs.readFileSync(log, 'utf8'), /"status":"interrupted","signal":"SIGTERM"/, 'analyze-dump acted on its SIGTERM');
    assert.deepEqual(
      processesWhere((cmd) => cmd.includes(dir)),
      [],
      'no process of the run left',
    );
  });
});
