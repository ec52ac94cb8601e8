// The cron runner killed at any instant, then run again: it rolls forward or redoes each run to
// the result of an uninterrupted run.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { ROOT, RUNNER, hasStackTrace, testEnv } from './lib/run.js';
import { assertSameState, newDomains, runsJsonl, snapshot } from './lib/runner-state.js';
import { prng } from '../scripts/prng.js';
import {
  REFLOGS,
  RUNS,
  type Done,
  runner,
  processRunning,
  fresh,
  ref,
  keepOnly,
  RUN0,
  freshFirstOnly,
  ref1,
  freshBig,
  failingSecondHour,
} from './lib/runner.js';

describe('SIGKILL at any instant', () => {
  // SIGKILL of the process group at random instants, then a clean run: same result as uninterrupted.
  test('at random instants, then a clean run', async () => {
    const { snap: want, ms } = await ref();
    const seed = Number(process.env.RUNNER_KILL_SEED ?? Date.now() % 100000);
    const rand = prng(seed); // seeded, so a failure can be reproduced from the seed it prints
    for (let round = 0; round < 2; round++) {
      const dir = fresh();
      const delays: number[] = [];
      for (let k = 0; k < 3; k++) {
        const d = Math.floor(80 + rand() * ms);
        delays.push(d);
        const r = await runner(dir, [], { killAfter: d });
        if (r.status !== null) assert.equal(r.status, 0, `seed ${seed} delays ${delays}: ${r.stderr}`);
      }
      const final = await runner(dir);
      assert.equal(final.status, 0, `seed ${seed} delays ${delays}: ${final.stderr}`);
      assert.ok(!hasStackTrace(final.stderr));
      assertSameState(snapshot(dir), want, `seed ${seed}, kills after ${delays.join(', ')} ms`);
      const ok = runsJsonl(dir).filter((x) => x.status === 'ok');
      assert.deepEqual(
        ok.map((x) => x.run),
        RUNS.map((f) => f.replace(/\.reflog$/, '')),
        `one runs.jsonl line per run (seed ${seed}, delays ${delays})`,
      );
      // A dead attempt's assignments count for the run that redid it.
      assert.deepEqual(newDomains(dir), newDomains((await ref()).dir), `new_domains (seed ${seed}, delays ${delays})`);
    }
  });

  // upload-domains killed at its commit of new domains, just before or just after COMMIT: new_domains counts what
  // was committed, once.
  test('upload-domains killed around its COMMIT', async () => {
    // The first hour alone: the kill is in its run, and what follows it is other tests' business.
    const { snap: want, dir: refDir } = await ref1();
    const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/kill-at-commit.js')).href;
    const first = RUN0;
    const refNew = newDomains(refDir);
    assert.ok((refNew[first] as number) > 0, 'the first hour assigns new domains');
    for (const when of ['before', 'after'] as const) {
      // The whole process group (the crash the random kills above met once): the rerun records the run.
      const dir = freshFirstOnly();
      const what = `group killed ${when} COMMIT`;
      const r = await runner(dir, [], { env: { NODE_OPTIONS: `--import=${preload}`, KILL_AT_COMMIT: when, KILL_WHO: 'group' } });
      assert.equal(r.signal, 'SIGKILL', `${what}: ${r.stderr}`);
      assert.deepEqual(runsJsonl(dir), [], what);
      const final = await runner(dir);
      assert.equal(final.status, 0, `${what}: ${final.stderr}`);
      assertSameState(snapshot(dir), want, what);
      assert.deepEqual(newDomains(dir), refNew, `${what}: new_domains`);
      // upload-domains alone: its run fails, and its failed line counts what it committed.
      const dir2 = fresh();
      const what2 = `upload-domains killed ${when} COMMIT`;
      const r2 = await runner(dir2, [], { env: { NODE_OPTIONS: `--import=${preload}`, KILL_AT_COMMIT: when, KILL_WHO: 'stage' } });
      assert.equal(r2.status, 1, `${what2}: ${r2.stderr}`);
      const [failed] = runsJsonl(dir2);
      assert.equal(failed!.failed_stage, 'upload-domains', what2);
      assert.equal(failed!.new_domains, when === 'after' ? refNew[first] : 0, `${what2}: new_domains`);
    }
  });

  // SIGKILL of the runner alone while analyze-dump reads a big reflog: its stages finish the whole hour, and a rerun
  // ends as an uninterrupted run.
  test('the runner alone, amid a big reflog', async () => {
    // The runner once copied the reflog into the chain's stdin itself: killed alone, it
    // left the chain a cut input, which it processed as the whole hour and whose new
    // domains upload-domains committed, so every later assignment differed.
    const want = freshBig();
    const clean = await runner(want);
    assert.equal(clean.status, 0, clean.stderr);
    const dir = freshBig();
    let killed = false;
    const r = await new Promise<Done>((resolve) => {
      const child = spawn(RUNNER, [], { cwd: dir, env: testEnv(), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const poll = setInterval(() => {
        if (!processRunning((cmd) => cmd.includes('analyze-dump') && cmd.includes(dir))) return;
        clearInterval(poll);
        killed = true;
        process.kill(child.pid!, 'SIGKILL');
      }, 2);
      child.on('close', (status, signal) => {
        clearInterval(poll);
        // Its stages hold the lock until they end.
        spawnSync('flock', ['-w', '60', path.join(dir, 'var/state/lock'), 'true']);
        resolve({ status, signal, stderr, ms: 0 });
      });
    });
    assert.ok(killed && r.signal === 'SIGKILL', `the runner was killed while analyze-dump ran: ${r.status} ${r.signal} ${r.stderr}`);
    const a = fs.readFileSync(path.join(dir, 'var/state/staging/2011072806/work/log/1.analyze-dump.log'), 'utf8');
    const lines = fs.readFileSync(path.join(dir, 'var/inbox/2011072806.reflog')).reduce((n, c) => n + (c === 10 ? 1 : 0), 0);
    assert.match(a, new RegExp(`"lines_in":${lines}\\b`), `the orphaned analyze-dump read all ${lines} lines of the reflog`);
    const final = await runner(dir);
    assert.equal(final.status, 0, final.stderr);
    assertSameState(snapshot(dir), snapshot(want), 'runner SIGKILLed alone, then rerun');
    assert.deepEqual(newDomains(dir), newDomains(want), 'new_domains');
  });

  // Killed just before each commit step, the next run rolls forward or redoes to the same result.
  test('just before each commit step', async () => {
    const { snap: want } = await ref();
    // Each scenario kills run 06, then 07 (after rolling 06 forward or redoing it), then 08, at
    // the given steps; a clean run finishes. Together they cover every step of the commit order.
    const scenarios = [
      ['commit', 'current_log', 'record'],
      ['queue:1', 'settings', 'reflog'],
      ['queue:3', 'rejects', 'cleanup'],
      // Inside writeCommit: the stage logs (what upload-domains assigned) must still be there.
      ['commit:marker', 'queue:2', 'uncommit'],
      ['settings', 'commit', 'memory'],
    ];
    const names = RUNS.map((f) => f.replace(/\.reflog$/, ''));
    const one = async (steps: string[]) => {
      const dir = fresh();
      for (let i = 0; i < names.length; i++) {
        const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${names[i]}:${steps[i]}` } });
        assert.equal(r.signal, 'SIGKILL', `failpoint ${names[i]}:${steps[i]} was reached: ${r.stderr}`);
      }
      const final = await runner(dir);
      assert.equal(final.status, 0, `${steps}: ${final.stderr}`);
      assertSameState(snapshot(dir), want, `killed before ${steps.join(', ')}`);
      assert.deepEqual(newDomains(dir), newDomains((await ref()).dir), `killed before ${steps.join(', ')}: new_domains`);
      for (let i = 0; i < names.length; i++) {
        const recs = runsJsonl(dir).filter((x) => x.run === names[i]);
        assert.equal(recs.length, 1, `${names[i]} killed before ${steps[i]}: one runs.jsonl line`);
        // Killed before COMMIT: redone. Before the record: the roll-forward writes it. After it: the first process did.
        const step = steps[i]!;
        const wantRecovered =
          step === 'commit' || step === 'commit:marker' ? 'rerun' : ['reflog', 'uncommit', 'cleanup'].includes(step) ? undefined : 'roll-forward';
        assert.equal(recs[0]!.recovered, wantRecovered, `${names[i]} killed before ${step}: recovered`);
      }
    };
    // Two at a time: the machine has two cores.
    await Promise.all(scenarios.slice(0, 2).map(one));
    await Promise.all(scenarios.slice(2, 4).map(one));
    await one(scenarios[4]!);
  });
});

describe('roll forward', () => {
  // A run killed after copying its queue files beside their place, and not committed, leaves no copy there: its
  // retry failed, or its reflog was taken out of the inbox.
  test('no copy left beside the place if uncommitted', async () => {
    // The copies (QUEUE/<id>/.RUN.tsv.publish) stayed for good: only a retry that made the
    // same files replaced them, and published them.
    const prepared = (dir: string) => ['1', '2', '3'].map((id) => path.join(dir, 'var/queue', id, `.${RUN0}.tsv.publish`)).filter((f) => fs.existsSync(f));
    for (const then of ['retry fails', 'reflog taken out']) {
      const dir = freshFirstOnly();
      const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:commit` } });
      assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      assert.equal(prepared(dir).length, 3, 'copied beside their place, then killed');
      if (then === 'reflog taken out') fs.renameSync(path.join(dir, 'var/inbox', RUNS[0]!), path.join(dir, 'aside'));
      const r = await runner(dir, then === 'retry fails' ? ['--max-reject-ratio', '0'] : []);
      assert.equal(r.status, then === 'retry fails' ? 1 : 0, r.stderr);
      assert.deepEqual(prepared(dir), [], `${then}: no copy left`);
      assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), [], then);
    }
  });

  // A committed run whose staged files are gone (a crash in an older runner's cleanup, which removed them before
  // COMMIT) rolls forward; later reflogs run.
  test('staged files gone: it rolls forward', async () => {
    const { snap: want } = await ref();
    const names = RUNS.map((f) => f.replace(/\.reflog$/, ''));
    const dir = fresh();
    const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${names[0]}:uncommit` } });
    assert.equal(r.signal, 'SIGKILL', r.stderr);
    const staging = path.join(dir, 'var/state/staging', names[0]!);
    assert.ok(fs.existsSync(path.join(staging, 'COMMIT')));
    fs.rmSync(path.join(staging, 'work'), { recursive: true }); // what the old cleanup did first
    const final = await runner(dir);
    assert.equal(final.status, 0, final.stderr); // was: "cannot copy into place: ENOENT", every time
    assertSameState(snapshot(dir), want, 'staged files gone under COMMIT');
  });

  // A COMMIT marker of an unknown version is refused with a message naming it, and nothing of it is acted on.
  test('a COMMIT of an unknown version is refused', async () => {
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: '2011072806:queue:1' } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    const marker = path.join(dir, 'var/state/staging/2011072806/COMMIT');
    const plan = JSON.parse(fs.readFileSync(marker, 'utf8')) as { version: number };
    assert.equal(plan.version, 1);
    // As a newer runner might write it: this one cannot know what its steps would be.
    fs.writeFileSync(marker, JSON.stringify({ ...plan, version: 2 }));
    const before = snapshot(dir);
    const r = await runner(dir);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    assert.ok(
      r.stderr.includes(
        `${marker}: cannot read: damaged COMMIT marker (unknown version); see "A COMMIT marker the runner cannot read" in docs/operations.md\n`,
      ),
      r.stderr,
    );
    assertSameState(snapshot(dir), before, 'after the refused COMMIT');
    assert.ok(!fs.existsSync(path.join(dir, 'var/queue/1/2011072806.tsv')), 'not published');
    assert.deepEqual(runsJsonl(dir), []);
    // The version was all that was wrong: put back, the run rolls forward.
    fs.writeFileSync(marker, JSON.stringify(plan));
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.recovered]),
      [['2011072806', 'roll-forward']],
    );
    assert.match(again.stderr, /: 2011072806: .* s \(roll-forward of an unfinished commit\)\n/);
  });

  // An invocation killed after a run was over (in the next run's chain): each run's summary line is printed once,
  // that run's by the invocation that finished it.
  test('each summary line is printed once', async () => {
    // The lines were printed at the end of the invocation: killed after a run's COMMIT was
    // removed, nothing printed that run's line, and no roll forward came to print it.
    const [r0, r1] = RUNS.slice(0, 2).map((f) => f.replace(/\.reflog$/, '')) as [string, string];
    const dir = fresh();
    keepOnly(dir, RUNS[0]!, RUNS[1]!);
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${r1}:chain` } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    const next = await runner(dir);
    assert.equal(next.status, 0, next.stderr);
    const clean = fresh();
    keepOnly(clean, RUNS[0]!, RUNS[1]!);
    const whole = await runner(clean);
    assert.equal(whole.status, 0, whole.stderr);
    /** The runs' summary lines in `stderr`, without their seconds (and what follows them). */
    const lines = (stderr: string) =>
      stderr
        .split('\n')
        .filter((l) => /^reflog-to-yacobot-queue: \d{10}: /.test(l))
        .map((l) => l.replace(/; [\d.]+ s( \(.*\))?$/, ''));
    assert.deepEqual(lines(killed.stderr + next.stderr), lines(whole.stderr), `killed:\n${killed.stderr}next:\n${next.stderr}`);
    assert.equal(lines(killed.stderr).length, 1, `${r0} printed by the invocation that finished it: ${killed.stderr}`);
    assert.ok(next.stderr.includes(`: ${r1}: `) && next.stderr.includes('(rerun of an interrupted attempt)'), next.stderr);
    assert.match(next.stderr, /: 1 run\(s\) committed in /);
  });

  // Killed after its reflog left the inbox (just before the cleanup), a run is not published again: queue files the
  // consumer took do not come back.
  test('taken queue files do not come back', async () => {
    // The uncommit step removes COMMIT before the staging area goes, so that start-up drops
    // what is left instead of rolling the run forward (which would publish its queue files again).
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: '2011072806:cleanup' } });
    assert.equal(r.signal, 'SIGKILL', r.stderr);
    assert.ok(fs.existsSync(path.join(dir, 'var/state/staging/2011072806')), 'killed before the cleanup');
    const taken = ['1', '2', '3'].map((id) => path.join(dir, 'var/queue', id, '2011072806.tsv'));
    for (const f of taken) fs.rmSync(f); // the Yacobots took their files
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /nothing to do/);
    assert.doesNotMatch(again.stderr, /rolling forward/);
    for (const f of taken) assert.ok(!fs.existsSync(f), `${f} was not published again`);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [['2011072806', 'ok']],
    );
  });

  // An error that persists after the commit (a directory in the way in done/) fails every invocation without
  // publishing the queue files again, or printing its summary line again; gone, the run completes.
  test('an error that persists after the commit', async () => {
    // Every roll forward renamed the queue files into QUEUE/<id>/ again: a Yacobot that
    // had taken its file got it back at every invocation. And each printed the run's
    // summary line once more, marked roll-forward: one run, counted once per invocation.
    const dir = freshFirstOnly();
    const run = RUN0;
    const summaryLines = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith(`reflog-to-yacobot-queue: ${run}: `)).length;
    const finishing = `reflog-to-yacobot-queue: run ${run}: already recorded and reported by an earlier invocation; finishing its publish steps\n`;
    const obstacle = path.join(dir, 'var/state/done', RUNS[0]!);
    fs.mkdirSync(obstacle, { recursive: true });
    const first = await runner(dir);
    assert.equal(first.status, 1, first.stderr);
    assert.ok(!hasStackTrace(first.stderr), first.stderr);
    assert.ok(first.stderr.includes(`${obstacle}: cannot move ${path.join(dir, 'var/inbox', `.${RUNS[0]!}.moving`)} here: EISDIR`), first.stderr);
    assert.equal(summaryLines(first.stderr), 1, first.stderr);
    assert.ok(!first.stderr.includes(finishing), first.stderr);
    const queues = ['1', '2', '3'].map((id) => path.join(dir, 'var/queue', id, `${run}.tsv`)).filter((f) => fs.existsSync(f));
    assert.ok(queues.length > 0, 'published before the reflog step');
    for (const f of queues) fs.rmSync(f); // the Yacobots take their files
    const second = await runner(dir);
    assert.equal(second.status, 1, second.stderr);
    assert.ok(second.stderr.includes(`${obstacle}: cannot move `), second.stderr);
    assert.match(second.stderr, /rolling forward/);
    assert.equal(summaryLines(second.stderr), 0, second.stderr);
    assert.equal(second.stderr.split(finishing).length, 2, `said once: ${second.stderr}`);
    for (const f of queues) assert.ok(!fs.existsSync(f), `${f} was not published again`);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]!], 'the reflog is still in the inbox, under its name');
    fs.rmdirSync(obstacle);
    const third = await runner(dir);
    assert.equal(third.status, 0, third.stderr);
    assert.equal(summaryLines(third.stderr), 0, third.stderr);
    assert.equal(third.stderr.split(finishing).length, 2, `said once: ${third.stderr}`);
    for (const f of queues) assert.ok(!fs.existsSync(f), `${f} was not published again`);
    assert.ok(fs.readFileSync(obstacle).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), 'the reflog is in done/');
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [[run, 'ok']],
    );
  });

  // A roll forward killed while it copied a queue file again does not leave that copy to be published cut off by the
  // next one.
  test('a cut copy is not published', async () => {
    // The copy again (queue file renamed, staged copy not yet removed when a crash came)
    // went to .RUN.tsv.publish, the name of the complete prepared copy made before COMMIT:
    // killed in the middle, it left a cut copy that the next roll forward renamed into place.
    const dir = freshFirstOnly();
    const run = RUN0;
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${run}:queue:1` } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    const dst = path.join(dir, 'var/queue/1', `${run}.tsv`);
    const prepared = path.join(dir, 'var/queue/1', `.${run}.tsv.publish`);
    const whole = fs.readFileSync(path.join(dir, 'var/state/staging', run, 'work/queue/1', `${run}.tsv`));
    assert.ok(whole.length > 1 && fs.readFileSync(prepared).equals(whole));
    // Killed after the rename and before the staged file's removal; then the roll forward
    // that copies it again is killed half way through its copy.
    fs.renameSync(prepared, dst);
    fs.writeFileSync(prepared, whole.subarray(0, whole.length >> 1));
    const r = await runner(dir);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(fs.readFileSync(dst).equals(whole), 'the whole queue file is published');
    assert.deepEqual(
      fs.readdirSync(path.dirname(dst)).filter((f) => f.startsWith('.')),
      [],
      'no copy left beside it',
    );
  });
});

describe('reruns', () => {
  // Killed in the cleanup of a finished run, then the hour re-sent: a new run, not a rerun of the finished one.
  test('a re-sent hour after the cleanup is a new run', async () => {
    // Its staging area without COMMIT, with run.json, and a reflog of its name in the inbox
    // looked like an interrupted run: the re-sent hour ran under the finished run's run_id,
    // as attempt 2, and counted that run's new domains again.
    const dir = freshFirstOnly();
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:cleanup` } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    assert.ok(fs.existsSync(path.join(dir, 'var/state/staging', RUN0, 'run.json')), 'killed before the cleanup');
    for (const id of fs.readdirSync(path.join(dir, 'var/queue'))) fs.rmSync(path.join(dir, 'var/queue', id, `${RUN0}.tsv`)); // the Yacobots took their files
    fs.copyFileSync(path.join(REFLOGS, RUNS[0]!), path.join(dir, 'var/inbox', RUNS[0]!)); // the hour is sent again
    fs.appendFileSync(path.join(dir, 'var/inbox', RUNS[0]!), '\n'); // with other bytes: the same ones are set aside unrun
    const r = await runner(dir);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /interrupted/);
    const [first, again] = runsJsonl(dir);
    assert.ok(first !== undefined && again !== undefined, 'two lines');
    assert.notEqual(again.run_id, first.run_id, 'a run of its own');
    assert.deepEqual([again.run, again.status, again.attempt, again.recovered, again.new_domains], [RUN0, 'ok', 1, undefined, 0]);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
  });

  // Killed after a failed run's line and before its staging area was removed: the retry is a new run, and
  // new_domains is not counted twice.
  test('new_domains of a failed run counted once', async () => {
    // As failingSecondHour sets it up, hour 2 fails in logsaver after upload-domains committed. The
    // runner is killed just before it removes the failed run's staging area; the retry
    // after the fix used to be attempt 2 of the failed run_id ("rerun") and counted the
    // failed attempt's domains again, already in its failed line.
    const { dir, env } = await failingSecondHour();
    const killed = await runner(dir, [], { env: { ...env, REFLOG_RUNNER_FAILPOINT: '2011072806:failed:cleanup' } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    assert.ok(fs.existsSync(path.join(dir, 'var/state/staging/2011072806/run.json')));
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
    const recs = runsJsonl(dir);
    assert.deepEqual(
      recs.map((x) => [x.run, x.status, x.attempt, x.recovered]),
      [
        ['2011072805', 'ok', 1, undefined],
        ['2011072806', 'failed', 1, undefined],
        ['2011072806', 'ok', 2, undefined],
      ],
    );
    assert.ok((recs[1]!.new_domains as number) > 0, 'the failed attempt assigned domains');
    assert.notEqual(recs[2]!.run_id, recs[1]!.run_id);
    // Every domain in the database was assigned by one of these runs, and counted once.
    const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
    const rows = db.prepare('SELECT count(*) FROM partner_domain').pluck().get();
    db.close();
    assert.equal(
      recs.reduce((n, x) => n + (x.new_domains as number), 0),
      rows,
    );
  });

  // An interrupted run is redone before a reflog with an older name that arrived since: the same result as
  // uninterrupted.
  test('an interrupted run goes before older names', async () => {
    // It used to go in name order: the late 2011072806 ran first, on the current_log
    // 2011072807 would have left, and the two hours' queue files came out otherwise.
    const late = (dir: string) => fs.copyFileSync(path.join(REFLOGS, '2011072806.reflog'), path.join(dir, 'var/inbox/2011072806.reflog'));
    const want = fresh();
    keepOnly(want, '2011072807.reflog');
    assert.equal((await runner(want)).status, 0);
    late(want);
    assert.equal((await runner(want)).status, 0);

    const dir = fresh();
    keepOnly(dir, '2011072807.reflog');
    const started = path.join(dir, 'var/state/staging/2011072807/work/log/1.analyze-dump.log');
    const stopped = await runner(dir, [], { termWhen: () => fs.existsSync(started) });
    assert.equal(stopped.status, 143, stopped.stderr);
    late(dir);
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.recovered]),
      [
        ['2011072807', 'rerun'],
        ['2011072806', undefined],
      ],
    );
    assertSameState(snapshot(dir), snapshot(want), 'interrupted, then a late older reflog');
  });

  // attempts: a run is attempt 1; a rerun after an interruption is attempt 2 of the same run_id, marked rerun; a
  // failed run starts over as attempt 1 of a new run_id.
  test('attempt numbers and run ids', async () => {
    for (const rec of runsJsonl((await ref()).dir)) assert.deepEqual([rec.attempt, rec.recovered], [1, undefined], String(rec.run));
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    const started = path.join(dir, 'var/state/staging/2011072806/work/log/1.analyze-dump.log');
    const stopped = await runner(dir, [], { termWhen: () => fs.existsSync(started) });
    assert.equal(stopped.status, 143, stopped.stderr);
    const runJson = JSON.parse(fs.readFileSync(path.join(dir, 'var/state/staging/2011072806/run.json'), 'utf8'));
    assert.equal(runJson.attempts, 1);
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    const [rec] = runsJsonl(dir);
    assert.deepEqual([rec!.status, rec!.attempt, rec!.recovered, rec!.run_id], ['ok', 2, 'rerun', runJson.run_id]);

    // A failed attempt removes its staging area: the next one is a new run, and its
    // attempt counts the failed ones since the hour's last commit.
    const f = fresh();
    keepOnly(f, '2011072806.reflog');
    // A row naming a Yacobot that does not exist fails upload-domains, inside the chain
    // (the checks before the chain do not look at rows), until it is deleted.
    const ghost = (sql: string) => {
      const db = new Database(path.join(f, 'var/state/partner.db'));
      db.pragma('foreign_keys = OFF');
      db.exec(sql);
      db.close();
    };
    ghost("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('ghost.com', 99, 'x')");
    assert.equal((await runner(f)).status, 1);
    assert.equal((await runner(f)).status, 1);
    ghost("DELETE FROM partner_domain WHERE domain = 'ghost.com'");
    assert.equal((await runner(f)).status, 0);
    const recs = runsJsonl(f);
    assert.deepEqual(
      recs.map((x) => [x.status, x.attempt, x.recovered]),
      [
        ['failed', 1, undefined],
        ['failed', 2, undefined],
        ['ok', 3, undefined],
      ],
    );
    assert.equal(new Set(recs.map((x) => x.run_id)).size, 3);
    // Every line names the master that ran it, a failed one too.
    assert.deepEqual(
      recs.map((x) => x.master),
      [os.hostname(), os.hostname(), os.hostname()],
    );
  });
});
