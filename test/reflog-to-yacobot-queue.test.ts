// The cron runner, run for real in scratch directories: lock, all-or-nothing on a
// failing stage, crash safety (SIGKILL of the process group at random instants and
// at every commit step, then a clean run, compared byte for byte with an
// uninterrupted run), config file, backlog watch; plus its pure helpers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { ROOT, RUNNER, canRunAsNobody, hasStackTrace, lockHolder, partnerDb, runAsNobody, runBin, runRunner, scratch, testEnv } from './lib/run.js';
import { assertSameState, newDomains, runsJsonl, snapshot } from './lib/runner-state.js';
import { UsageError } from '../src/core/errors.js';
import { parseArgs, parseConfig } from '../src/runner/options.js';
import { REFLOG_HEAD_BYTES, assignedInLog, runPaths, pipelineScript, type RunPaths, hourNotBegun, notAnHour, failureMessage, firstHeaderLine, hourEndOf, mostForgetful, mostForgetfulSince, notAReflog, readStageLog, planInbox, repeatedWarnings, replayWarning, resolveNow, type RunRecord } from '../src/runner/plan.js';
import { SPILL_PREFIX } from '../src/core/sorter.js';
import { formatTimestamp } from '../src/core/time.js';
import { HOST_TAG } from '../src/core/temps.js';
import { shellQuote } from '../src/core/errors.js';
import { checkQueueName } from '../src/stages/logsaver.js';
import { publishSteps } from '../src/runner/commit.js';
import { runStages, stageEnv } from '../src/runner/pipeline.js';
import type { RunnerOptions } from '../src/runner/options.js';
import { appendRecordOnce, countLines, tailRecords } from '../src/runner/fsutil.js';
import { Locked, acquireLock } from '../src/runner/lock.js';
import * as os from 'node:os';
import { generateReflog } from '../scripts/gen-reflog.js';
import { prng } from '../scripts/prng.js';

const REFLOGS = path.join(ROOT, 'fixtures', 'reflogs');
const RUNS = fs.readdirSync(REFLOGS).filter((f) => f.endsWith('.reflog')).sort();

interface Done {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  ms: number;
}

/**
 * Runs the runner in `dir` (its own process group); `killAfter` ms: SIGKILL the group
 * then; `termWhen`: SIGTERM (or `termSignal`) the runner alone (as `kill PID` or a
 * supervisor would) as soon as it returns true (polled every 5 ms).
 */
function runner(
  dir: string,
  args: string[] = [],
  opts: { killAfter?: number; termWhen?: () => boolean; termSignal?: NodeJS.Signals; env?: Record<string, string>; started?: (pid: number) => void } = {},
): Promise<Done> {
  const t0 = Date.now();
  const child = spawn(RUNNER, args, { cwd: dir, env: testEnv(opts.env ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  opts.started?.(child.pid!);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let timer: NodeJS.Timeout | undefined;
  if (opts.killAfter !== undefined) {
    timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* finished already */
      }
    }, opts.killAfter);
  }
  if (opts.termWhen !== undefined) {
    const poll = setInterval(() => {
      if (!opts.termWhen!()) return;
      clearInterval(poll);
      try {
        process.kill(child.pid!, opts.termSignal ?? 'SIGTERM');
      } catch {
        /* finished already */
      }
    }, 5);
    child.on('close', () => clearInterval(poll));
  }
  return new Promise((resolve) => {
    child.on('close', (status, signal) => {
      if (timer) clearTimeout(timer);
      // A SIGKILLed group's stages may outlive the runner by a moment; the lock tells when all are gone.
      spawnSync('flock', ['-w', '10', path.join(dir, 'var/state/lock'), 'true']);
      resolve({ status, signal, stderr, ms: Date.now() - t0 });
    });
  });
}

/**
 * Starts the runner in `dir` with a failpoint that stops it (SIGSTOP) just before
 * `step`; resolves once it is stopped there, with the function that resumes it and
 * resolves when it has ended.
 */
async function stoppedBefore(dir: string, step: string): Promise<() => Promise<Done>> {
  return stoppedWith(dir, [], { REFLOG_RUNNER_FAILPOINT: step, REFLOG_RUNNER_FAILSIGNAL: 'SIGSTOP' }, `before ${step}`);
}

/** As stoppedBefore, for a runner with `args` whose `env` makes it stop itself (SIGSTOP) at the instant `where` names. */
async function stoppedWith(dir: string, args: string[], env: Record<string, string>, where: string): Promise<() => Promise<Done>> {
  let pid = 0;
  let ended = false;
  const done = runner(dir, args, { env, started: (p) => (pid = p) });
  void done.then(() => (ended = true));
  const state = () => {
    try {
      return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];
    } catch {
      return undefined;
    }
  };
  const t0 = Date.now();
  while (state() !== 'T') {
    if (ended || Date.now() - t0 > 60_000) {
      process.kill(-pid, 'SIGKILL');
      assert.fail(`the runner did not stop ${where}: ${JSON.stringify(await done)}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return () => {
    process.kill(pid, 'SIGCONT');
    return done;
  };
}

/** The pids of the processes whose command line (arguments joined by spaces) passes `test`. */
function processesWhere(test: (cmd: string) => boolean): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (test(fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' '))) out.push(Number(e));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Whether some process's command line (arguments joined by spaces) passes `test`. */
function processRunning(test: (cmd: string) => boolean): boolean {
  return processesWhere(test).length > 0;
}

/** One scratch root for the whole file (one exit hook), a fresh subdirectory per use. */
let root: string | null = null;
function sub(prefix: string): string {
  root ??= scratch('ms-runner-');
  return fs.mkdtempSync(path.join(root, prefix));
}

/** A scratch dir with the fixture reflogs in var/inbox and a database with three Yacobots. */
let template: string | null = null;
function fresh(): string {
  if (template === null) {
    template = sub('tpl-');
    fs.mkdirSync(path.join(template, 'var/inbox'), { recursive: true });
    fs.mkdirSync(path.join(template, 'var/state'), { recursive: true });
    for (const f of RUNS) fs.copyFileSync(path.join(REFLOGS, f), path.join(template, 'var/inbox', f));
    const db = path.join(template, 'var/state/partner.db');
    partnerDb(template, db, 'init');
    for (const [n, w] of [['alpha', '1'], ['beta', '1'], ['gamma', '2']]) partnerDb(template, db, 'add', n!, '--weight', w!);
  }
  const dir = sub('run-');
  fs.cpSync(template, dir, { recursive: true });
  return dir;
}

/** The uninterrupted run everything is compared with. */
interface Reference {
  dir: string;
  snap: Record<string, string>;
  ms: number;
  stderr: string;
}
/** The uninterrupted run of the directory `make` gives, run once on first use and shared. */
function sharedRun(make: () => string): () => Promise<Reference> {
  let reference: Reference | null = null;
  return async () => {
    if (reference === null) {
      const dir = make();
      const r = await runner(dir);
      assert.equal(r.status, 0, r.stderr);
      reference = { dir, snap: snapshot(dir), ms: r.ms, stderr: r.stderr };
    }
    return reference;
  };
}
const ref = sharedRun(fresh);

/** Leaves only the named reflogs in the inbox of `dir`. */
function keepOnly(dir: string, ...names: string[]): void {
  for (const f of RUNS) if (!names.includes(f)) fs.rmSync(path.join(dir, 'var/inbox', f));
}

/** The run of the first fixture reflog (its name without .reflog). */
const RUN0 = RUNS[0]!.replace(/\.reflog$/, '');

/** A fresh directory with only the first fixture reflog in its inbox. */
function freshFirstOnly(): string {
  const dir = fresh();
  keepOnly(dir, RUNS[0]!);
  return dir;
}

/** A copy of directory `from` in a fresh one (a state to start from, left as it was). */
function copyOf(from: string): string {
  const dir = sub('run-');
  fs.cpSync(from, dir, { recursive: true, verbatimSymlinks: true });
  return dir;
}

/**
 * The uninterrupted run of the first fixture reflog alone (freshFirstOnly): what a test
 * that starts after that hour copies, instead of running it again.
 */
const ref1 = sharedRun(freshFirstOnly);

/** The Yacobots take (remove) their queue files of `run`. */
function takeQueueFiles(dir: string, run: string): void {
  for (const id of ['1', '2', '3']) fs.rmSync(path.join(dir, 'var/queue', id, `${run}.tsv`), { force: true });
}

/** Writes INBOX/NAME.reflog: the leading header line, then one record per (timestamp, url). */
function writeReflog(dir: string, name: string, records: [string, string][]): void {
  const lines = records.map(([ts, url], i) => `1000\t0\t${ts}\t${i}\t${url}\t1\n`);
  fs.writeFileSync(path.join(dir, 'var/inbox', `${name}.reflog`), `reflog-dump v2\n${lines.join('')}`);
}

test('an uninterrupted run publishes every reflog and records it', async () => {
  const { snap } = await ref();
  for (const f of RUNS) {
    const name = f.replace(/\.reflog$/, '');
    assert.ok(snap[`var/state/done/${f}`], `${f} moved to done/`);
    for (const id of ['1', '2', '3']) assert.ok(snap[`var/queue/${id}/${name}.tsv`], `queue file ${id}/${name}.tsv`);
  }
  assert.ok(!Object.keys(snap).some((k) => k.startsWith('var/inbox/') || k.startsWith('var/state/staging/')), 'inbox and staging empty');
  assert.ok(snap['var/state/current_log']!.length > 0);
  assert.equal(snap['var/state/domain_map'], undefined, 'no domain_map: upload-domains asks the database');
  // The queue files are the URL records the run sent, 6 fields each.
  for (const line of snap['var/queue/1/2011072806.tsv']!.trimEnd().split('\n')) assert.equal(line.split('\t').length, 6);
});

test('runs.jsonl, summary, a second invocation with nothing to do', async () => {
  const { dir, stderr } = await ref();
  const r = { stderr };
  assert.ok(!hasStackTrace(r.stderr));
  const recs = runsJsonl(dir);
  assert.deepEqual(recs.map((x) => x.run), RUNS.map((f) => f.replace(/\.reflog$/, '')));
  const first = recs[0]!;
  assert.equal(first.status, 'ok');
  assert.equal(first.now, '20110728070000', 'now of 2011072806.reflog is the end of its hour');
  const ad = (first.stages as Record<string, Record<string, number>>)['analyze-dump']!;
  assert.equal(ad.records_out! + ad.rejected! + ad.skipped!, ad.lines_in);
  const per = first.sent_per_yacobot as Record<string, number>;
  assert.equal(Object.values(per).reduce((a, b) => a + b, 0), first.sent);
  assert.ok((first.new_domains as number) > 0);
  assert.ok(typeof first.seconds === 'number' && first.backlog);
  assert.match(r.stderr, /2011072806: \d+ lines, \d+ records, 2 rejected, 2 skipped; \d+ URLs sent/);
  assert.match(r.stderr, /3 run\(s\) committed/);
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stderr, /nothing to do/);
  assert.equal(runsJsonl(dir).length, 3);
});

test('a second runner on the same state directory exits 75 naming the holder', async () => {
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
  const holder = spawn('flock', [file, 'bash', '-c', `sleep 0.3; printf 'pid=%s host=%s started=now\\n' $$ "$(hostname)" > '${file}'; sleep 5`], { stdio: 'ignore' });
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

test('a lock just taken by a new holder, whose file still names an ended one, is reported as the new holder', async () => {
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

test('a failed run whose runs.jsonl line cannot be written still says why it failed, besides the runs.jsonl error', () => {
  // Only 'runs.jsonl: cannot open: EISDIR' was printed: the stage's message was lost.
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  const h = new Database(path.join(dir, 'var/state/partner.db'));
  h.exec('UPDATE yacobot SET active = 0');
  h.close();
  // A runs.jsonl past the file size limit (a directory there, or a link into a directory
  // that is gone, is refused before any run): its append fails with EFBIG, as a full disk
  // fails it; the stages' files stay far below the limit.
  fs.writeFileSync(path.join(dir, 'var/state/runs.jsonl'), `${JSON.stringify({ pad: 'x'.repeat(1000) })}\n`.repeat(300));
  const r = spawnSync('bash', ['-c', 'ulimit -f 256 && exec "$0" --log-level silent', RUNNER], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^reflog-to-yacobot-queue: run 2011072806 failed: upload-domains: .*no active Yacobot/m);
  assert.match(r.stderr, /^reflog-to-yacobot-queue: \S*runs\.jsonl: cannot append to: EFBIG/m);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
});

test('a failing stage (no active Yacobot) publishes nothing and changes no state', async () => {
  // After the first hour (a copy of its run), no Yacobot is left active for the next ones.
  const dir = copyOf((await ref1()).dir);
  const db = path.join(dir, 'var/state/partner.db');
  for (const f of ['2011072807.reflog', '2011072808.reflog']) fs.copyFileSync(path.join(REFLOGS, f), path.join(dir, 'var/inbox', f));
  const h = new Database(db);
  h.exec('UPDATE yacobot SET active = 0');
  h.close();
  const before = snapshot(dir);
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr));
  assert.match(r.stderr, /upload-domains: .*no active Yacobot/);
  // The failed run and the one after it wait in the inbox; the message counts both.
  assert.ok(
    r.stderr.includes(`reflog-to-yacobot-queue: nothing of it was published; 2 reflog(s) stay in ${path.join(dir, 'var/inbox')} (see ${path.join(dir, 'var/state/runs.jsonl')})\n`),
    r.stderr,
  );
  assert.match(r.stderr, /^reflog-to-yacobot-queue: run 2011072807 failed: upload-domains: /m);
  const after = snapshot(dir);
  delete after['var/state/rejects/failed/2011072807.tsv']; // kept to explain a failure; not state
  delete before['var/state/rejects/failed/2011072807.tsv'];
  assertSameState(after, before, 'after a failed run');
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072807.reflog')) && fs.existsSync(path.join(dir, 'var/inbox/2011072808.reflog')));
  const last = runsJsonl(dir).at(-1)!;
  assert.equal(last.status, 'failed');
  assert.equal(last.failed_stage, 'upload-domains');
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
});

test('a queue side that cannot take every file (a Yacobot\'s queue path is a file) publishes none of the run, and a rerun after the fix ends the same', async () => {
  // Queue files are copied beside their places and fsynced before the COMMIT; once the
  // first Yacobot's file was published before the second one's copy failed.
  const { snap: want } = await ref1();
  const dir = freshFirstOnly();
  fs.mkdirSync(path.join(dir, 'var/queue'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'var/queue/2'), 'in the way\n');
  const before = snapshot(dir);
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.match(r.stderr, /var\/queue\/2: cannot create directory: EEXIST|var\/queue\/2\/2011072806\.tsv: cannot copy into place/);
  const after = snapshot(dir);
  // Kept to explain a failure; and upload-domains' assignments stand (as after any later stage's failure).
  for (const k of ['var/state/rejects/failed/2011072806.tsv', 'db:partner_domain']) {
    delete after[k];
    delete before[k];
  }
  assertSameState(after, before, 'after the failed publish');
  const last = runsJsonl(dir).at(-1)!;
  assert.equal(last.status, 'failed');
  assert.equal(last.failed_stage, 'publish');
  // Nothing was published, so nothing was sent (these once counted the staged files).
  assert.equal(last.sent, 0);
  assert.deepEqual(last.sent_per_yacobot, {});
  fs.rmSync(path.join(dir, 'var/queue/2'));
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assertSameState(snapshot(dir), want, 'rerun after the queue path was fixed');
});

test('SIGKILL of the process group at random instants, then a clean run: same result as uninterrupted', async () => {
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

test('upload-domains killed at its commit of new domains, just before or just after COMMIT: new_domains counts what was committed, once', async () => {
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

test('SIGTERM to the runner alone while a chain runs: it stops its stages, exits 143 publishing nothing of that run, and a rerun finishes the same', async () => {
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
    assert.ok(r.stderr.includes(`stopped by SIGTERM; nothing of the interrupted run ${run} was published (the next invocation runs it again); ${RUNS.length - k} reflog(s) stay in`), `${what}: ${r.stderr}`);
    const done = runsJsonl(dir).filter((x) => x.status === 'ok').map((x) => String(x.run));
    assert.deepEqual(done, RUNS.slice(0, k).map((f) => f.replace(/\.reflog$/, '')), `${what}: the runs before it are recorded`);
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

test('SIGTERM, SIGINT or SIGHUP to the runner while a chain runs: it stops its stages and exits 143, 130 or 129, publishing nothing of that run; a rerun finishes it', async () => {
  const run = RUN0;
  // SIGHUP (the terminal went away) must be handled like the others, not kill the runner
  // and leave its stages running.
  for (const [sig, status] of [['SIGTERM', 143], ['SIGINT', 130], ['SIGHUP', 129]] as const) {
    const dir = freshFirstOnly();
    const started = path.join(dir, 'var/state/staging', run, 'work/log/1.analyze-dump.log');
    const r = await runner(dir, [], { termWhen: () => fs.existsSync(started), termSignal: sig });
    const what = `${sig} during run ${run}: status ${r.status} ${r.signal}: ${r.stderr}`;
    assert.equal(r.signal, null, `${what}: the runner handled it`);
    assert.equal(r.status, status, what);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    assert.ok(r.stderr.includes(`stopped by ${sig}; nothing of the interrupted run ${run} was published (the next invocation runs it again); 1 reflog(s) stay in`), what);
    assert.deepEqual(runsJsonl(dir), [], `${sig}: no run recorded`);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]], `${sig}: the reflog stays in the inbox`);
    assert.ok(!fs.existsSync(path.join(dir, 'var/queue')) || fs.readdirSync(path.join(dir, 'var/queue')).length === 0, `${sig}: no queue file`);
    assert.ok(!fs.existsSync(path.join(dir, 'var/state/current_log')), `${sig}: no current_log`);
    const final = await runner(dir);
    assert.equal(final.status, 0, `${sig}, then a rerun: ${final.stderr}`);
    assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[run, 'ok']], `${sig}, then a rerun`);
  }
});

/** A scratch dir whose inbox holds one generated 60,000-line reflog (more than 4 MiB), 2011072806. */
/** Rewrites run `run`'s COMMIT marker as a runner from before `field` was recorded wrote it (the field must be there). */
function asOlderCommit(dir: string, run: string, field: 'reflogFile' | 'reflogLink'): void {
  const marker = path.join(dir, 'var/state/staging', run, 'COMMIT');
  const plan = JSON.parse(fs.readFileSync(marker, 'utf8')) as Record<string, unknown>;
  assert.ok(plan[field], `the marker records ${field}`);
  delete plan[field];
  fs.writeFileSync(marker, JSON.stringify(plan));
}

const bigReflogs = new Map<number, string>(); // generated once per size (the same seed gives the same bytes)
/** A state whose inbox holds one generated reflog of `lines` lines (60,000: over 4 MiB). */
function freshBig(lines = 60_000): string {
  const dir = fresh();
  keepOnly(dir);
  const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
  let made = bigReflogs.get(lines);
  if (made === undefined) {
    made = path.join(sub('big-'), 'h.reflog');
    const fd = fs.openSync(made, 'w');
    generateReflog(fd, { lines, hour: 1, seed: 3 });
    fs.closeSync(fd);
    bigReflogs.set(lines, made);
  }
  fs.copyFileSync(made, reflog);
  assert.ok(fs.statSync(reflog).size > (lines / 15_000) << 20);
  return dir;
}

test('SIGKILL of the runner alone while analyze-dump reads a big reflog: its stages finish the whole hour, and a rerun ends as an uninterrupted run', async () => {
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

test('SIGTERM while analyze-dump reads a big reflog: exit 143, not a silent 0', async () => {
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
    assert.match(r.stderr, /stopped by SIGTERM; nothing of the interrupted run 2011072806 was published \(the next invocation runs it again\); 1 reflog\(s\) stay in/);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), ['2011072806.reflog']);
    assert.equal(fs.existsSync(path.join(dir, 'var/queue')) && fs.readdirSync(path.join(dir, 'var/queue')).length > 0, false, 'no queue file');
    fs.rmSync(staging, { recursive: true, force: true });
  }
});

test('an inbox on another file system: each reflog is copied into state/done and removed, same result', async (t) => {
  const { snap: want } = await ref();
  const dir = fresh();
  const other = '/dev/shm';
  if (!fs.existsSync(other) || fs.statSync(other).dev === fs.statSync(dir).dev) {
    t.skip(`${other} is not a second file system here`);
    return;
  }
  const inbox = fs.mkdtempSync(path.join(other, 'ms-inbox-'));
  try {
    for (const f of RUNS) fs.copyFileSync(path.join(dir, 'var/inbox', f), path.join(inbox, f));
    keepOnly(dir);
    const r = await runner(dir, ['--inbox', inbox]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(fs.readdirSync(inbox), [], 'moved out, no temporary copy left');
    assertSameState(snapshot(dir), want, `inbox on ${other}`);
  } finally {
    fs.rmSync(inbox, { recursive: true, force: true });
  }
});

test('killed just before each commit step, the next run rolls forward or redoes to the same result', async () => {
  const { snap: want } = await ref();
  // Each scenario kills run 06, then 07 (after rolling 06 forward or redoing it), then 08, at
  // the given steps; a clean run finishes. Together they cover every step of the commit order.
  const scenarios = [
    ['commit', 'current_log', 'record'],
    ['queue:1', 'settings', 'reflog'],
    ['queue:3', 'rejects', 'cleanup'],
    // Inside writeCommit: the stage logs (what upload-domains assigned) must still be there.
    ['commit:marker', 'queue:2', 'uncommit'],
    ['settings', 'commit', 'settings'],
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
      const wantRecovered = step === 'commit' || step === 'commit:marker' ? 'rerun' : ['reflog', 'uncommit', 'cleanup'].includes(step) ? undefined : 'roll-forward';
      assert.equal(recs[0]!.recovered, wantRecovered, `${names[i]} killed before ${step}: recovered`);
    }
  };
  // Two at a time: the machine has two cores.
  await Promise.all(scenarios.slice(0, 2).map(one));
  await Promise.all(scenarios.slice(2, 4).map(one));
  await one(scenarios[4]!);
});

test('a run killed after copying its queue files beside their place, and not committed, leaves no copy there: its retry failed, or its reflog was taken out of the inbox', async () => {
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

test('a committed run whose staged files are gone (a crash in an older runner\'s cleanup, which removed them before COMMIT) rolls forward; later reflogs run', async () => {
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

test('a COMMIT marker of an unknown version is refused with a message naming it, and nothing of it is acted on', async () => {
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
  assert.ok(r.stderr.includes(`${marker}: cannot read: damaged COMMIT marker (unknown version); see "A COMMIT marker the runner cannot read" in docs/operations.md\n`), r.stderr);
  assertSameState(snapshot(dir), before, 'after the refused COMMIT');
  assert.ok(!fs.existsSync(path.join(dir, 'var/queue/1/2011072806.tsv')), 'not published');
  assert.deepEqual(runsJsonl(dir), []);
  // The version was all that was wrong: put back, the run rolls forward.
  fs.writeFileSync(marker, JSON.stringify(plan));
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.recovered]), [['2011072806', 'roll-forward']]);
  assert.match(again.stderr, /: 2011072806: .* s \(roll-forward of an unfinished commit\)\n/);
});

test('an invocation killed after a run was over (in the next run\'s chain): each run\'s summary line is printed once, that run\'s by the invocation that finished it', async () => {
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

test('killed after its reflog left the inbox (just before the cleanup), a run is not published again: queue files the consumer took do not come back', async () => {
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
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [['2011072806', 'ok']]);
});

test('SIGTERM while a run is being published: that run is committed and reported so, exit 143, the rest stay', async () => {
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
    assert.deepEqual(runsJsonl(dir).filter((x) => x.status === 'ok').map((x) => x.run), names.slice(0, 2), what);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')).sort(), RUNS.slice(2), what);
    const final = await runner(dir);
    assert.equal(final.status, 0, `${what}: ${final.stderr}`);
    assertSameState(snapshot(dir), want, what);
  }
});

test('a signal while the last run is being published, or a roll forward with nothing after it: seen all the same, exit 128+N', async () => {
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
  for (const [sig, step, status] of [['SIGTERM', 'queue:1', 143], ['SIGINT', 'cleanup', 130]] as const) {
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
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status, x.recovered]), [[RUN0, 'ok', 'roll-forward']]);
  // A run that fails is reported as failed (exit 1), a signal as its failure is recorded or not.
  const failing = freshFirstOnly();
  const f = await runner(failing, ['--max-reject-ratio', '0'], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:failed:cleanup`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
  assert.equal(f.status, 1, f.stderr);
  assert.ok(f.stderr.includes(`run ${RUN0} failed: `), f.stderr);
  assert.doesNotMatch(f.stderr, /stopped by|before any run started/);
});

test('killed in the cleanup of a finished run, then the hour re-sent: a new run, not a rerun of the finished one', async () => {
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

test('a SIGTERM that comes just as the chain would start stops the run before the chain starts', async () => {
  // It once went unseen until the chain had run the whole hour.
  const { snap: want } = await ref();
  const names = RUNS.map((f) => f.replace(/\.reflog$/, ''));
  const dir = fresh();
  const r = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${names[1]}:chain`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
  assert.equal(r.status, 143, r.stderr);
  assert.ok(r.stderr.includes(`stopped by SIGTERM; nothing of the interrupted run ${names[1]} was published (the next invocation runs it again); ${names.length - 1} reflog(s) stay in`), r.stderr);
  const logs = fs.readdirSync(path.join(dir, 'var/state/staging', names[1]!, 'work/log'));
  assert.deepEqual(logs, [], 'no chain stage started');
  const final = await runner(dir);
  assert.equal(final.status, 0, final.stderr);
  assertSameState(snapshot(dir), want, 'then a rerun');
});

test('a reflog whose last line has no newline is processed with --allow-unterminated, with a warning on stderr and in runs.jsonl', async () => {
  const dir = freshFirstOnly();
  const f = path.join(dir, 'var/inbox', RUNS[0]!);
  const text = fs.readFileSync(f);
  assert.equal(text[text.length - 1], 10);
  fs.writeFileSync(f, text.subarray(0, text.length - 1));
  const r = await runner(dir, ['--allow-unterminated']);
  assert.equal(r.status, 0, r.stderr);
  const run = RUN0;
  assert.ok(r.stderr.includes(`warning: ${run}: the reflog's last line has no newline`), r.stderr);
  const [rec] = runsJsonl(dir);
  assert.equal((rec!.stages as Record<string, Record<string, unknown>>)['analyze-dump']!.last_line_unterminated, true);
  // The same reflog with its newline (the run of it alone): no warning.
  assert.doesNotMatch((await ref1()).stderr, /no newline/);
});

test("a stage's warning reaches the runner's stderr (an inactive Yacobot that still owns domains), not only its log, which the cleanup removes", async () => {
  // After the first hour, Yacobot 2 is made inactive by hand, its domains left with it
  // (partner-db disable would move them): upload-domains routes them there all the same, and warns.
  const dir = copyOf((await ref1()).dir);
  const db = path.join(dir, 'var/state/partner.db');
  fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(dir, 'var/inbox/2011072807.reflog'));
  const h = new Database(db);
  h.exec('UPDATE yacobot SET active = 0 WHERE id = 2');
  h.close();
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  const [, rec] = runsJsonl(dir);
  const inactive = (rec!.stages as Record<string, Record<string, unknown>>)['upload-domains']!.domains_of_inactive;
  assert.ok(typeof inactive === 'number' && inactive > 0, `domains_of_inactive ${inactive}`);
  assert.ok(
    r.stderr.includes(
      `reflog-to-yacobot-queue: warning: 2011072807: upload-domains: ${inactive} domain(s) belong to inactive Yacobot(s) 2 and were routed to them; ` +
        `to move them to active ones: partner-db --db ${shellQuote(db)} disable 2\n`,
    ),
    r.stderr,
  );
  // An hour with neither: no warning.
  assert.doesNotMatch((await ref1()).stderr, /warning/);
});

test('config file: flags win, relative paths, unknown keys name the line', async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  fs.writeFileSync(
    path.join(dir, 'runner.conf'),
    '# hourly runner\ninbox = var/inbox\nstate = var/state\nqueue-dir = var/elsewhere\nbacklog-warn = 50\n',
  );
  const r = await runner(dir, ['--config', 'runner.conf', '--queue-dir', 'var/queue']);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(fs.existsSync(path.join(dir, 'var/queue/1/2011072806.tsv')) && !fs.existsSync(path.join(dir, 'var/elsewhere')));
  assert.match(r.stderr, /warning: Yacobot \d+ has \d+ URLs in \d+ queue files not taken away \(more than 50\)/);
  const last = runsJsonl(dir).at(-1)!;
  assert.ok(Array.isArray(last.backlog_warn) && (last.backlog_warn as string[]).length > 0);

  fs.writeFileSync(path.join(dir, 'bad.conf'), 'inbox = var/inbox\n\n# fine\nqueue_dir = x\n');
  const bad = runRunner(dir, ['--config', 'bad.conf']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /bad\.conf:4: unknown key 'queue_dir'/);
  const help = runRunner(dir, ['--help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /--backlog-warn N/);
  const usage = runRunner(dir, ['--now', '2011']);
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /now wants a real time/);
  // analyze-dump's --memory is checked up front as analyze-dump would (it failed the run).
  for (const m of ['512K', '99999999G']) {
    const r = runRunner(dir, ['--memory', m]);
    assert.equal(r.status, 2, `--memory ${m}: ${r.stderr}`);
    assert.match(r.stderr, /memory (wants a size of at least 1M|99999999G is more than this machine's memory)/);
  }
  // A wrong --inbox is a config error (2), found before anything is made under --state.
  for (const inbox of ['no/such/inbox', 'runner.conf']) {
    const r = runRunner(dir, ['--inbox', inbox, '--state', 'new-state']);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--inbox \S+: is not an existing directory \(check --inbox, or create it\)\nTry '/);
    assert.ok(!fs.existsSync(path.join(dir, 'new-state')), 'no state directory made');
  }
});

test("analyze-dump's messages in a run name the reflog, not '-' (the runner hands it over on stdin)", async () => {
  const dir = fresh();
  keepOnly(dir);
  writeReflog(dir, '2011072806', [['20110728063000', 'http://good.example/'], ['20110728063001', 'ftp://bad.example/']]);
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
  const want = `analyze-dump: ${reflog}: rejected 1 of 2 records (50.00%), more than --max-reject-ratio 0.01; no records written`;
  assert.ok(r.stderr.includes(`run 2011072806 failed: ${want}\n`), r.stderr);
  assert.equal(runsJsonl(dir)[0]!.error, want);
});

test('an inbox whose path holds a TAB or a newline runs (analyze-dump gets the reflog\'s path as --input-name)', async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  // A legal directory name; analyze-dump once refused it in --input-name, failing every run.
  const inbox = path.join(dir, 'var/in\tbox\n');
  fs.renameSync(path.join(dir, 'var/inbox'), inbox);
  const r = await runner(dir, ['--inbox', inbox]);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(fs.existsSync(path.join(dir, 'var/state/done/2011072806.reflog')));
  assert.deepEqual(fs.readdirSync(inbox), []);
});

test('a run failed on the reject ratio says where its rejected lines are and which flag lets it through', async () => {
  const dir = fresh();
  keepOnly(dir);
  writeReflog(dir, '2011072806', [['20110728063000', 'http://good.example/'], ['20110728063001', 'ftp://bad.example/']]);
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  const rejects = path.join(dir, 'var/state/rejects/failed/2011072806.tsv');
  assert.ok(
    r.stderr.includes(`reflog-to-yacobot-queue: the rejected lines are in ${rejects}; if the reflog is to go through anyway, run again with a higher --max-reject-ratio\n`),
    r.stderr,
  );
  assert.match(fs.readFileSync(rejects, 'utf8'), /^3\tunsupported scheme: ftp\t/);
});

test('a run failed on a partner database another process held says the run is not lost, and goes through once it lets go', async () => {
  const dir = freshFirstOnly();
  const db = path.join(dir, 'var/state/partner.db');
  const holder = await lockHolder(dir, db, 0);
  let r: Done;
  try {
    r = await runner(dir, [], { env: { MASTER_SERVER_BUSY_TIMEOUT_MS: '300' } });
  } finally {
    holder.kill();
    await holder.done;
  }
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.match(r.stderr, new RegExp(`run ${RUN0} failed: upload-domains: .*SQLITE_BUSY.*\\(another process held the database longer than 300 ms\\)\n`));
  assert.ok(
    r.stderr.endsWith(`reflog-to-yacobot-queue: the run is not lost: once the other process has let go of ${db}, run again (or let the next invocation do it)\n`),
    r.stderr,
  );
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.deepEqual(runsJsonl(dir).map((x) => x.status), ['failed', 'ok']);
});

/** A replay as docs/operations.md's "Replay a reflog" says: RUN's queue files taken, its reflog moved back from done/ into the inbox. */
function replayOf(dir: string, run: string): void {
  takeQueueFiles(dir, run);
  fs.renameSync(path.join(dir, 'var/state/done', `${run}.reflog`), path.join(dir, 'var/inbox', `${run}.reflog`));
}

test("a failed replay of a committed hour leaves that run's rejects file alone: its own go to STATE/rejects/failed/, which a later commit of the name removes", async () => {
  const dir = freshFirstOnly();
  const first = await runner(dir);
  assert.equal(first.status, 0, first.stderr);
  const kept = path.join(dir, 'var/state/rejects', `${RUN0}.tsv`);
  const failedKept = path.join(dir, 'var/state/rejects/failed', `${RUN0}.tsv`);
  const committed = fs.readFileSync(kept);
  const [line] = runsJsonl(dir);
  assert.equal(line!.rejects_file, kept);
  const rejected = (line!.stages as Record<string, { rejected: number }>)['analyze-dump']!.rejected;
  assert.ok(rejected > 0, 'the first fixture hour has rejects');
  const untouched = (what: string) => assert.deepEqual(fs.readFileSync(kept), committed, `${what}: the committed run's rejects are untouched`);
  replayOf(dir, RUN0);
  // Over a lowered --max-reject-ratio: the failed replay's rejects are kept, apart.
  const overRatio = async (what: string) => {
    const r = await runner(dir, ['--max-reject-ratio', '0']);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stderr.includes(`reflog-to-yacobot-queue: the rejected lines are in ${failedKept}; if the reflog is to go through anyway`), r.stderr);
    const last = runsJsonl(dir).at(-1)!;
    assert.deepEqual([last.status, last.rejects_file], ['failed', failedKept], what);
    assert.equal(fs.readFileSync(failedKept, 'utf8').split('\n').filter(Boolean).length, rejected, what);
    untouched(what);
  };
  await overRatio('a replay over the reject ratio');
  // A failed attempt that rejected nothing (a page saved in the reflog's place) removes the failed attempt's rejects only.
  const inboxFile = path.join(dir, 'var/inbox', RUNS[0]!);
  const reflog = fs.readFileSync(inboxFile);
  fs.writeFileSync(inboxFile, '<html>\n<body>\n');
  const notReflog = await runner(dir);
  assert.equal(notReflog.status, 1, notReflog.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'reflog');
  assert.equal(runsJsonl(dir).at(-1)!.rejects_file, undefined);
  assert.ok(!fs.existsSync(failedKept), 'a failed attempt that rejected nothing leaves no failed rejects file');
  untouched('a replay that is not a reflog');
  assert.deepEqual(runsJsonl(dir)[0], line, "the committed run's line is as it was");
  fs.writeFileSync(inboxFile, reflog);
  await overRatio('the replay over the reject ratio again');
  // The replay goes through, killed before its rejects step and rolled forward: the
  // failed attempt's rejects go, and RUN.tsv holds the replay's (the same reflog's: the same lines).
  const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:rejects` } });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  assert.ok(fs.existsSync(failedKept), 'not removed before the rejects step');
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  const last = runsJsonl(dir).at(-1)!;
  assert.deepEqual([last.status, last.recovered, last.rejects_file], ['ok', 'roll-forward', kept]);
  assert.ok(!fs.existsSync(failedKept), "the commit removes the failed attempt's rejects");
  untouched('the committed replay');
});

/** The runner's warning lines in `stderr`. */
function warningLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('reflog-to-yacobot-queue: warning: '));
}

/** The runner's warning for a replay of 2011072806 (now 07:00) after 2011072808 (now 09:00), which ran with --keep `keep`. */
function replayWarningLine(keep: string, forgotten: string): string {
  return (
    `reflog-to-yacobot-queue: warning: 2011072806: its now (20110728070000) is 2h older than that of run 2011072808 (20110728090000), which ran with --keep ${keep}: ` +
    `current_log has forgotten the URLs last seen up to ${forgotten}, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)\n`
  );
}

test('a replay whose now is --keep or more older than a committed run\'s warns that the URLs current_log forgot are sent again; one within --keep does not', async () => {
  // Hour 06 sees a.example/x at 06:30; hour 08 (now 09:00) drops it from current_log
  // unless --keep is more than 2.5h; then hour 06 (now 07:00) is replayed.
  const cases: { args: string[]; want: string | null; sent: number }[] = [
    { args: [], want: replayWarningLine('1h', '20110728080000'), sent: 1 }, // filter-url's default keep
    { args: ['--keep', '2h'], want: replayWarningLine('2h', '20110728070000'), sent: 1 }, // exactly keep older: its whole hour is forgotten
    { args: ['--keep', '3h'], want: null, sent: 0 }, // within keep: held back, rightly no warning
  ];
  for (const c of cases) {
    const what = c.args.join(' ') || 'default keep';
    const dir = fresh();
    keepOnly(dir);
    writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
    writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
    const first = await runner(dir, c.args);
    assert.equal(first.status, 0, `${what}: ${first.stderr}`);
    assert.doesNotMatch(first.stderr, /warning/, `${what}: hours in order`);
    replayOf(dir, '2011072806');
    if (c.want !== null) {
      // A failed attempt warns too (the warning comes before the run), and its failed
      // line, now the last of runs.jsonl, does not hide the committed run 08.
      fs.appendFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), '1000\t0\t20110728063001\t9\tftp://bad.example/\t1\n');
      const failed = await runner(dir, c.args);
      assert.equal(failed.status, 1, `${what}: ${failed.stderr}`);
      assert.ok(failed.stderr.includes(c.want), `${what}, failed attempt: ${failed.stderr}`);
      writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
      assert.equal(runsJsonl(dir).at(-1)!.status, 'failed');
    }
    const r = await runner(dir, c.args);
    assert.equal(r.status, 0, `${what}: ${r.stderr}`);
    const warnings = warningLines(r.stderr);
    assert.deepEqual(warnings, c.want === null ? [] : [c.want.trimEnd()], `${what}: ${r.stderr}`);
    // And the warning is true: the replay sends a.example/x again exactly when it says so.
    const last = runsJsonl(dir).at(-1)!;
    assert.deepEqual([last.run, last.status, last.sent], ['2011072806', 'ok', c.sent], what);
    if (c.want !== null) {
      const logged = r.stderr.split('\n').filter((l) => l.startsWith('{') && l.includes('"newest_run":"2011072808"'));
      assert.equal(logged.length, 1, `${what}: in the JSON log too: ${r.stderr}`);
    }
  }
});

test('a replay replayed again is not warned about (the first recorded its URLs again), until a newer run has forgotten them', async () => {
  const dir = fresh();
  keepOnly(dir);
  writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
  writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
  assert.equal((await runner(dir)).status, 0);
  const warnings = (r: Done) => warningLines(r.stderr);
  replayOf(dir, '2011072806');
  const first = await runner(dir);
  assert.equal(first.status, 0, first.stderr);
  assert.deepEqual(warnings(first), [replayWarningLine('1h', '20110728080000').trimEnd()]);
  assert.equal(runsJsonl(dir).at(-1)!.sent, 1, 'a.example/x, forgotten by hour 08, sent again');
  // Replayed again: the first replay put a.example/x back in current_log, and no run
  // since has dropped it. It is held back, as no warning says (it used to say it was sent).
  replayOf(dir, '2011072806');
  const second = await runner(dir);
  assert.equal(second.status, 0, second.stderr);
  assert.deepEqual(warnings(second), [], second.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.sent, 0);
  // A newer hour drops it again: the next replay is warned about, naming that hour.
  writeReflog(dir, '2011072809', [['20110728093000', 'http://c.example/z']]);
  assert.equal((await runner(dir)).status, 0);
  replayOf(dir, '2011072806');
  const third = await runner(dir);
  assert.equal(third.status, 0, third.stderr);
  assert.deepEqual(warnings(third), [
    'reflog-to-yacobot-queue: warning: 2011072806: its now (20110728070000) is 3h older than that of run 2011072809 (20110728100000), which ran with --keep 1h: ' +
      'current_log has forgotten the URLs last seen up to 20110728090000, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)',
  ]);
  assert.equal(runsJsonl(dir).at(-1)!.sent, 1);
});

test('a late reflog more than --keep older than a run committed earlier in the same invocation (an interrupted run redone first) warns as a replay does; exactly --keep older, it does not', async () => {
  const dir = fresh();
  keepOnly(dir);
  writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
  const stopped = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: '2011072808:chain', REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
  assert.equal(stopped.status, 143, stopped.stderr);
  // Hours 06 and 07 come late; 08 is redone first, then they run on what 08 left. Hour 06
  // lost what 08 forgot of hour 07; hour 07, exactly --keep (1h) older, lost only its own
  // hour, which no run had recorded: no warning.
  writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
  writeReflog(dir, '2011072807', [['20110728073000', 'http://c.example/z']]);
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(runsJsonl(dir).map((x) => x.run), ['2011072808', '2011072806', '2011072807']);
  assert.deepEqual(warningLines(r.stderr), [replayWarningLine('1h', '20110728080000').trimEnd()], r.stderr);
});

test('pure helpers of the replay warning: the newest committed now in the tail of runs.jsonl, and the warning from --keep older on', () => {
  const f = path.join(sub('tail-'), 'runs.jsonl');
  const line = (run: string, now: string, status: string) => JSON.stringify({ run, now, status }) + '\n';
  const lines = [
    line('2011072806', '20110728070000', 'ok'),
    line('2011072809', '20110728100000', 'ok'),
    'not json\n',
    line('2011072807', '20110728080000', 'ok'),
    line('2011072810', '20110728110000', 'failed'),
    line('x', '20119999999999', 'ok'),
  ];
  fs.writeFileSync(f, lines.join('') + '{"run":"2011072812","now":"20110728130000","status":"ok"'); // a torn last line
  assert.deepEqual(mostForgetful(tailRecords(f), 0), { run: '2011072809', now: '20110728100000' }, 'not a failed run, nor an unreal now, nor a torn line');
  // A window that starts inside line 2 leaves that line out, and reads the rest.
  const size = fs.statSync(f).size;
  const inLine2 = size - Buffer.byteLength(lines.slice(1).join('')) - Buffer.byteLength('{"run":"2011072812","now":"20110728130000","status":"ok"') + 5;
  assert.deepEqual(tailRecords(f, size - inLine2).map((r) => (r as { run: string }).run), ['2011072807', '2011072810', 'x']);
  assert.deepEqual(tailRecords(f + '.missing'), []);
  // The last of equal nows, and a newer one given wins over the records.
  assert.deepEqual(mostForgetful([{ run: 'a', now: '20110728070000', status: 'ok' }, { run: 'b', now: '20110728070000', status: 'ok' }], 0), { run: 'b', now: '20110728070000' });
  assert.deepEqual(mostForgetful([{ run: 'a', now: '20110728070000', status: 'ok' }], 0, { run: 'z', now: '20110728090000' }), { run: 'z', now: '20110728090000' });
  // Per committed name, the newest of the committed lines after its last one.
  assert.deepEqual(
    [...mostForgetfulSince(tailRecords(f), 0)].sort(),
    [
      ['2011072806', { run: '2011072809', now: '20110728100000' }],
      ['2011072807', null], // x's now is not a real time
      ['2011072809', { run: '2011072807', now: '20110728080000' }],
      ['x', null],
    ],
  );
  const again = [line('a', '20110728070000', 'ok'), line('b', '20110728090000', 'ok'), line('c', '20110728090000', 'ok'), line('a', '20110728070000', 'ok'), line('d', '20110728080000', 'ok')];
  assert.deepEqual(Object.fromEntries(mostForgetfulSince(again.map((l) => JSON.parse(l)), 0)), {
    a: { run: 'd', now: '20110728080000' },
    b: { run: 'c', now: '20110728090000' },
    c: { run: 'd', now: '20110728080000' },
    d: null,
  });
  assert.deepEqual(mostForgetfulSince(again.slice(0, 3).map((l) => JSON.parse(l)), 0).get('a'), { run: 'c', now: '20110728090000' }, 'the last of equal nows');
  const h = 3_600_000;
  const newest = { run: '2011072821', now: '20110728220000' };
  for (const replayed of [true, false]) {
    assert.equal(
      replayWarning('2011072806', '20110728070000', newest, 10 * h, replayed),
      '2011072806: its now (20110728070000) is 15h older than that of run 2011072821 (20110728220000), and --keep is 10h: ' +
        'current_log has forgotten the URLs last seen up to 20110728120000, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)',
    );
    assert.equal(replayWarning('2011072812', '20110728130000', newest, 10 * h, replayed), null, '9h older, under --keep 10h');
    assert.equal(replayWarning('2011072823', '20110729000000', newest, 10 * h, replayed), null, 'newer');
    assert.equal(replayWarning('2011072821', '20110728220000', newest, 0, replayed), null, 'the same now, even under --keep 0');
    assert.equal(replayWarning('2011072806', '20110728070000', null, h, replayed), null, 'no committed run');
    assert.match(replayWarning('r', '20110728070000', { run: 'n', now: '20110729093045' }, 90 * 60_000, replayed)!, /is 1d2h30m45s older .* --keep is 1h30m:/);
  }
  // Exactly --keep older: a replay's own hour, which its first run recorded, is all forgotten; a
  // reflog that comes late (never run) loses nothing by it that it would have had on time.
  assert.match(replayWarning('2011072811', '20110728120000', newest, 10 * h, true)!, /is 10h older .* --keep is 10h: .* up to 20110728120000,/);
  assert.equal(replayWarning('2011072811', '20110728120000', newest, 10 * h, false), null);

  // The --keep a run recorded (keep_ms) is the one that made current_log forget, whatever this invocation's.
  const k = (run: string, now: string, keep: number | undefined) => ({ run, now, status: 'ok', ...(keep !== undefined && { keep_ms: keep }) });
  // 20:00 under 1h forgot up to 19:00; 22:00 under 10h, up to 12:00 only.
  const changed = [k('2011072819', '20110728200000', h), k('2011072821', '20110728220000', 10 * h)];
  assert.deepEqual(mostForgetful(changed, 10 * h), { run: '2011072819', now: '20110728200000', keepMs: h });
  assert.deepEqual(mostForgetful([k('a', '20110728200000', undefined), k('b', '20110728220000', 10 * h)], h), { run: 'a', now: '20110728200000' }, 'a line without keep_ms: this invocation\'s');
  assert.deepEqual(mostForgetful([k('a', '20110728200000', undefined), k('b', '20110728220000', 10 * h)], 30 * h), { run: 'b', now: '20110728220000', keepMs: 10 * h });
  assert.deepEqual(mostForgetful([k('a', '20110728200000', -1)], h), { run: 'a', now: '20110728200000' }, 'an unreal keep_ms is no keep_ms');
  assert.deepEqual(Object.fromEntries(mostForgetfulSince([k('x', '20110728070000', h), ...changed], 10 * h)), {
    x: { run: '2011072819', now: '20110728200000', keepMs: h },
    '2011072819': { run: '2011072821', now: '20110728220000', keepMs: 10 * h },
    '2011072821': null,
  });
  const recorded = { run: '2011072821', now: '20110728220000', keepMs: 10 * h };
  assert.equal(
    replayWarning('2011072806', '20110728070000', recorded, h, true),
    '2011072806: its now (20110728070000) is 15h older than that of run 2011072821 (20110728220000), which ran with --keep 10h: ' +
      'current_log has forgotten the URLs last seen up to 20110728120000, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)',
  );
  assert.equal(replayWarning('2011072812', '20110728130000', recorded, h, true), null, '9h older than a run under --keep 10h, whatever this invocation\'s keep');

});

test('a run by hand without the cron\'s --keep is refused (exit 2), accepted with --accept-settings-change, and a replay is judged by the --keep of the run that forgot', async () => {
  const dir = fresh();
  keepOnly(dir);
  writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
  writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
  const cron = await runner(dir, ['--keep', '10h']);
  assert.equal(cron.status, 0, cron.stderr);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.keep_ms, x.resend_after_ms]), [[36_000_000, 3_600_000], [36_000_000, 3_600_000]]);
  // Replayed by hand without --keep: hour 08 kept a.example/x (10h), so no replay warning
  // (it was one under this invocation's 1h), and it is held back; the setting is warned about.
  replayOf(dir, '2011072806');
  const refused = await runner(dir);
  assert.equal(refused.status, 2, refused.stderr);
  assert.match(refused.stderr, /--keep 1h here, 10h stored.*--accept-settings-change/, refused.stderr);
  const byHand = await runner(dir, ['--accept-settings-change']);
  assert.equal(byHand.status, 0, byHand.stderr);
  assert.deepEqual(
    warningLines(byHand.stderr),
    [
      'reflog-to-yacobot-queue: warning: settings change accepted (--accept-settings-change): --keep 1h, --resend-after 1h replace --keep 10h, --resend-after 1h once a run commits',
    ],
    byHand.stderr,
  );
  assert.equal(runsJsonl(dir).at(-1)!.sent, 0);
  // The same settings as the last committed run (the replay's 1h): nothing said.
  writeReflog(dir, '2011072809', [['20110728093000', 'http://c.example/z']]);
  const next = await runner(dir, ['--keep', '1h']);
  assert.equal(next.status, 0, next.stderr);
  assert.doesNotMatch(next.stderr, /warning/);
});

test('a file that is not a reflog (an HTML error page saved as the hour) fails its run, publishing nothing; emptied, it commits as an empty hour', async () => {
  // Its lines have no TAB: analyze-dump skips them as headers (the SPEC), and the run
  // committed as an hour without traffic, moving the file to done/: the hour was lost unsaid.
  const dir = copyOf((await ref1()).dir);
  const inbox = path.join(dir, 'var/inbox');
  const file = path.join(inbox, '2011072902.reflog');
  fs.writeFileSync(file, 'this is not a reflog\n<html>404</html>\n');
  // An hour after it waits for it, as after any failed run.
  writeReflog(dir, '2011072903', [['20110729023000', 'http://after.example/']]);
  const before = snapshot(dir);
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const message =
    `${file}: not a reflog: 2 lines, none with a TAB (the first: 'this is not a reflog'); ` +
    `put the hour's reflog in its place, or, if it really is an empty hour, empty the file`;
  assert.ok(r.stderr.includes(`reflog-to-yacobot-queue: run 2011072902 failed: ${message}\n`), r.stderr);
  assert.ok(r.stderr.includes(`reflog-to-yacobot-queue: nothing of it was published; 2 reflog(s) stay in ${inbox} (see `), r.stderr);
  assertSameState(snapshot(dir), before, 'after the run of a file that is not a reflog');
  const last = runsJsonl(dir).at(-1)!;
  assert.deepEqual([last.run, last.status, last.failed_stage, last.error, last.sent], ['2011072902', 'failed', 'reflog', message, 0]);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);

  // Its first line shown clipped and on one line, after empty lines; a cut last line is said in the message, not as a warning of a run that committed.
  fs.writeFileSync(file, `\n\r\n\x1b${'x'.repeat(100_000)}\r\n<html>404</html>`);
  const before2 = snapshot(dir);
  const cut = await runner(dir, ['--log-level', 'silent']);
  assert.equal(cut.status, 1, cut.stderr);
  assert.ok(
    cut.stderr.includes(
      `run 2011072902 failed: ${file}: not a reflog: 4 lines, none with a TAB (the first: '\\x1b${'x'.repeat(59)}...'), ` +
        `the last one without a newline (was it still being written?); put the hour's reflog in its place`,
    ),
    cut.stderr,
  );
  assert.doesNotMatch(cut.stderr, /warning: /);
  for (const line of cut.stderr.trimEnd().split('\n')) assert.match(line, /^reflog-to-yacobot-queue: /, cut.stderr);
  assertSameState(snapshot(dir), before2, 'after the second run of a file that is not a reflog');

  // As the message says: emptied, it is an hour without traffic, and the hour after it runs.
  fs.writeFileSync(file, '');
  const ok = await runner(dir);
  assert.equal(ok.status, 0, ok.stderr);
  assert.deepEqual(fs.readdirSync(inbox), []);
  assert.deepEqual(runsJsonl(dir).slice(-2).map((x) => [x.run, x.status]), [['2011072902', 'ok'], ['2011072903', 'ok']]);
});

test('not a reflog, re-sent for an hour committed before: the advice is to remove it, not to empty it (which would replace the reflog in done/)', async () => {
  const dir = copyOf((await ref1()).dir);
  const name = RUNS[0]!.replace(/\.reflog$/, '');
  const archived = path.join(dir, 'var/state/done', RUNS[0]!);
  const kept = fs.readFileSync(archived);
  const file = path.join(dir, 'var/inbox', RUNS[0]!);
  fs.writeFileSync(file, '<html>\n<body>502 Bad Gateway</body>\n</html>\n');
  const before = snapshot(dir);
  const r = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(
    r.stderr.includes(
      `run ${name} failed: ${file}: not a reflog: 3 lines, none with a TAB (the first: '<html>'); ` +
        `run ${name} was committed before, and its reflog is in ${archived}: remove this file (to replay the hour, move that one here)\n`,
    ),
    r.stderr,
  );
  assertSameState(snapshot(dir), before, 'after the re-sent page');
  assert.deepEqual(fs.readFileSync(archived), kept);
});

test('a re-sent hour committed again keeps the reflog its earlier run archived in done/ (RUN.reflog.~N~); a replay copied out of done/ makes no second copy', async () => {
  const dir = copyOf((await ref1()).dir);
  const name = RUNS[0]!.replace(/\.reflog$/, '');
  const done = path.join(dir, 'var/state/done');
  const archived = path.join(done, RUNS[0]!);
  const first = fs.readFileSync(archived);
  const inbox = path.join(dir, 'var/inbox');
  const resend = (text: string) => fs.writeFileSync(path.join(inbox, RUNS[0]!), text);
  const warning = (n: number) =>
    `reflog-to-yacobot-queue: warning: ${name}: ${archived}, the reflog an earlier run of this name read, is kept as ${RUNS[0]!}.~${n}~ (this run's takes its name)\n`;

  // An empty file re-sent for the hour: it commits as an hour without traffic, and the hour's real reflog stays.
  resend('');
  takeQueueFiles(dir, name);
  const r1 = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r1.status, 0, r1.stderr);
  assert.ok(r1.stderr.includes(warning(1)), r1.stderr);
  assert.equal(fs.readFileSync(archived, 'utf8'), '');
  assert.deepEqual(fs.readFileSync(`${archived}.~1~`), first);

  // Again, with a record: the next free number.
  resend('reflog-dump v2\n1000\t0\t20110728063000\t1\thttp://resent.example/\t1\n');
  const r2 = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r2.status, 0, r2.stderr);
  assert.ok(r2.stderr.includes(warning(2)), r2.stderr);
  assert.equal(fs.readFileSync(`${archived}.~2~`, 'utf8'), '');
  assert.deepEqual(fs.readFileSync(`${archived}.~1~`), first);

  // With ~1~ removed, the next is still one more than the highest: ~3~, not ~1~.
  fs.renameSync(`${archived}.~1~`, path.join(dir, 'first.reflog'));
  takeQueueFiles(dir, name);
  resend('reflog-dump v2\n');
  const r4 = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r4.status, 0, r4.stderr);
  assert.ok(r4.stderr.includes(warning(3)), r4.stderr);
  assert.equal(fs.readFileSync(`${archived}.~3~`, 'utf8'), 'reflog-dump v2\n1000\t0\t20110728063000\t1\thttp://resent.example/\t1\n');
  fs.renameSync(path.join(dir, 'first.reflog'), `${archived}.~1~`);

  // Copied out of done/ (cp, not mv): the same bytes, a re-sent hour, set aside unrun; no numbered copy.
  const third = fs.readFileSync(archived);
  takeQueueFiles(dir, name);
  fs.copyFileSync(archived, path.join(inbox, RUNS[0]!));
  const r3 = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r3.status, 0, r3.stderr);
  assert.deepEqual(warningLines(r3.stderr).map((l) => / a re-sent hour, set aside as /.test(l)), [true], r3.stderr);
  assert.deepEqual(fs.readdirSync(done).filter((f) => f.startsWith(name)).sort(), [RUNS[0]!, `${RUNS[0]!}.resent.~1~`, `${RUNS[0]!}.~1~`, `${RUNS[0]!}.~2~`, `${RUNS[0]!}.~3~`]);
  assert.deepEqual(fs.readFileSync(archived), third);
  assert.deepEqual(fs.readdirSync(inbox), []);
});

test('a FIFO at done/RUN.reflog is kept as RUN.reflog.~1~, not opened: the commit of a re-sent hour does not hang', async () => {
  // Compared byte for byte, it was opened for reading: open(2) waited for a writer for
  // ever, deaf to SIGTERM, and every roll forward after a kill did the same.
  const dir = copyOf((await ref1()).dir);
  const done = path.join(dir, 'var/state/done', RUNS[0]!);
  takeQueueFiles(dir, RUN0);
  fs.renameSync(done, path.join(dir, 'var/inbox', RUNS[0]!));
  assert.equal(spawnSync('mkfifo', [done]).status, 0);
  const r = await runner(dir, ['--log-level', 'silent'], { killAfter: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`warning: ${RUN0}: ${done}, the reflog an earlier run of this name read, is kept as ${RUNS[0]!}.~1~ (this run's takes its name)\n`), r.stderr);
  assert.ok(fs.lstatSync(`${done}.~1~`).isFIFO());
  assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))));
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
});

test('after a failed run, the count of reflogs that stay in the inbox says the skipped ones too', async () => {
  const dir = fresh();
  keepOnly(dir);
  const inbox = path.join(dir, 'var/inbox');
  fs.writeFileSync(path.join(inbox, '2011072902.reflog'), '<html>\n404\n');
  writeReflog(dir, '2011072903', [['20110729023000', 'http://after.example/']]);
  writeReflog(dir, '2107072806', [['21070728063000', 'http://typo.example/']]); // an hour not begun: skipped
  const r = await runner(dir, ['--log-level', 'silent']);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(r.stderr.includes(`nothing of it was published; 2 reflog(s) stay in ${inbox}, and the 1 skipped (see `), r.stderr);
  assert.equal(fs.readdirSync(inbox).length, 3);
});

test('after a signal, the count of reflogs that stay in the inbox does not count a skipped hour not begun twice', async () => {
  // The inbox was read again and an hour not begun counted among the runs, then again as skipped.
  const dir = freshFirstOnly();
  const inbox = path.join(dir, 'var/inbox');
  writeReflog(dir, '2107072806', [['21070728063000', 'http://typo.example/']]); // an hour not begun: skipped
  const r = await runner(dir, ['--log-level', 'silent'], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:chain`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
  assert.equal(r.status, 143, r.stderr);
  assert.ok(r.stderr.includes(`the next invocation runs it again); 1 reflog(s) stay in ${inbox}, and the 1 skipped\n`), r.stderr);
  assert.equal(fs.readdirSync(inbox).length, 2);
});

test('an empty reflog, one of a single header line (with empty lines or not), and several reflogs concatenated still commit', async () => {
  const dir = fresh();
  keepOnly(dir);
  const inbox = path.join(dir, 'var/inbox');
  const files: Record<string, string> = {
    '2011072901': '',
    '2011072902': 'reflog-dump v2 hour 2\n',
    '2011072903': '\nreflog-dump v2 hour 3\r\n\n\n',
    // Two reflogs concatenated: two header lines, and records.
    '2011072904': 'reflog-dump v2\n1000\t0\t20110729043000\t1\thttp://a.example/\t1\nreflog-dump v2\n1000\t0\t20110729043001\t2\thttp://b.example/\t1\n',
  };
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(inbox, `${name}.reflog`), text);
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(inbox), []);
  const runs = runsJsonl(dir);
  assert.deepEqual(runs.map((x) => [x.run, x.status, x.sent]), [['2011072901', 'ok', 0], ['2011072902', 'ok', 0], ['2011072903', 'ok', 0], ['2011072904', 'ok', 2]]);
  assert.deepEqual(runs.map((x) => (x.stages as Record<string, Record<string, unknown>>)['analyze-dump']!.skipped_header), [0, 1, 1, 2]);
});

test('not a reflog: the rule (no reflog line, more than one header line, or one without its LF) and the first line it quotes', () => {
  const ad = (records_out: number, rejected: number, skipped_header: number, more: Record<string, unknown> = {}) => ({
    lines_in: records_out + rejected + skipped_header + 1,
    records_out,
    rejected,
    skipped_header,
    skipped_empty: 1,
    ...more,
  });
  const f = 'in/h.reflog';
  assert.equal(notAReflog(ad(0, 0, 0), f, null), null, 'empty lines only');
  assert.equal(notAReflog(ad(0, 0, 1), f, 'x'), null, 'one header: an hour without traffic');
  // One line without its LF: a page that has none, or a reflog caught with only its header.
  assert.equal(
    notAReflog({ lines_in: 1, records_out: 0, rejected: 0, skipped_header: 1, skipped_empty: 0, last_line_unterminated: true }, f, '<html><body>404'),
    "in/h.reflog: not a reflog: 1 line, without a TAB (the first: '<html><body>404'), the last one without a newline (was it still being written?); put the hour's reflog in its place, or, if it really is an empty hour, empty the file",
  );
  assert.equal(notAReflog(ad(1, 0, 5), f, 'x'), null, 'a record');
  assert.equal(notAReflog(ad(0, 1, 5), f, 'x'), null, 'a reject (the reject ratio is analyze-dump\'s)');
  assert.equal(notAReflog(undefined, f, 'x'), null, 'no analyze-dump summary');
  assert.equal(notAReflog({ records_out: null, rejected: 0, skipped_header: 3 }, f, 'x'), null, 'no counts');
  assert.equal(
    notAReflog(ad(0, 0, 2), f, '<html>'),
    "in/h.reflog: not a reflog: 3 lines, none with a TAB (the first: '<html>'); put the hour's reflog in its place, or, if it really is an empty hour, empty the file",
  );
  assert.equal(
    notAReflog(ad(0, 0, 3, { last_line_unterminated: true }), f, null),
    "in/h.reflog: not a reflog: 4 lines, none with a TAB, the last one without a newline (was it still being written?); put the hour's reflog in its place, or, if it really is an empty hour, empty the file",
  );

  const b = (s: string) => Buffer.from(s, 'latin1');
  assert.equal(firstHeaderLine(b('\n\r\nhead\r\nnext\n'), false), 'head');
  assert.equal(firstHeaderLine(b('\n\r\n'), false), null);
  assert.equal(firstHeaderLine(b(''), false), null);
  assert.equal(firstHeaderLine(b('a\x1bb\r\rc'), false), 'a\x1bb\r\rc', 'control characters are for visibleName, where the message is written');
  assert.equal(firstHeaderLine(b('x'.repeat(61)), false), `${'x'.repeat(60)}...`);
  // The line goes on past what was read: shown as cut, however short the part read.
  const head = b(`${'\n'.repeat(REFLOG_HEAD_BYTES - 3)}abc`);
  assert.equal(head.length, REFLOG_HEAD_BYTES);
  assert.equal(firstHeaderLine(head, true), 'abc...');
  assert.equal(firstHeaderLine(head, false), 'abc');
});

test("the runner's --max-reject-ratio, --memory, --keep and --resend-after reach the stages (each changes the result it should)", async () => {
  // Each case runs the same inbox with the flag and without it, and looks at what the flag governs.
  const cases: {
    flag: string[];
    inbox: (dir: string) => void;
    look: (dir: string, r: Done) => unknown;
    want: [unknown, unknown];
  }[] = [
    {
      // Half of the records rejected: the default 0.01 fails the run, 1 lets it commit.
      flag: ['--max-reject-ratio', '1'],
      inbox: (dir) => writeReflog(dir, '2011072806', [['20110728063000', 'http://good.example/'], ['20110728063001', 'ftp://bad.example/']]),
      look: (dir, r) => `exit ${r.status}, ${runsJsonl(dir).map((x) => x.status).join(' ')}`,
      want: ['exit 0, ok', 'exit 1, failed'],
    },
    {
      // 10,000 lines (about 0.7 MiB) do not fit in analyze-dump's sort budget of 1 MiB: it spills sorted runs.
      flag: ['--memory', '1M'],
      inbox: (dir) => {
        const fd = fs.openSync(path.join(dir, 'var/inbox/2011072806.reflog'), 'w');
        generateReflog(fd, { lines: 10_000, hour: 1, seed: 3 });
        fs.closeSync(fd);
      },
      look: (dir) => {
        const runs = (runsJsonl(dir)[0]!.stages as Record<string, Record<string, unknown>>)['analyze-dump']!.sort_runs;
        return typeof runs === 'number' && runs >= 1 ? 'spilled' : `sort_runs ${runs}`;
      },
      want: ['spilled', 'sort_runs 0'],
    },
    {
      // A URL last seen 2.5 h before the "now" of run 08 (09:00): the default keep (1h) drops it from current_log, 10h keeps it.
      flag: ['--keep', '10h'],
      inbox: (dir) => {
        writeReflog(dir, '2011072806', [['20110728063000', 'http://kept.example/a']]);
        writeReflog(dir, '2011072808', [['20110728083000', 'http://other.example/b']]);
      },
      look: (dir) => fs.readFileSync(path.join(dir, 'var/state/current_log'), 'utf8').includes('\thttp://kept.example/a\n'),
      want: [true, false],
    },
    {
      // The same URL again 30 min later: not sent again under the default resend-after (1h), sent under 10m.
      flag: ['--resend-after', '10m'],
      inbox: (dir) => {
        writeReflog(dir, '2011072806', [['20110728063000', 'http://again.example/a']]);
        writeReflog(dir, '2011072807', [['20110728070000', 'http://again.example/a']]);
      },
      look: (dir) => runsJsonl(dir).map((x) => `${x.run} sent ${x.sent}`).join(', '),
      want: ['2011072806 sent 1, 2011072807 sent 1', '2011072806 sent 1, 2011072807 sent 0'],
    },
  ];
  for (const c of cases) {
    const got = await Promise.all(
      [c.flag, []].map(async (args) => {
        const dir = fresh();
        keepOnly(dir);
        c.inbox(dir);
        return c.look(dir, await runner(dir, args));
      }),
    );
    assert.deepEqual(got, c.want, `${c.flag.join(' ')}: [with it, without it]`);
  }
});

test('a reflog whose run name is longer than 200 bytes is skipped with a warning, and the rest of the inbox runs', async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  // Counted in UTF-8 bytes: 'é' is two.
  const ok200 = `2011072807${'é'.repeat(95)}`;
  const long201 = `${ok200}x`;
  const long240 = `2011072808${'x'.repeat(230)}`;
  assert.deepEqual([ok200, long201, long240].map((n) => Buffer.byteLength(n)), [200, 201, 240]);
  fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(dir, 'var/inbox', `${ok200}.reflog`));
  for (const n of [long201, long240]) fs.copyFileSync(path.join(REFLOGS, '2011072808.reflog'), path.join(dir, 'var/inbox', `${n}.reflog`));
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  for (const n of [long201, long240]) {
    const file = path.join(dir, 'var/inbox', `${n}.reflog`);
    assert.ok(r.stderr.includes(`warning: skipping ${file}: run name '${n}' is longer than 200 bytes\n`), r.stderr);
  }
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [['2011072806', 'ok'], [ok200, 'ok']]);
  assert.ok(fs.existsSync(path.join(dir, 'var/queue/1', `${ok200}.tsv`)), 'the 200-byte name ran');
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')).sort(), [`${long201}.reflog`, `${long240}.reflog`], 'the skipped ones stay');
});

test('a reflog whose name holds a newline is skipped with a one-line warning, the newline shown as \\n', () => {
  // The warning printed the name as it is: its second half read as a message of its own.
  const dir = fresh();
  keepOnly(dir);
  fs.copyFileSync(path.join(REFLOGS, '2011072806.reflog'), path.join(dir, 'var/inbox', '2011072806\nx.reflog'));
  const r = runRunner(dir, ['--log-level', 'silent']);
  assert.equal(r.status, 0, r.stderr);
  const file = path.join(dir, 'var/inbox', '2011072806\\nx.reflog');
  assert.ok(r.stderr.includes(`warning: skipping ${file}: run name '2011072806\\nx' contains a space, a slash or a control character\n`), r.stderr);
  assert.deepEqual(r.stderr.split('\n').filter((l) => !l.startsWith(`${path.basename(RUNNER)}: `)), [''], r.stderr);
});

test('backlog: counted from the *.tsv queue files of Yacobot directories only, and a warning only above --backlog-warn, not at it', async () => {
  const dir = fresh();
  keepOnly(dir);
  // One domain: both runs send their one URL to Yacobot 1.
  writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/1']]);
  writeReflog(dir, '2011072807', [['20110728073000', 'http://a.example/2']]);
  const q = path.join(dir, 'var/queue');
  fs.mkdirSync(path.join(q, '1'), { recursive: true });
  fs.writeFileSync(path.join(q, '1/2011072705.tsv'), 'u\n'.repeat(2)); // 2 URLs not taken away
  // Not queue files: a file being written (dot-file), another extension, a directory that is no Yacobot id.
  const noise = ['1/.2011072704.tsv', '1/.2011072704.tsv.publish', '1/notes.txt', 'tmp/2011072703.tsv', '01/2011072703.tsv', '0/2011072703.tsv'];
  for (const f of noise) {
    fs.mkdirSync(path.dirname(path.join(q, f)), { recursive: true });
    fs.writeFileSync(path.join(q, f), 'u\n'.repeat(50));
  }
  const r = await runner(dir, ['--backlog-warn', '3']);
  assert.equal(r.status, 0, r.stderr);
  const [a, b] = runsJsonl(dir);
  // After run 06: 3 URLs in 2 files, exactly the limit: no warning.
  assert.deepEqual(a!.backlog, { 1: { files: 2, urls: 3 } });
  assert.equal(a!.backlog_warn, undefined);
  // After run 07: 4 URLs, one more than the limit.
  assert.deepEqual(b!.backlog, { 1: { files: 3, urls: 4 } });
  assert.deepEqual(b!.backlog_warn, ['1']);
  assert.deepEqual(
    r.stderr.split('\n').filter((l) => l.includes('warning: Yacobot')),
    ['reflog-to-yacobot-queue: warning: Yacobot 1 has 4 URLs in 3 queue files not taken away (more than 3)'],
  );
});

test('pure helpers: config parsing, option precedence, now, inbox order', () => {
  // What a dead attempt's upload-domains assigned: the last line that says, a torn line ignored.
  const committing = '{"level":30,"msg":"committing new domains","committing":7,"witness":"a.com","added_at":"20110728070000"}';
  const committed = '{"level":30,"msg":"new domains committed","domains_new":9,"assigned_by_us":7}';
  const done = (assigned: number) => ({ assigned, pending: null });
  assert.deepEqual(assignedInLog(''), done(0));
  assert.deepEqual(assignedInLog(`{"level":30,"msg":"start"}\n${committing}\n${committed}\n{"level":30,"assigned_by_us":`), done(7));
  assert.deepEqual(assignedInLog(`${committed}\n{"summary":true,"assigned_by_us":8}\n`), done(8));
  assert.deepEqual(assignedInLog('upload-domains: -:3: bad record\n'), done(0));
  // Died between the line before COMMIT and the one after: the database must tell.
  assert.deepEqual(assignedInLog(`${committing}\n{"level":30,"assign`), { assigned: 0, pending: { rows: 7, witness: 'a.com', added_at: '20110728070000' } });
  // COMMIT failed: the summary says nothing was assigned.
  assert.deepEqual(assignedInLog(`${committing}\n{"summary":true,"status":"failed","assigned_by_us":0}\n`), done(0));
  assert.throws(() => parseConfig('a = 1\n', 'f'), (e: unknown) => e instanceof UsageError && /f:1: unknown key 'a'/.test(e.message));
  assert.throws(() => parseConfig('\ninbox\n', 'f'), /f:2: want "key = value"/);
  assert.deepEqual([...parseConfig('# c\n inbox = "/x y" \r\nnow=20110728070000\n', 'f')], [
    ['inbox', { value: '/x y', line: 2 }],
    ['now', { value: '20110728070000', line: 3 }],
  ]);
  const o = parseArgs(['--state', 's', '--now=20110728070000'], '/w');
  assert.ok(typeof o === 'object');
  assert.equal(o.state, '/w/s');
  assert.equal(o.db, '/w/s/partner.db');
  assert.equal(o.inbox, '/w/var/inbox');
  assert.equal(o.backlogWarn, 1_000_000);
  assert.throws(() => parseArgs(['--frobnicate', '1'], '/w'), /unknown option '--frobnicate'/);
  assert.equal(parseArgs(['-h'], '/w'), 'help');
  // SPEC rule 2 (once per resend-after) needs keep >= resend-after.
  assert.throws(() => parseArgs(['--resend-after', '2h'], '/w'), /keep \(1h\) is shorter than resend-after \(2h\)/);
  assert.throws(() => parseArgs(['--keep', '30m'], '/w'), /keep \(30m\) is shorter than resend-after \(1h\)/);
  assert.ok(typeof parseArgs(['--keep', '10h', '--resend-after', '2h'], '/w') === 'object');

  const tz = process.env.TZ;
  process.env.TZ = 'UTC';
  try {
    assert.equal(hourEndOf('2011072823'), '20110729000000');
    assert.equal(hourEndOf('2011023112'), null);
    assert.equal(hourEndOf('batch-7'), null);
    // Its end, 100000101000000, failed every run of that reflog in filter-url (--now wants a real time).
    assert.equal(hourEndOf('9999123123'), null);
    assert.equal(hourEndOf('9999123122'), '99991231230000');
    assert.deepEqual(resolveNow('2011072806', '20200101000000', new Date()), { now: '20200101000000', source: 'flag' });
    assert.deepEqual(resolveNow('2011072806.part2', null, new Date()), { now: '20110728070000', source: 'name' });
    assert.equal(resolveNow('x', null, new Date(Date.UTC(2012, 0, 2, 3, 4, 5))).now, '20120102030405');
  } finally {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  }
  // '0\ufffd' is how Node reads a name with a byte that is not UTF-8 (0xff).
  const plan = planInbox(['b.reflog', '.a.reflog', 'a.reflog', 'notes.txt', 'a b.reflog', '2011072806.reflog', '0\ufffd.reflog']);
  assert.deepEqual(plan.runs, ['2011072806', 'a', 'b']);
  assert.deepEqual(plan.skipped.map((x) => x.why), ["run name 'a b' contains a space, a slash or a control character", "run name '0\ufffd' is not valid UTF-8 (rename the file; ls -b shows its bytes as escapes)"]);
  // Bytewise is UTF-8 byte order, not JavaScript's UTF-16 order: U+FF5E (EF BD 9E) comes before
  // U+1F600 (F0 9F 98 80), whose first UTF-16 unit (D83D) sorts before FF5E. Nor a locale's: 'B' before 'a'.
  assert.deepEqual(planInbox(['a\u{1F600}.reflog', 'a\uff5e.reflog', 'a.reflog', 'B.reflog']).runs, ['B', 'a', 'a\uff5e', 'a\u{1F600}']);
  assert.equal(shellQuote("it's"), `'it'\\''s'`);
  // What logsaver refuses as a queue name (hasControl) is no run name either: the run would fail at every invocation.
  const odd = planInbox(['a\u0085.reflog', 'b\u2028.reflog', 'c\u202e.reflog', 'd\u00e9.reflog', 'e\u00a0f.reflog', 'g\u3000h.reflog']);
  assert.deepEqual(odd.runs, ['d\u00e9']);
  const why = (shown: string) => `run name '${shown}' contains a space, a slash or a control character`;
  // A no-break or ideographic space reads as a space: refused as one.
  assert.deepEqual(odd.skipped.map((x) => x.why), [why('a\\u0085'), why('b\\u2028'), why('c\\u202e'), why('e\u00a0f'), why('g\u3000h')]);
  for (const n of ['a\u0085', 'b\u2028', 'c\u202e']) assert.equal(checkQueueName(n), 'contains a control character');
  // The commit order docs/design.md promises.
  const steps = publishSteps({
    version: 1,
    run: 'r',
    staging: '/s',
    state: '/st',
    reflog: '/i/r.reflog',
    queueDir: '/q',
    backlogWarn: 1,
    queue: [
      { yacobot: '1', urls: 1 },
      { yacobot: '3', urls: 2 },
    ],
    record: {} as RunRecord,
  }).map((st) => st.name);
  assert.deepEqual(steps, ['queue:1', 'queue:3', 'current_log', 'settings', 'rejects', 'record', 'reflog', 'uncommit', 'cleanup']);
});

test('runs.jsonl append: a torn last line is cut, a retried record is not doubled', () => {
  const dir = sub('jsonl-');
  const f = path.join(dir, 'runs.jsonl');
  fs.writeFileSync(f, '{"run_id":"a"}\n{"run_id":"b","par');
  assert.equal(appendRecordOnce(f, { run_id: 'b' }), true);
  assert.equal(appendRecordOnce(f, { run_id: 'b' }), false);
  // A failed attempt's line, then the next attempt's: both stay (the run_id is the run's).
  assert.equal(appendRecordOnce(f, { run_id: 'b', attempt: 2 }), true);
  assert.equal(appendRecordOnce(f, { run_id: 'b', attempt: 2 }), false);
  assert.equal(fs.readFileSync(f, 'utf8'), '{"run_id":"a"}\n{"run_id":"b"}\n{"run_id":"b","attempt":2}\n');
});

test('runs.jsonl append on a nearly full disk: an error naming the file, and no torn line left (a short write is not taken for the whole line)', () => {
  // The kernel takes what fits and reports ENOSPC (here EFBIG: a file size limit) only on
  // the next write. One writeSync used to leave a torn line and report success; the next
  // append cut it off: the runner exited 0 with every record of a full state disk lost.
  const dir = sub('jsonl-full-');
  const f = path.join(dir, 'runs.jsonl');
  const before = `${JSON.stringify({ run_id: 'a', pad: 'x'.repeat(2900) })}\n`;
  fs.writeFileSync(f, before);
  const fsutil = pathToFileURL(path.join(ROOT, 'dist/src/runner/fsutil.js')).href;
  const script =
    `const { appendRecordOnce } = await import(${JSON.stringify(fsutil)});\n` +
    `try { process.stdout.write('returned ' + appendRecordOnce(${JSON.stringify(f)}, { run_id: 'b', pad: 'y'.repeat(2000) })); }\n` +
    `catch (e) { process.stdout.write('threw ' + e.message); }\n`;
  // 4 KiB file size limit: the 2 KiB line fits only in part.
  const r = spawnSync('bash', ['-c', 'ulimit -f 4 && exec node --input-type=module -e "$0"', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^threw .*cannot append to: EFBIG/);
  assert.equal(fs.readFileSync(f, 'utf8'), before, 'the partial line was cut off again');
});

test('npm start (the demo) works, and a second start says there was nothing new', () => {
  const dir = sub('demo-');
  const demo = path.join(ROOT, 'dist', 'scripts', 'demo.js');
  const first = spawnSync(process.execPath, [demo], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 60_000 });
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /var\/demo\/queue\/1\/2011072806\.tsv +\d+ URLs/);
  assert.match(first.stderr, /3 run\(s\) committed/);
  const second = spawnSync(process.execPath, [demo], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 60_000 });
  assert.equal(second.status, 0, second.stderr);
  assert.match(second.stdout, /Nothing new/);
  assert.match(second.stderr, /nothing to do/);
});

test("the stages' environment holds glibc's mmap and trim thresholds, unless the operator set them", () => {
  const env = stageEnv({ PATH: '/bin', TZ: 'UTC' });
  assert.equal(env.MALLOC_MMAP_THRESHOLD_, '131072');
  assert.equal(env.MALLOC_TRIM_THRESHOLD_, '8388608');
  assert.equal(env.PATH, '/bin');
  assert.equal(env.TZ, 'UTC');
  const set = stageEnv({ MALLOC_MMAP_THRESHOLD_: '65536', MALLOC_TRIM_THRESHOLD_: '1048576' });
  assert.equal(set.MALLOC_MMAP_THRESHOLD_, '65536');
  assert.equal(set.MALLOC_TRIM_THRESHOLD_, '1048576');
});

let secondHourTemplate: string | null = null;
/**
 * A state dir after hour 1 of a generated pair, with hour 2 in the inbox, and the
 * environment in which hour 2 fails in its last stage: logsaver cannot rename its queue
 * files into place (EIO), after upload-domains committed its new domains and ended.
 * (A failing join-current no longer does: its cut output makes upload-domains fail
 * before its commit.)
 */
async function failingSecondHour(): Promise<{ dir: string; env: Record<string, string> }> {
  // Hour 1 runs once per file; each test gets a copy of what it left.
  if (secondHourTemplate === null) {
    const dir = fresh();
    keepOnly(dir);
    for (const hour of [1, 2]) {
      const fd = fs.openSync(path.join(dir, `var/inbox/201107280${4 + hour}.reflog`), 'w');
      generateReflog(fd, { lines: 20_000, hour, seed: 5 });
      fs.closeSync(fd);
    }
    fs.renameSync(path.join(dir, 'var/inbox/2011072806.reflog'), path.join(dir, 'hour2'));
    assert.equal((await runner(dir)).status, 0);
    fs.renameSync(path.join(dir, 'hour2'), path.join(dir, 'var/inbox/2011072806.reflog'));
    secondHourTemplate = dir;
  }
  const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/fail-publish.js')).href;
  return { dir: copyOf(secondHourTemplate), env: { NODE_OPTIONS: `--import=${preload}`, FAIL_PUBLISH: '1' } };
}

test('a failed run records the domains its upload-domains committed all the same (they stay assigned)', async () => {
  // Hour 1 runs; hour 2 fails in logsaver, after upload-domains ended its input and
  // committed. The failed line used to say 0.
  const { dir, env } = await failingSecondHour();
  const r = await runner(dir, [], { env });
  assert.equal(r.status, 1, r.stderr);
  const rec = runsJsonl(dir).at(-1)!;
  assert.equal(rec.status, 'failed');
  assert.equal(rec.failed_stage, 'logsaver');
  assert.match(String(rec.error), /^logsaver: .*cannot publish the queue file: EIO/);
  const ud = (rec.stages as Record<string, Record<string, unknown>>)['upload-domains']!;
  assert.ok((ud.assigned_by_us as number) > 0, 'upload-domains committed new domains');
  assert.equal(rec.new_domains, ud.assigned_by_us);
});

test('killed after a failed run\'s line and before its staging area was removed: the retry is a new run, and new_domains is not counted twice', async () => {
  // As in the test above, hour 2 fails in logsaver after upload-domains committed. The
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
  assert.deepEqual(recs.map((x) => [x.run, x.status, x.attempt, x.recovered]), [
    ['2011072805', 'ok', 1, undefined],
    ['2011072806', 'failed', 1, undefined],
    ['2011072806', 'ok', 1, undefined],
  ]);
  assert.ok((recs[1]!.new_domains as number) > 0, 'the failed attempt assigned domains');
  assert.notEqual(recs[2]!.run_id, recs[1]!.run_id);
  // Every domain in the database was assigned by one of these runs, and counted once.
  const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  const rows = db.prepare('SELECT count(*) FROM partner_domain').pluck().get();
  db.close();
  assert.equal(recs.reduce((n, x) => n + (x.new_domains as number), 0), rows);
});

test('join-current failing at the end of hour 2 cuts its output: upload-domains fails on the cut line before its commit, and the failed line names join-current', async () => {
  // current_log gets a last line whose timestamp is no real time (its id is the
  // largest): join-current fails there, after the rest went downstream. Before its
  // output ended in a cut line, upload-domains took the lines so far for its whole
  // input and committed new domains from a run that failed.
  const { dir } = await failingSecondHour();
  const cl = path.join(dir, 'var/state/current_log');
  fs.appendFileSync(cl, `${'f'.repeat(16)}\t20119999000000\t\t1\ta.com\thttp://a.com/\n`);
  const before = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  const rowsBefore = before.prepare('SELECT count(*) FROM partner_domain').pluck().get();
  before.close();
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  const rec = runsJsonl(dir).at(-1)!;
  assert.equal(rec.failed_stage, 'join-current');
  const stages = rec.stages as Record<string, Record<string, unknown>>;
  assert.equal(stages['upload-domains']!.error_code, 'TRUNCATED');
  assert.equal(rec.new_domains, 0);
  const after = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  assert.equal(after.prepare('SELECT count(*) FROM partner_domain').pluck().get(), rowsBefore, 'nothing assigned by the failed run');
  after.close();
});

test('a stage that dies of an exception it did not catch (a module that fails to load) is reported by its message, not by Node\'s first line', () => {
  const stderrOf = (code: string) => spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' }).stderr;
  const missing = readStageLog('group-sum', 1, stderrOf('import "no-such-package-here";'));
  assert.match(missing.messages[0]!, /^node:internal/, 'what was reported before');
  assert.match(failureMessage(missing), /^group-sum: Error \[ERR_MODULE_NOT_FOUND\]: Cannot find package 'no-such-package-here' imported from /);
  // A message of several lines (as a native module built for another Node version gives) comes whole, on one line.
  const twoLines = readStageLog('upload-domains', 1, stderrOf('throw new TypeError("was compiled against\\na different Node.js version");'));
  assert.equal(failureMessage(twoLines), 'upload-domains: TypeError: was compiled against a different Node.js version');
  assert.equal(failureMessage(readStageLog('group-sum', 1, stderrOf('throw new Error();'))), 'group-sum: Error');
  // A thrown value that is not an Error is printed alone, before Node's hint.
  assert.equal(failureMessage(readStageLog('join-current', 1, stderrOf('throw "no current_log";'))), 'join-current: uncaught exception: no current_log');
  const oom = spawnSync(process.execPath, ['--max-old-space-size=16', '-e', 'const a = []; for (;;) a.push(new Array(1e5).fill(1));'], { encoding: 'utf8' });
  assert.match(failureMessage(readStageLog('analyze-dump', 134, oom.stderr)), /^analyze-dump: FATAL ERROR: .*JavaScript heap out of memory/);
  // The stage's own message still wins, and a bare status stays the last resort.
  const own = readStageLog('group-sum', 1, 'group-sum: -:3: not sorted by id\n{"summary":true,"status":"failed"}\n');
  assert.equal(failureMessage(own), 'group-sum: -:3: not sorted by id');
  assert.equal(failureMessage(readStageLog('logsaver', 137, '')), 'logsaver: killed by signal 9');
});

test('a run without rejects removes the rejects files a failed attempt of the same reflog left', async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
  const lines = fs.readFileSync(reflog, 'utf8').split('\n');
  // Half of the URLs made ftp: the reject ratio fails the run, and its rejects are kept.
  fs.writeFileSync(reflog, lines.map((l, i) => (i % 2 === 1 ? l.replace(/\thttps?:/, '\tftp:') : l)).join('\n'));
  const failed = await runner(dir);
  assert.equal(failed.status, 1, failed.stderr);
  const kept = path.join(dir, 'var/state/rejects/failed/2011072806.tsv');
  assert.ok(fs.statSync(kept).size > 0, "the failed attempt's rejects are kept");
  assert.equal(runsJsonl(dir).at(-1)!.rejects_file, kept);
  const committedName = path.join(dir, 'var/state/rejects/2011072806.tsv');
  assert.ok(!fs.existsSync(committedName), "not under a committed run's name");
  // The operator fixes the reflog, leaving out every line that would be rejected.
  const valid = (l: string) => {
    const f = l.split('\t');
    return f.length < 6 || (/^\d{14}$/.test(f[2]!) && /^https?:/.test(f[4]!));
  };
  fs.writeFileSync(reflog, lines.filter(valid).join('\n'));
  // A failing attempt without rejects (no active Yacobot) removes them too.
  const db = new Database(path.join(dir, 'var/state/partner.db'));
  db.prepare('UPDATE yacobot SET active = 0').run();
  const noActive = await runner(dir);
  assert.equal(noActive.status, 1, noActive.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'upload-domains');
  assert.ok(!fs.existsSync(kept), 'a failed attempt that rejected nothing leaves no rejects file');
  db.prepare('UPDATE yacobot SET active = 1').run();
  db.close();
  // One left all the same (by a runner killed before it could remove it), and one under the
  // committed run's name (by a runner before rejects/failed/): the commit removes both.
  fs.writeFileSync(kept, 'stale\n');
  fs.writeFileSync(committedName, 'stale\n');
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  const last = runsJsonl(dir).at(-1)!;
  assert.equal(last.status, 'ok');
  assert.equal((last.stages as Record<string, { rejected: number }>)['analyze-dump']!.rejected, 0);
  assert.equal(last.rejects_file, undefined);
  assert.ok(!fs.existsSync(kept) && !fs.existsSync(committedName), 'no rejects file for a run that rejected nothing');
});

test('option values are checked up front (usage errors), and a config file\'s relative paths are relative to its own directory', () => {
  const usage = (argv: string[], message: RegExp) =>
    assert.throws(() => parseArgs(argv, '/w'), (e: unknown) => e instanceof UsageError && message.test(e.message), JSON.stringify(argv));
  usage(['var/inbox'], /^unexpected argument 'var\/inbox'$/);
  usage(['--keep'], /^option '--keep' wants a value$/);
  usage(['--now'], /^option '--now' wants a value$/);
  // Naming the value, not 'inbox is empty' (an inbox without reflogs, to an operator).
  usage(['--inbox', ''], /^inbox is an empty path \('' is not the current directory\)$/);
  usage(['--state='], /^state is an empty path /);
  usage(['--db', ''], /^db is an empty path /);
  usage(['--queue-dir', ''], /^queue-dir is an empty path /);
  usage(['--config', ''], /^config is an empty path /);
  for (const bw of ['abc', '-1', '1e6', '', '99999999999999999']) usage(['--backlog-warn', bw], /^backlog-warn wants a number of URLs/);
  for (const r of ['1.5', '-0.1', '', ' ', 'x', '1.0000001']) usage(['--max-reject-ratio', r], /^max-reject-ratio wants a number from 0 to 1/);
  usage(['--log-level', 'verbose'], /^log-level is one of debug, info, warn, error, silent; got 'verbose'$/);
  usage(['--config', '/nonexistent/runner.conf'], /^cannot read config file \/nonexistent\/runner\.conf: ENOENT$/);
  const opts = (argv: string[]) => {
    const o = parseArgs(argv, '/w');
    assert.ok(typeof o === 'object', JSON.stringify(argv));
    return o;
  };
  for (const r of ['0', '1', '0.5', '1.0']) assert.equal(opts(['--max-reject-ratio', r]).maxRejectRatio, r);
  assert.equal(opts(['--backlog-warn', '1_000,000']).backlogWarn, 1_000_000);
  assert.equal(opts(['--backlog-warn', '0']).backlogWarn, 0);
  assert.equal(opts(['--keep', '2h']).keep, '2h');
  assert.equal(opts([]).keep, null);
  assert.equal(opts(['--keep', '2h']).keepMs, 2 * 3_600_000);
  assert.equal(opts([]).keepMs, 3_600_000, "filter-url's default");

  // A config file elsewhere: its relative paths are relative to its directory, a flag's to the cwd.
  const dir = sub('conf-');
  fs.mkdirSync(path.join(dir, 'etc'));
  fs.writeFileSync(
    path.join(dir, 'etc/runner.conf'),
    "inbox = in\nstate = '../st'\ndb = \"p.db\"\nqueue-dir = \"q'\nmax-reject-ratio = 0.5\nbacklog-warn = 7\n",
  );
  const c = parseArgs(['--config', 'etc/runner.conf', '--db', 'flag.db'], dir);
  assert.ok(typeof c === 'object');
  assert.deepEqual(
    [c.inbox, c.state, c.db, c.queueDir, c.maxRejectRatio, c.backlogWarn, c.config],
    [path.join(dir, 'etc/in'), path.join(dir, 'st'), path.join(dir, 'flag.db'), path.join(dir, 'etc', '"q\''), '0.5', 7, path.join(dir, 'etc/runner.conf')],
  );
  assert.equal((parseArgs(['--config', 'etc/runner.conf'], dir) as { db: string }).db, path.join(dir, 'etc/p.db'));
  fs.writeFileSync(path.join(dir, 'etc/empty.conf'), 'inbox =\n');
  usage(['--config', path.join(dir, 'etc/empty.conf')], /^\/.*\/etc\/empty\.conf:1: inbox is an empty path /);

  // --version and --help print and exit 0 before anything else is looked at.
  const v = runRunner(dir, ['--bogus-later', '--version']);
  assert.equal(v.status, 2, 'arguments are read in order: the unknown one first');
  const version = runRunner(dir, ['--version', '--bogus']);
  assert.equal(version.status, 0, version.stderr);
  assert.equal(version.stdout, `${JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version}\n`);
  // A log level that pino does not know would be an internal error (exit 1): it is a usage error.
  const lvl = runRunner(dir, ['--log-level', 'verbose']);
  assert.equal(lvl.status, 2, lvl.stderr);
  assert.match(lvl.stderr, /^reflog-to-yacobot-queue: log-level is one of debug, info, warn, error, silent; got 'verbose'\nTry 'reflog-to-yacobot-queue --help'/);
});

test('the lock names its holder as the holder wrote it: not a former holder whose line is still in the file, not a pid of another host taken for ended, and a holder that writes its pid a moment late', async () => {
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

test('countLines (URLs of a queue file, sent and backlog): a last line without LF counts, and a file over the 1 MiB read buffer counts each line once', () => {
  const dir = sub('count-');
  const count = (name: string, data: string | Buffer) => {
    fs.writeFileSync(path.join(dir, name), data);
    return countLines(path.join(dir, name));
  };
  assert.equal(count('empty', ''), 0);
  assert.equal(count('one', 'a\n'), 1);
  assert.equal(count('cut', 'a\nb'), 2);
  assert.equal(count('blank', '\n\n'), 2);
  // 1 MiB of short lines, then 10 more bytes: the second read fills only the start of the buffer.
  const mib = 'x\n'.repeat(1 << 19);
  assert.equal(count('big', mib + 'yyyy\nzzzz\n'), (1 << 19) + 2);
  assert.equal(count('big-cut', mib + 'yyyy\nzz'), (1 << 19) + 2);
  // Long lines, no LF in the second read at all.
  assert.equal(count('long', 'u'.repeat((1 << 20) - 1) + '\n' + 'v'.repeat(100)), 2);
});

test('a --state that cannot be created is an error naming the directory and the reason (exit 1), not an internal error', () => {
  const dir = sub('nostate-');
  fs.mkdirSync(path.join(dir, 'inbox'));
  fs.writeFileSync(path.join(dir, 'file'), 'not a directory\n');
  const r = runRunner(dir, ['--inbox', 'inbox', '--state', 'file/state'], 20_000);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(r.stderr.includes(`\nreflog-to-yacobot-queue: ${path.join(dir, 'file/state/staging')}: cannot create directory: ENOTDIR`), r.stderr);
  assert.doesNotMatch(r.stderr, /internal error/);
});

test('SIGTERM to the runner stops its stages at once: analyze-dump does not read on through a big reflog after the runner exited', async () => {
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

test('SIGTERM to the runner while bash starts the chain: no stage outlives the runner, none runs on to the end', async () => {
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
    assert.ok(!(fs.existsSync(ad) && /"status":"ok"/.test(fs.readFileSync(ad, 'utf8'))), `${what}: analyze-dump was stopped (finished: ${finished.join(', ')})`);
    const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
    try {
      assert.equal(db.prepare('SELECT COUNT(*) FROM partner_domain').pluck().get(), 0, `${what}: no assignment committed`);
    } finally {
      db.close();
    }
  }
});

test('runStages: a log directory that cannot take the chain\'s log is an error for the caller, not an unhandled rejection', async () => {
  const dir = scratch('ms-stages-');
  fs.writeFileSync(path.join(dir, 'R.reflog'), '');
  const p = { ...runPaths({ inbox: dir, state: dir }, 'R'), logs: path.join(dir, 'missing') };
  const o = { state: dir, dbArgs: ['--db', path.join(dir, 'p.db')], maxRejectRatio: null, memory: null, resendAfter: null, keep: null, killAfterMs: 1000 } as unknown as RunnerOptions;
  const progress = { size: 0, read: () => -1 };
  await assert.rejects(runStages(o, p, '20110728070000', 3, path.join(ROOT, 'bin'), progress), /ENOENT/);
});

test('a database upload-domains refuses at its start fails the run: nothing published, nothing assigned', async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  const db = new Database(path.join(dir, 'var/state/partner.db'));
  // A row only a hand edit with foreign keys off makes: it names a Yacobot that does not exist.
  db.pragma('foreign_keys = OFF');
  db.exec("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('ghost.com', 99, 'x')");
  db.close();
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /run 2011072806 failed: upload-domains: .*ghost\.com to Yacobot 99, which does not exist/);
  const rec = runsJsonl(dir).at(-1)!;
  assert.equal(rec.failed_stage, 'upload-domains');
  assert.equal(rec.new_domains, 0);
  const queue = path.join(dir, 'var/queue');
  assert.deepEqual(fs.existsSync(queue) ? fs.readdirSync(queue).flatMap((y) => fs.readdirSync(path.join(queue, y))) : [], [], 'nothing published');
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072806.reflog')), 'the reflog stays');
  const after = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  try {
    assert.equal(after.prepare('SELECT COUNT(*) FROM partner_domain').pluck().get(), 1, 'upload-domains assigned nothing');
  } finally {
    after.close();
  }
});

test('an interrupted run is redone before a reflog with an older name that arrived since: the same result as uninterrupted', async () => {
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
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.recovered]), [['2011072807', 'rerun'], ['2011072806', undefined]]);
  assertSameState(snapshot(dir), snapshot(want), 'interrupted, then a late older reflog');
});

test('attempts: a run is attempt 1; a rerun after an interruption is attempt 2 of the same run_id, marked rerun; a failed run starts over as attempt 1 of a new run_id', async () => {
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

  // A failed attempt removes its staging area: the next one is a new run, attempt 1.
  const f = fresh();
  keepOnly(f, '2011072806.reflog');
  const setActive = (active: number) => {
    const db = new Database(path.join(f, 'var/state/partner.db'));
    db.prepare('UPDATE yacobot SET active = ?').run(active);
    db.close();
  };
  setActive(0);
  assert.equal((await runner(f)).status, 1);
  setActive(1);
  assert.equal((await runner(f)).status, 0);
  const recs = runsJsonl(f);
  assert.deepEqual(recs.map((x) => [x.status, x.attempt, x.recovered]), [
    ['failed', 1, undefined],
    ['ok', 1, undefined],
  ]);
  assert.notEqual(recs[0]!.run_id, recs[1]!.run_id);
});

const roMountWorks = spawnSync('unshare', ['-rm', 'bash', '-c', 'd=$(mktemp -d) && mount --bind "$d" "$d" && mount -o remount,ro,bind "$d" && ! touch "$d/x" 2>/dev/null; s=$?; rmdir "$d"; exit $s']).status === 0;

test('a read-only inbox fails the invocation before anything runs: no run publishes its queue files, hour after hour, and fails to move its reflog', { skip: !roMountWorks && 'no user namespace for a read-only bind mount here' }, () => {
  // It used to run: each run published its queue files, then failed to move its reflog
  // out (EROFS) with COMMIT in place, and every invocation rolled it forward, publishing
  // the same queue files again (a consumer that took them got them again every hour).
  const dir = fresh();
  const r = spawnSync('unshare', ['-rm', 'bash', '-c', 'mount --bind var/inbox var/inbox && mount -o remount,ro,bind var/inbox && exec "$0" --log-level silent', RUNNER], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stderr, `${path.basename(RUNNER)}: ${path.join(dir, 'var/inbox')}: cannot move processed reflogs out of the inbox: EROFS; nothing was run\n`);
  assert.ok(!fs.existsSync(path.join(dir, 'var/queue')), 'no queue file published');
  // last-invocation.json records the failed invocation, for status.
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state')).sort(), ['last-invocation.json', 'partner.db']);
});

test('a runs.jsonl that is not a regular file fails the invocation before anything runs: a FIFO does not hold it for ever, a directory does not have each run publish and then fail', async () => {
  // A FIFO: reading the newest committed run for the replay warning blocked in open(2),
  // deaf to SIGTERM. Either: each run's line is appended after its queue files are out,
  // and that failed, leaving a COMMIT that every invocation rolled forward again.
  for (const kind of ['FIFO', 'directory']) {
    const dir = freshFirstOnly();
    const runs = path.join(dir, 'var/state/runs.jsonl');
    if (kind === 'FIFO') assert.equal(spawnSync('mkfifo', [runs]).status, 0);
    else fs.mkdirSync(runs);
    const r = await runner(dir, ['--log-level', 'silent'], { killAfter: 30_000 });
    assert.equal(r.status, 1, `${kind}: ${r.signal} ${r.stderr}`);
    assert.equal(
      r.stderr,
      `reflog-to-yacobot-queue: ${runs}: is a ${kind}: the run records go to a regular file; move it aside (the runner starts a new one); nothing was run\n`,
    );
    assert.ok(!fs.existsSync(path.join(dir, 'var/queue')), `${kind}: no queue file published`);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), RUNS.slice(0, 1));
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
  }
});

test('an --inbox below a regular file is a usage error (exit 2), found before anything is made under --state', () => {
  const dir = sub('inboxfile-');
  fs.writeFileSync(path.join(dir, 'file'), 'x\n');
  const r = runRunner(dir, ['--inbox', 'file/inbox', '--state', 'st'], 20_000);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--inbox \S+\/file\/inbox: is not an existing directory \(check --inbox, or create it\)\nTry '/);
  assert.ok(!fs.existsSync(path.join(dir, 'st')), 'no state directory made');
});

test('a FIFO named *.reflog in the inbox fails its run at once (exit 1, naming it), not a runner stuck in open(2), deaf to SIGTERM, holding the lock', () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  const fifo = path.join(dir, 'var/inbox/2011072805.reflog');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  // SIGKILL on timeout: before the fix, the runner never got out of open(2) to act on a SIGTERM.
  const r = spawnSync(RUNNER, [], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 30_000, killSignal: 'SIGKILL' });
  assert.equal(r.signal, null, 'the runner ended by itself');
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /run 2011072805 failed: \S+\/var\/inbox\/2011072805\.reflog: is a FIFO: a reflog must be a complete regular file/);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const runs = runsJsonl(dir);
  assert.deepEqual(runs.map((x) => [x.run, x.status, x.failed_stage]), [['2011072805', 'failed', 'reflog']]);
  assert.ok(fs.lstatSync(fifo).isFIFO(), 'the FIFO stays in the inbox');
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072806.reflog')), 'the later reflog waits');
  assert.ok(!fs.existsSync(path.join(dir, 'var/queue')) || fs.readdirSync(path.join(dir, 'var/queue')).every((d) => fs.readdirSync(path.join(dir, 'var/queue', d)).length === 0), 'nothing published');
});

test("a run's failure is reported on one line when the reflog's path holds a newline (a FIFO in such an inbox)", () => {
  // The message the runner makes itself (is a FIFO, cannot read) quoted the path raw: its
  // "run ... failed:" line was cut in two, the second part reading as a message of its own.
  const dir = fresh();
  keepOnly(dir);
  const inbox = path.join(dir, 'var/in\nbox');
  fs.renameSync(path.join(dir, 'var/inbox'), inbox);
  assert.equal(spawnSync('mkfifo', [path.join(inbox, '2011072806.reflog')]).status, 0);
  const r = runRunner(dir, ['--inbox', inbox, '--log-level', 'silent'], 30_000);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(r.stderr.includes(`run 2011072806 failed: ${path.join(dir, 'var/in\\nbox')}/2011072806.reflog: is a FIFO`), r.stderr);
  for (const line of r.stderr.trimEnd().split('\n')) assert.match(line, /^reflog-to-yacobot-queue: /, r.stderr);
});

test("a file or a symlink in STATE/staging that is no run's directory is left alone, and the runs go on", async () => {
  const dir = fresh();
  keepOnly(dir, '2011072806.reflog');
  const stray = path.join(dir, 'var/state/staging/README');
  fs.mkdirSync(path.dirname(stray), { recursive: true });
  fs.writeFileSync(stray, 'notes of the operator\n');
  // A dangling symlink failed every start-up with 'internal error: ENOENT ... stat'; one
  // to a directory was taken for a run's, and its work/ removed.
  fs.symlinkSync('/nonexistent/h36', path.join(dir, 'var/state/staging/dangling'));
  const elsewhere = path.join(dir, 'elsewhere');
  fs.mkdirSync(path.join(elsewhere, 'work'), { recursive: true });
  fs.writeFileSync(path.join(elsewhere, 'work/keep'), 'kept\n');
  fs.symlinkSync(elsewhere, path.join(dir, 'var/state/staging/linked'));
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fs.readFileSync(stray, 'utf8'), 'notes of the operator\n');
  assert.equal(fs.readFileSync(path.join(elsewhere, 'work/keep'), 'utf8'), 'kept\n');
  assert.equal(fs.readlinkSync(path.join(dir, 'var/state/staging/dangling')), '/nonexistent/h36');
  assert.deepEqual(runsJsonl(dir).map((x) => x.status), ['ok']);
});

test("a committed run's record names its published rejects file, and the file holds the run's rejects", async () => {
  const { dir } = await ref();
  const first = runsJsonl(dir)[0]!;
  const rejected = (first.stages as Record<string, { rejected: number }>)['analyze-dump']!.rejected;
  assert.ok(rejected > 0, 'the first fixture hour has rejects');
  assert.equal(first.rejects_file, path.join(dir, 'var/state/rejects/2011072806.tsv'));
  assert.equal(fs.readFileSync(first.rejects_file as string, 'utf8').split('\n').filter(Boolean).length, rejected);
});

/**
 * Starts the runner on a big reflog with an analyze-dump deaf to SIGTERM and SIGINT
 * that never ends by itself (test/lib/deaf-stage), SIGTERMs the runner, checks that it
 * waits for that stage, then runs `then`. Returns how the runner ended (status null:
 * it had not exited 20 s after `then`, and the group was SIGKILLed).
 */
async function withStuckStage(args: string[], then: (runner: ChildProcess) => void): Promise<{ dir: string; status: number | null; stderr: string; ms: number; left: number[]; lockFree: boolean }> {
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

test('a stage that does not stop on SIGTERM: a second signal SIGKILLs it, the runner exits 143 with no process left, and a rerun finishes the run', async () => {
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

test('a stage that does not stop on SIGTERM is SIGKILLed --kill-after later; a bad --kill-after is a usage error', async () => {
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

test('a stopped stage and a stopped chain shell (Ctrl-Z, SIGSTOP) still stop on the runner\'s SIGTERM, at once and cleanly, not --kill-after later', async () => {
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
  assert.equal(bash.length, 1, 'the chain\'s bash');
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
  assert.deepEqual(processesWhere((cmd) => cmd.includes(dir)), [], 'no process of the run left');
});

test('a replayed hour whose first queue files were not taken yet publishes its own under a name of their own, instead of replacing them', async () => {
  const dir = copyOf((await ref1()).dir); // the first hour run
  const run = RUN0;
  const queues = ['1', '2', '3'].map((y) => path.join(dir, 'var/queue', y, `${run}.tsv`)).filter((f) => fs.existsSync(f));
  assert.ok(queues.length > 0);
  const before = queues.map((f) => fs.readFileSync(f, 'utf8'));
  // Re-sent with 6 more lines: deduplicated against
  // current_log, its queue file holds only the 6 new URLs, and replacing the untaken
  // one would lose the URLs current_log records as sent.
  const extra = Array.from({ length: 6 }, (_, i) => `1000\t0\t20110728063000\t${i}\thttp://resent-${i}.example.com/\t1\n`).join('');
  fs.writeFileSync(path.join(dir, 'var/inbox', RUNS[0]!), fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!), 'utf8') + extra);
  fs.rmSync(path.join(dir, 'var/state/done', RUNS[0]!));
  const replay = await runner(dir);
  assert.equal(replay.status, 0, replay.stderr);
  assert.ok(!hasStackTrace(replay.stderr), replay.stderr);
  assert.deepEqual(queues.map((f) => fs.readFileSync(f, 'utf8')), before, 'the untaken queue files are unchanged');
  const last = runsJsonl(dir).at(-1)!;
  assert.deepEqual([last.status, last.sent], ['ok', 6]);
  assert.match(String(last.queue_name), new RegExp(`^${run}\\.replay-\\d{14}$`));
  const own = ['1', '2', '3'].map((y) => path.join(dir, 'var/queue', y, `${last.queue_name}.tsv`)).filter((f) => fs.existsSync(f));
  assert.equal(own.map((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).length).reduce((a, b) => a + b, 0), 6, 'the 6 new URLs, in files of their own');
  assert.ok(fs.existsSync(path.join(dir, 'var/state/done', RUNS[0]!)));
});

test('a replayed hour with untaken queue files at several Yacobots goes through with queue files of a name of its own at each; the old ones stay to be taken', async () => {
  const dir = copyOf((await ref1()).dir); // the first hour run
  const run = RUN0;
  // One new URL on a domain of each Yacobot: the replay has a queue file for each of the three.
  const owned = new Map<string, string>();
  const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  try {
    for (const [domain, id] of db.prepare('SELECT domain, yacobot_id FROM partner_domain ORDER BY domain').raw().all() as [string, number][]) {
      if (!owned.has(String(id))) owned.set(String(id), domain);
    }
  } finally {
    db.close();
  }
  assert.deepEqual([...owned.keys()].sort(), ['1', '2', '3']);
  const extra = [...owned.values()].map((d, i) => `1000\t0\t20110728063000\t${i}\thttp://${d}/replayed-${i}\t1\n`).join('');
  fs.writeFileSync(path.join(dir, 'var/inbox', RUNS[0]!), fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!), 'utf8') + extra);
  fs.rmSync(path.join(dir, 'var/state/done', RUNS[0]!));
  const queue = (y: string) => path.join(dir, 'var/queue', y, `${run}.tsv`);
  const before = ['1', '2', '3'].map((y) => fs.readFileSync(queue(y), 'utf8'));
  const replay = await runner(dir);
  assert.equal(replay.status, 0, replay.stderr);
  const own = String(runsJsonl(dir).at(-1)!.queue_name);
  assert.deepEqual(['1', '2', '3'].map((y) => fs.readFileSync(queue(y), 'utf8')), before, 'the old files stay to be taken');
  for (const y of ['1', '2', '3']) assert.equal(fs.readFileSync(path.join(dir, 'var/queue', y, `${own}.tsv`), 'utf8').split('\n').filter(Boolean).length, 1, `queue ${y}`);
});

test('a reflog renamed over INBOX/RUN.reflog while that run is in progress stays in the inbox, and the next invocation processes it', async () => {
  // It was moved to done/ by the commit's reflog step, never processed, its lines counted as the old file's.
  const dir = freshFirstOnly();
  const run = RUN0;
  const inboxFile = path.join(dir, 'var/inbox', RUNS[0]!);
  const resume = await stoppedBefore(dir, `${run}:reflog`);
  // The sender re-sends the hour under the same name (another hour's lines, to tell them apart).
  const resent = path.join(dir, 'resent');
  fs.copyFileSync(path.join(REFLOGS, RUNS[1]!), resent);
  fs.renameSync(resent, inboxFile);
  const r = await resume();
  assert.equal(r.status, 0, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.ok(
    r.stderr.includes(`warning: ${inboxFile} is not the file run ${run} read (another file was renamed over it meanwhile); it stays in the inbox`),
    r.stderr,
  );
  assert.ok(fs.readFileSync(inboxFile).equals(fs.readFileSync(path.join(REFLOGS, RUNS[1]!))), 'the re-sent file is still in the inbox');
  assert.ok(!fs.existsSync(path.join(dir, 'var/state/done', RUNS[0]!)), 'nothing went to done/');
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
  // The Yacobots take the first queue files; the next invocation runs the re-sent hour.
  takeQueueFiles(dir, run);
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.ok(fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!)).equals(fs.readFileSync(path.join(REFLOGS, RUNS[1]!))));
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
  const lines = runsJsonl(dir).map((x) => [x.run, x.status, (x.stages as Record<string, Record<string, unknown>>)['analyze-dump']!.lines_in]);
  assert.deepEqual(lines, [
    [run, 'ok', countLines(path.join(REFLOGS, RUNS[0]!))],
    [run, 'ok', countLines(path.join(REFLOGS, RUNS[1]!))],
  ]);
});

test('a roll forward does not move a reflog that came under the name after the run\'s own had left; an old COMMIT without the identity still moves it', async () => {
  const run = RUN0;
  const resent = fs.readFileSync(path.join(REFLOGS, RUNS[1]!));
  // Killed after the reflog step: the run's reflog is in done/, COMMIT still there.
  const dir = freshFirstOnly();
  const inboxFile = path.join(dir, 'var/inbox', RUNS[0]!);
  const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${run}:uncommit` } });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  fs.writeFileSync(inboxFile, resent);
  const r = await runner(dir);
  // Rolled forward without touching it; then it runs, its queue files named apart from the untaken ones.
  assert.equal(r.status, 0, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.match(r.stderr, /rolling forward/);
  assert.ok(r.stderr.includes(`warning: ${inboxFile} is not the file run ${run} read`), r.stderr);
  assert.ok(fs.readFileSync(path.join(dir, 'var/state/done', `${RUNS[0]!}.~1~`)).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), 'done/ keeps the one processed first');
  assert.ok(fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!)).equals(resent));
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status, typeof x.queue_name]), [[run, 'ok', 'undefined'], [run, 'ok', 'string']]);

  // A COMMIT written by a runner that did not record the identity: the reflog step moves what is there.
  const old = freshFirstOnly();
  const k2 = await runner(old, [], { env: { REFLOG_RUNNER_FAILPOINT: `${run}:reflog` } });
  assert.equal(k2.signal, 'SIGKILL', k2.stderr);
  asOlderCommit(old, run, 'reflogFile');
  const r2 = await runner(old);
  assert.equal(r2.status, 0, r2.stderr);
  assert.deepEqual(fs.readdirSync(path.join(old, 'var/inbox')), []);
  assert.ok(fs.existsSync(path.join(old, 'var/state/done', RUNS[0]!)));
});

test('an error that persists after the commit (a directory in the way in done/) fails every invocation without publishing the queue files again, or printing its summary line again; gone, the run completes', async () => {
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
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[run, 'ok']]);
});

test('a roll forward killed while it copied a queue file again does not leave that copy to be published cut off by the next one', async () => {
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
  assert.deepEqual(fs.readdirSync(path.dirname(dst)).filter((f) => f.startsWith('.')), [], 'no copy left beside it');
});

test('a reflog in the inbox that is a relative symlink goes to done/ as a link that still leads to the file it read, there and moved back for a replay', async () => {
  // Moved as it was, ../incoming/x.reflog pointed into STATE/ from done/: a dangling link.
  const dir = fresh();
  keepOnly(dir);
  const incoming = path.join(dir, 'var/incoming');
  fs.mkdirSync(incoming);
  fs.copyFileSync(path.join(REFLOGS, RUNS[0]!), path.join(incoming, 'x.reflog'));
  fs.symlinkSync('../incoming/x.reflog', path.join(dir, 'var/inbox', RUNS[0]!));
  const r = await runner(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
  const done = path.join(dir, 'var/state/done', RUNS[0]!);
  assert.ok(fs.lstatSync(done).isSymbolicLink(), 'still a link, to the sender\'s file');
  assert.equal(fs.readlinkSync(done), fs.realpathSync(path.join(incoming, 'x.reflog')));
  assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))));
  assert.deepEqual(fs.readdirSync(path.dirname(done)), [RUNS[0]!], 'no temporary link left');
  fs.renameSync(done, path.join(dir, 'var/inbox', RUNS[0]!));
  assert.ok(fs.readFileSync(path.join(dir, 'var/inbox', RUNS[0]!)).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), 'moved back, it still leads there');
});

test('an invocation that stops on an error after some runs committed still prints their summary lines, before the error', async () => {
  const dir = fresh();
  keepOnly(dir, RUNS[0]!, RUNS[1]!);
  const [first, second] = [RUNS[0]!, RUNS[1]!].map((f) => f.replace(/\.reflog$/, ''));
  const obstacle = path.join(dir, 'var/state/done', RUNS[1]!);
  fs.mkdirSync(obstacle, { recursive: true }); // the second run's reflog step fails
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const summary = new RegExp(`^reflog-to-yacobot-queue: ${first}: \\d+ lines, \\d+ records, .* URLs sent`, 'm');
  assert.match(r.stderr, summary);
  const error = r.stderr.indexOf(`${obstacle}: cannot move `);
  assert.ok(error > r.stderr.search(summary), `the summary line comes before the error: ${r.stderr}`);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[first, 'ok'], [second, 'ok']]);
});

test('a reflog re-sent under its name while the run copies it to another file system, or links it anew, stays in the inbox; a crash after it was parked is finished', async (t) => {
  // The copy (or the new link) was followed by removing the inbox name: the re-sent hour
  // renamed over it meanwhile was deleted unread, and nothing said so.
  const preload = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/signal-after-call.js')).href}`;
  const run = RUN0;
  const original = fs.readFileSync(path.join(REFLOGS, RUNS[0]!));
  const resent = fs.readFileSync(path.join(REFLOGS, RUNS[1]!));
  const resend = (dir: string, inboxFile: string) => {
    fs.writeFileSync(path.join(dir, 'resent'), resent);
    fs.renameSync(path.join(dir, 'resent'), inboxFile);
  };

  // A relative link, made anew in done/: paused once the new link is made.
  const dir = fresh();
  keepOnly(dir);
  const inboxFile = path.join(dir, 'var/inbox', RUNS[0]!);
  fs.mkdirSync(path.join(dir, 'var/incoming'));
  fs.writeFileSync(path.join(dir, 'var/incoming/x.reflog'), original);
  fs.symlinkSync('../incoming/x.reflog', inboxFile);
  const resume = await stoppedWith(dir, [], { NODE_OPTIONS: preload, SIGNAL_AFTER_CALL: 'symlinkSync', SIGNAL_ARG: 'incoming/x.reflog' }, 'after linking');
  resend(dir, inboxFile);
  const r = await resume();
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]!]);
  assert.ok(fs.readFileSync(inboxFile).equals(resent), 'the re-sent hour is still in the inbox');
  assert.equal(fs.readlinkSync(path.join(dir, 'var/state/done', RUNS[0]!)), fs.realpathSync(path.join(dir, 'var/incoming/x.reflog')));

  // Killed just after it was parked: the next invocation finishes the move.
  const dir2 = fresh();
  keepOnly(dir2);
  fs.mkdirSync(path.join(dir2, 'var/incoming'));
  fs.writeFileSync(path.join(dir2, 'var/incoming/x.reflog'), original);
  fs.symlinkSync('../incoming/x.reflog', path.join(dir2, 'var/inbox', RUNS[0]!));
  const env = { NODE_OPTIONS: preload, SIGNAL_AFTER_CALL: 'renameSync', SIGNAL_ARG: path.join(dir2, 'var/inbox', RUNS[0]!), SIGNAL_SEND: 'SIGKILL' };
  const killed = await runner(dir2, [], { env });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir2, 'var/inbox')), [`.${RUNS[0]!}.moving`], 'killed once parked');
  const again = await runner(dir2);
  assert.equal(again.status, 0, again.stderr);
  // Its line was written to runs.jsonl by the killed invocation, which printed nothing: printed now, once.
  assert.equal(again.stderr.split('\n').filter((l) => new RegExp(`^reflog-to-yacobot-queue: ${run}: .*roll-forward`).test(l)).length, 1, again.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir2, 'var/inbox')), []);
  assert.ok(fs.readFileSync(path.join(dir2, 'var/state/done', RUNS[0]!)).equals(original));
  assert.deepEqual(runsJsonl(dir2).map((x) => [x.run, x.status]), [[run, 'ok']]);

  // An inbox on another file system: paused once the copy is made.
  const other = '/dev/shm';
  if (!fs.existsSync(other) || fs.statSync(other).dev === fs.statSync(dir).dev) {
    t.diagnostic(`${other} is not a second file system here: the copy case is not tried`);
    return;
  }
  const inbox = fs.mkdtempSync(path.join(other, 'ms-inbox-'));
  try {
    const dir3 = fresh();
    keepOnly(dir3);
    fs.writeFileSync(path.join(inbox, RUNS[0]!), original);
    const resume3 = await stoppedWith(dir3, ['--inbox', inbox], { NODE_OPTIONS: preload, SIGNAL_AFTER_CALL: 'copyFileSync', SIGNAL_ARG: inbox }, 'after copying');
    fs.writeFileSync(path.join(inbox, 'resent'), resent);
    fs.renameSync(path.join(inbox, 'resent'), path.join(inbox, RUNS[0]!));
    const r3 = await resume3();
    assert.equal(r3.status, 0, r3.stderr);
    assert.deepEqual(fs.readdirSync(inbox), [RUNS[0]!]);
    assert.ok(fs.readFileSync(path.join(inbox, RUNS[0]!)).equals(resent), 'the re-sent hour is still in the inbox');
    assert.ok(fs.readFileSync(path.join(dir3, 'var/state/done', RUNS[0]!)).equals(original), 'done/ holds the file the run read');
  } finally {
    fs.rmSync(inbox, { recursive: true, force: true });
  }
});

test('a replay made with ln instead of mv (the inbox file a hard link of done/RUN.reflog) leaves the inbox once processed', async () => {
  // rename(2) of a link over another link of the same file does nothing: the reflog stayed
  // in the inbox and every invocation ran that hour again.
  const dir = copyOf((await ref1()).dir); // the first hour run
  const run = RUN0;
  takeQueueFiles(dir, run);
  const done = path.join(dir, 'var/state/done', RUNS[0]!);
  fs.linkSync(done, path.join(dir, 'var/inbox', RUNS[0]!));
  const replay = await runner(dir);
  assert.equal(replay.status, 0, replay.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [], 'the replayed reflog left the inbox');
  assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), 'done/ still holds it');
  assert.equal(fs.statSync(done).nlink, 1);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[run, 'ok'], [run, 'ok']]);
});

test('a replay made with ln -s (the inbox file a symlink to done/RUN.reflog, relative or absolute) leaves done/RUN.reflog the hour itself', async () => {
  // Moved to done/ as any symlinked reflog, the link replaced the file it led to: done/
  // held a link to itself ('Too many levels of symbolic links'), the hour's reflog gone.
  const base = (await ref1()).dir;
  for (const kind of ['relative', 'absolute'] as const) {
    const dir = copyOf(base);
    takeQueueFiles(dir, RUN0);
    const done = path.join(dir, 'var/state/done', RUNS[0]!);
    fs.symlinkSync(kind === 'relative' ? path.join('../state/done', RUNS[0]!) : done, path.join(dir, 'var/inbox', RUNS[0]!));
    const replay = await runner(dir, ['--log-level', 'silent']);
    assert.equal(replay.status, 0, `${kind}: ${replay.stderr}`);
    assert.doesNotMatch(replay.stderr, /warning/, kind);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [], `${kind}: the link left the inbox`);
    assert.ok(fs.lstatSync(done).isFile(), `${kind}: done/ still holds the file`);
    assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), `${kind}: with the hour's bytes`);
    assert.deepEqual(fs.readdirSync(path.dirname(done)), [RUNS[0]!], `${kind}: nothing else in done/`);
    assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[RUN0, 'ok'], [RUN0, 'ok']]);
  }
});

test('a symlinked reflog whose target is deleted once its run read it leaves the inbox as a link (absolute or relative target, stopped or killed before the reflog step); another link renamed over it stays', async () => {
  // statSync saw the dangling link as nothing there ("moved before a crash"): the link
  // stayed in the inbox and every later invocation failed on it, running no later hour.
  const run = RUN0;
  const setup = (kind: 'absolute' | 'relative') => {
    const dir = fresh();
    keepOnly(dir, RUNS[1]!);
    fs.mkdirSync(path.join(dir, 'var/incoming'));
    fs.copyFileSync(path.join(REFLOGS, RUNS[0]!), path.join(dir, 'var/incoming/x.reflog'));
    fs.symlinkSync(kind === 'absolute' ? path.join(dir, 'var/incoming/x.reflog') : '../incoming/x.reflog', path.join(dir, 'var/inbox', RUNS[0]!));
    return dir;
  };
  const finished = async (dir: string, kind: 'absolute' | 'relative', what: string, r: Done) => {
    assert.equal(r.status, 0, `${what}: ${r.stderr}`);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [], `${what}: the link and the next reflog left the inbox`);
    const done = path.join(dir, 'var/state/done', RUNS[0]!);
    assert.ok(fs.lstatSync(done).isSymbolicLink(), `${what}: done/ holds the link`);
    const where = kind === 'absolute' ? dir : fs.realpathSync(dir);
    assert.equal(fs.readlinkSync(done), path.join(where, 'var/incoming/x.reflog'), `${what}: leading where it led`);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/done')).sort(), [RUNS[0]!, RUNS[1]!]);
    assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[run, 'ok'], [RUNS[1]!.replace(/\.reflog$/, ''), 'ok']]);
    const next = await runner(dir);
    assert.equal(next.status, 0, `${what}, the next invocation: ${next.stderr}`);
    assert.match(next.stderr, /nothing to do/);
  };
  for (const kind of ['absolute', 'relative'] as const) {
    const dir = setup(kind);
    const resume = await stoppedBefore(dir, `${run}:reflog`);
    fs.rmSync(path.join(dir, 'var/incoming/x.reflog'));
    await finished(dir, kind, `${kind}, stopped before the reflog step`, await resume());
  }
  // Killed before the reflog step, the target deleted, then rolled forward.
  const killedBefore = async () => {
    const dir = setup('relative');
    const killed = await runner(dir, [], { env: { REFLOG_RUNNER_FAILPOINT: `${run}:reflog` } });
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    fs.rmSync(path.join(dir, 'var/incoming/x.reflog'));
    return dir;
  };
  const dir2 = await killedBefore();
  const r2 = await runner(dir2);
  assert.match(r2.stderr, /rolling forward/);
  await finished(dir2, 'relative', 'rolled forward', r2);
  // Killed once the link is parked under its dot name: the roll forward finishes the move.
  const dir5 = setup('relative');
  const preload = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/signal-after-call.js')).href}`;
  const env = {
    REFLOG_RUNNER_FAILPOINT: `${run}:reflog`,
    REFLOG_RUNNER_FAILSIGNAL: 'SIGSTOP',
    NODE_OPTIONS: preload,
    SIGNAL_AFTER_CALL: 'renameSync',
    SIGNAL_ARG: path.join(dir5, 'var/inbox', RUNS[0]!),
    SIGNAL_SEND: 'SIGKILL',
  };
  const resume5 = await stoppedWith(dir5, [], env, 'before the reflog step');
  fs.rmSync(path.join(dir5, 'var/incoming/x.reflog'));
  assert.equal((await resume5()).signal, 'SIGKILL');
  assert.deepEqual(fs.readdirSync(path.join(dir5, 'var/inbox')), [`.${RUNS[0]!}.moving`, RUNS[1]!].sort(), 'killed once parked');
  await finished(dir5, 'relative', 'killed once parked, rolled forward', await runner(dir5));
  // A COMMIT written before the link was recorded cannot tell it is the run's: it stays,
  // and the run of it fails, naming it and saying its target is gone.
  const dir3 = await killedBefore();
  asOlderCommit(dir3, run, 'reflogLink');
  const r3 = await runner(dir3);
  assert.equal(r3.status, 1, r3.stderr);
  assert.ok(!hasStackTrace(r3.stderr), r3.stderr);
  const inboxFile3 = path.join(dir3, 'var/inbox', RUNS[0]!);
  assert.ok(
    r3.stderr.includes(`run ${run} failed: ${inboxFile3}: cannot read: ENOENT: it is a symbolic link, and its target ../incoming/x.reflog is missing`),
    r3.stderr,
  );
  assert.deepEqual(fs.readdirSync(path.join(dir3, 'var/state/staging')), [], 'rolled forward all the same');

  // Another link, to the same path, renamed over the name meanwhile: not the run's, it stays.
  const dir4 = setup('absolute');
  const inboxFile = path.join(dir4, 'var/inbox', RUNS[0]!);
  const resume4 = await stoppedBefore(dir4, `${run}:reflog`);
  fs.rmSync(path.join(dir4, 'var/incoming/x.reflog'));
  fs.symlinkSync(path.join(dir4, 'var/incoming/x.reflog'), path.join(dir4, 'other'));
  fs.renameSync(path.join(dir4, 'other'), inboxFile);
  const r4 = await resume4();
  assert.equal(r4.status, 0, r4.stderr);
  assert.ok(r4.stderr.includes(`warning: ${inboxFile} is not the file run ${run} read`), r4.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir4, 'var/inbox')), [RUNS[0]!]);
  assert.deepEqual(fs.readdirSync(path.join(dir4, 'var/state/done')), [RUNS[1]!]);
});

test('a reflog renamed over INBOX/RUN.reflog between the reflog step\'s identity check and its move stays in the inbox', async () => {
  // The step checked the file at the name, then renamed the name to done/: a re-sent hour
  // renamed over it in between went to done/ unprocessed, and nothing said so.
  const preload = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/signal-after-call.js')).href}`;
  const dir = freshFirstOnly();
  const run = RUN0;
  const inboxFile = path.join(dir, 'var/inbox', RUNS[0]!);
  const resent = fs.readFileSync(path.join(REFLOGS, RUNS[1]!));
  // Paused just after the reflog step's stat of the inbox name (its identity check; the
  // runner's first stat of that path).
  const atStep = await stoppedWith(dir, [], { NODE_OPTIONS: preload, SIGNAL_AFTER_CALL: 'statSync', SIGNAL_ARG: inboxFile }, 'after the identity check');
  assert.ok(fs.existsSync(path.join(dir, 'var/state/staging', run, 'COMMIT')), 'stopped in the commit');
  fs.writeFileSync(path.join(dir, 'resent'), resent);
  fs.renameSync(path.join(dir, 'resent'), inboxFile);
  const r = await atStep();
  assert.equal(r.status, 0, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.ok(r.stderr.includes(`warning: ${inboxFile} is not the file run ${run} read`), r.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]!]);
  assert.ok(fs.readFileSync(inboxFile).equals(resent), 'the re-sent hour is still in the inbox');
  assert.ok(!fs.existsSync(path.join(dir, 'var/state/done', RUNS[0]!)), 'nothing went to done/');
  takeQueueFiles(dir, run);
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.ok(fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!)).equals(resent));
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
});

test('the reflog step after a crash that left a file parked: the run\'s goes to done/, one that came in its place goes back to the inbox without replacing a newer one', () => {
  // A parked file was taken for the run's, whatever it was, and moved to done/.
  const setup = (name: string) => {
    const dir = sub(`parked-${name}-`);
    for (const d of ['inbox', 'state', 'staging']) fs.mkdirSync(path.join(dir, d));
    const reflog = path.join(dir, 'inbox', 'r.reflog');
    fs.writeFileSync(reflog, 'the run read this\n');
    const st = fs.statSync(reflog, { bigint: true });
    const reflogFile = { dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtime_ns: String(st.mtimeNs) };
    const replaced: string[] = [];
    const step = publishSteps(
      { version: 1, run: 'r', staging: path.join(dir, 'staging'), state: path.join(dir, 'state'), reflog, reflogFile, reflogLink: null, queueDir: dir, backlogWarn: 1, queue: [], record: {} as RunRecord },
      { reflogReplaced: (run) => replaced.push(run) },
    ).find((s) => s.name === 'reflog')!;
    const parked = path.join(dir, 'inbox', '.r.reflog.moving');
    const done = path.join(dir, 'state', 'done', 'r.reflog');
    return { dir, reflog, parked, done, step, replaced };
  };
  const inbox = (dir: string) => fs.readdirSync(path.join(dir, 'inbox')).sort();

  // The run's own, parked, and a newcomer at the name: the run's goes to done/, the newcomer stays.
  const a = setup('own');
  fs.renameSync(a.reflog, a.parked);
  fs.writeFileSync(a.reflog, 'newcomer\n');
  a.step.run();
  assert.equal(fs.readFileSync(a.done, 'utf8'), 'the run read this\n');
  assert.deepEqual(inbox(a.dir), ['r.reflog']);
  assert.equal(fs.readFileSync(a.reflog, 'utf8'), 'newcomer\n');

  // A newcomer parked (renamed over the name just before the park), the name free: back there.
  const b = setup('newcomer');
  fs.writeFileSync(b.parked, 'newcomer\n');
  fs.renameSync(b.parked, b.reflog); // over the run's file, as a sender's rename
  fs.renameSync(b.reflog, b.parked);
  b.step.run();
  assert.deepEqual(inbox(b.dir), ['r.reflog']);
  assert.equal(fs.readFileSync(b.reflog, 'utf8'), 'newcomer\n');
  assert.ok(!fs.existsSync(b.done), 'nothing went to done/');
  assert.deepEqual(b.replaced, ['r']);

  // And a newer one renamed to the name since: the newer stays, the parked one goes.
  const c = setup('newer');
  fs.writeFileSync(c.parked, 'newcomer\n');
  fs.writeFileSync(c.reflog, 'newer\n');
  c.step.run();
  assert.deepEqual(inbox(c.dir), ['r.reflog']);
  assert.equal(fs.readFileSync(c.reflog, 'utf8'), 'newer\n');
  assert.ok(!fs.existsSync(c.done));

  // Killed after the newcomer was linked back, before its dot name was removed.
  const d = setup('linked');
  fs.writeFileSync(d.parked, 'newcomer\n');
  fs.rmSync(d.reflog);
  fs.linkSync(d.parked, d.reflog);
  d.step.run();
  assert.deepEqual(inbox(d.dir), ['r.reflog']);
  assert.equal(fs.readFileSync(d.reflog, 'utf8'), 'newcomer\n');
  assert.equal(fs.statSync(d.reflog).nlink, 1);
  assert.ok(!fs.existsSync(d.done));
});

test("the runner repeats every warning of analyze-dump but the cut last line, which it says in its own words", () => {
  // analyze-dump itself, given both: a spill directory of a dead run in its --tmp, and input without a final LF.
  const work = scratch('ms-runner-warn-');
  const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
  const stale = path.join(work, `${SPILL_PREFIX}${dead}-${HOST_TAG}-Ab12Cd`);
  fs.mkdirSync(stale);
  const r = runBin('analyze-dump', ['--tmp', work], '1\t0\t20110728060000\tp\thttp://a.com/\t1', work);
  assert.equal(r.status, 0, r.stderr);
  const ad = readStageLog('analyze-dump', 0, r.stderr);
  assert.equal(ad.summary?.last_line_unterminated, true);
  assert.equal(ad.warnings!.length, 2, r.stderr);
  const ud = { name: 'upload-domains', exit: 0, summary: null, messages: [], warnings: ['domains of an inactive Yacobot'] };
  assert.deepEqual(repeatedWarnings([ad, ud]), [
    { stage: 'analyze-dump', warning: `removed ${stale}, left by a run that was killed (its process has ended)` },
    { stage: 'upload-domains', warning: 'domains of an inactive Yacobot' },
  ]);
});

/**
 * For the tests of what the runner's user may write: the state after the first hour and
 * the second hour in the inbox, in a directory nobody can reach; `giveAway` makes it all
 * nobody's, `asUser` runs the runner as nobody. Null where root cannot become nobody.
 */
async function nobodysSecondHour(): Promise<{ dir: string; giveAway: () => void; asUser: () => SpawnSyncReturns<string> } | null> {
  // The real thing needs another user: root becomes nobody, where the project is reachable by it.
  if (!canRunAsNobody(RUNNER)) return null;
  const work = scratch('ms-runner-perm-');
  fs.chmodSync(work, 0o755);
  const dir = path.join(work, 'd');
  fs.cpSync((await ref1()).dir, dir, { recursive: true, verbatimSymlinks: true });
  fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(dir, 'var/inbox/2011072807.reflog'));
  takeQueueFiles(dir, RUN0);
  return {
    dir,
    giveAway: () => assert.equal(spawnSync('chown', ['-R', 'nobody:nogroup', dir]).status, 0),
    asUser: () => runAsNobody(dir, RUNNER, [], 120_000),
  };
}

test('a place the commit writes that this user cannot (done/ made by root running the runner by hand) fails the invocation before anything runs', async () => {
  const nobody = await nobodysSecondHour();
  if (nobody === null) return;
  const { dir, giveAway, asUser } = nobody;
  const done = path.join(dir, 'var/state/done');
  const before = snapshot(dir);
  // After the snapshot, whose reading of the database (as root) may leave -wal/-shm files.
  giveAway();
  fs.chownSync(done, 0, 0);
  fs.chmodSync(done, 0o755);
  const r = asUser();
  assert.equal(r.status, 1, r.stderr);
  assert.ok(
    r.stderr.includes(`reflog-to-yacobot-queue: ${done}: cannot write here: EACCES; a run's commit writes here (made by another user, such as root running the runner by hand?); nothing was run\n`),
    r.stderr,
  );
  // Before: the run published its queue files, then failed to move its reflog to done/,
  // and every later invocation rolled it forward and failed there again.
  assertSameState(snapshot(dir), before, 'nothing ran');
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/queue/1')), []);
  // A runs.jsonl of this user's own made read-only: no guess at another user.
  giveAway();
  const runs = path.join(dir, 'var/state/runs.jsonl');
  fs.chmodSync(runs, 0o444);
  const own = asUser();
  assert.equal(own.status, 1, own.stderr);
  assert.ok(own.stderr.includes(`reflog-to-yacobot-queue: ${runs}: cannot write here: EACCES; a run's commit writes here; nothing was run\n`), own.stderr);
  // Given back to the user, the hour goes through.
  fs.chmodSync(runs, 0o644);
  const ok = asUser();
  assert.equal(ok.status, 0, ok.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
});

test('QUEUE owned by root with the Yacobot directories given to the runner\'s user, or a Yacobot\'s directory it cannot write that gets nothing, stops no run', async () => {
  // A queue directory is written before COMMIT (copies beside their place), where a failure
  // publishes nothing: it is no place for the check at start, which refused these setups.
  const nobody = await nobodysSecondHour();
  if (nobody === null) return;
  const { dir, giveAway, asUser } = nobody;
  giveAway();
  const queue = path.join(dir, 'var/queue');
  fs.mkdirSync(path.join(queue, '9'));
  for (const d of [queue, path.join(queue, '9')]) {
    fs.chownSync(d, 0, 0);
    fs.chmodSync(d, 0o755);
  }
  const r = asUser();
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
  for (const id of ['1', '2', '3']) assert.ok(fs.existsSync(path.join(queue, id, '2011072807.tsv')), `queue file ${id}/2011072807.tsv`);
  assert.deepEqual(fs.readdirSync(path.join(queue, '9')), []);
});

test('done/ a symbolic link whose target is missing fails the invocation before anything runs; runs.jsonl one into a directory that is there does not', async () => {
  const dir = copyOf((await ref1()).dir);
  fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(dir, 'var/inbox/2011072807.reflog'));
  takeQueueFiles(dir, RUN0);
  const done = path.join(dir, 'var/state/done');
  fs.renameSync(done, path.join(dir, 'done.real'));
  fs.symlinkSync('../../archive/done', done);
  const runsBefore = fs.readFileSync(path.join(dir, 'var/state/runs.jsonl'), 'utf8');
  const r = await runner(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(
    r.stderr.includes(
      `reflog-to-yacobot-queue: ${done}: is a symbolic link, and its target ../../archive/done is missing: a run's commit writes there (restore it, or remove the link); nothing was run\n`,
    ),
    r.stderr,
  );
  // Before: the run published its queue files, then failed to move its reflog there (ENOENT),
  // and every later invocation rolled it forward and failed there again.
  // (snapshot does not take the dangling link: what nothing ran leaves, one by one.)
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), ['2011072807.reflog']);
  for (const id of ['1', '2', '3']) assert.deepEqual(fs.readdirSync(path.join(dir, 'var/queue', id)), [], `queue ${id}`);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), []);
  assert.equal(fs.readFileSync(path.join(dir, 'var/state/runs.jsonl'), 'utf8'), runsBefore);
  // Its target made, the hour goes through; a runs.jsonl link whose file is not there yet is created.
  fs.mkdirSync(path.join(dir, 'archive/done'), { recursive: true });
  const runs = path.join(dir, 'var/state/runs.jsonl');
  fs.renameSync(runs, path.join(dir, 'archive/runs.jsonl.old'));
  fs.symlinkSync('../../archive/runs.jsonl', runs);
  const ok = await runner(dir);
  assert.equal(ok.status, 0, ok.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'archive/done')), ['2011072807.reflog']);
  assert.equal(fs.readFileSync(path.join(dir, 'archive/runs.jsonl'), 'utf8').split('\n').length, 2);
});

test('a reflog whose name starts with ten digits that are no real hour (2011072824) waits in the inbox with a warning, not run on the clock', async () => {
  // On the clock's now (years after its hour) filter-url would have dropped all of current_log.
  const dir = freshFirstOnly();
  const inbox = path.join(dir, 'var/inbox');
  for (const name of ['2011072824', '2011023112-b']) fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(inbox, `${name}.reflog`));
  const r = await runner(dir, ['--keep', '10h']);
  assert.equal(r.status, 0, r.stderr);
  for (const [name, digits] of [['2011072824', '2011072824'], ['2011023112-b', '2011023112']]) {
    assert.ok(
      r.stderr.includes(
        `reflog-to-yacobot-queue: warning: skipping ${path.join(inbox, `${name}.reflog`)}: its name starts with ${digits}, which is no real hour (YYYYMMDDhh): a typo in the name? ` +
          "Its now would be this machine's clock, and current_log would forget every URL not seen since --keep before that; rename it (or give --now)\n",
      ),
      r.stderr,
    );
  }
  assert.deepEqual(fs.readdirSync(inbox).sort(), ['2011023112-b.reflog', '2011072824.reflog']);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[RUN0, 'ok']]);
  assert.equal(notAnHour('2011072823'), null);
  assert.equal(notAnHour('batch-7'), null, 'a name that starts with no ten digits runs on the clock');
  // Ten digits that do not read as an hour stamp (epoch seconds, a sequence number) run on the clock too.
  for (const name of ['1311836400', '0000000042', '2011130100', '2011073224', '2011072830']) assert.equal(notAnHour(name), null, name);
  for (const name of ['2011022912', '2011043112x', '2011072829']) assert.notEqual(notAnHour(name), null, name);
  // --now decides the now by itself: they run.
  const now = await runner(dir, ['--now', '20110728090000', '--keep', '10h']);
  assert.equal(now.status, 0, now.stderr);
  assert.deepEqual(fs.readdirSync(inbox), []);
});

test('a reflog named for an hour that has not begun (a typo: 2107 for 2011) waits in the inbox with a warning; the others run', async () => {
  // Run, its now would have made filter-url drop all of current_log: every URL sent again after it.
  const dir = freshFirstOnly();
  const h = 3_600_000;
  const ahead = formatTimestamp(new Date(Date.now() + 3 * h)).slice(0, 10);
  const future = path.join(dir, 'var/inbox', `${ahead}.reflog`);
  fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), future);
  const r = await runner(dir, ['--keep', '10h']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(
      `reflog-to-yacobot-queue: warning: skipping ${future}: its hour \\(${ahead}0000\\) has not begun by this machine's clock \\(\\d{14}\\): a typo in the name\\? ` +
        `Run now, it would make current_log forget every URL last seen before \\d{14}; it runs once its hour has begun \\(or rename it\\)\\n`,
    ),
  );
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [`${ahead}.reflog`]);
  assert.deepEqual(runsJsonl(dir).map((x) => [x.run, x.status]), [[RUN0, 'ok']]);
  // An hour that has begun runs; --now decides the now by itself, so it runs too.
  assert.equal(hourNotBegun(formatTimestamp(new Date()).slice(0, 10), new Date(), h), null);
  assert.equal(hourNotBegun('x2107072806', new Date(), h), null, 'a name that starts with no hour');
  // Alone in the inbox, it is not "nothing to do".
  const alone = await runner(dir);
  assert.equal(alone.status, 0, alone.stderr);
  assert.ok(alone.stderr.endsWith(`reflog-to-yacobot-queue: nothing run: the 1 *.reflog file(s) in ${path.join(dir, 'var/inbox')} were skipped (see the warnings above)\n`), alone.stderr);
  const now = await runner(dir, ['--now', '20110728090000', '--keep', '10h']);
  assert.equal(now.status, 0, now.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
});
