// What a power cut right after a stage's exit must not undo: each file a stage
// publishes by rename (logsaver's queue files, filter-url's --current-out,
// upload-domains' --map) is fsynced before the rename, and its directory after it
// (and the parent of a directory the stage made). Seen through strace, where the
// machine has it and allows ptrace; the runner's own commit is checked in
// runner-commit.test.ts and runner-recovery.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BIN, ROOT, RUNNER, listFiles, madeDb, scratch, testEnv } from './lib/run.js';

const straceWorks = spawnSync('strace', ['-qq', '-e', 'trace=none', 'true']).status === 0;

interface Call {
  call: string;
  /** The absolute paths the call names: fsync's file, rename's source and target. */
  paths: string[];
}

/** Runs `argv` with `input` on stdin in `cwd` under strace (it must exit `status`); returns its successful fsync/rename/mkdir/unlink calls in order. */
function traced(cwd: string, argv: string[], input = '', status = 0): Call[] {
  const log = path.join(cwd, '.strace');
  const r = spawnSync(
    'strace',
    ['-f', '-y', '-qq', '-e', 'trace=fsync,fdatasync,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat', '-o', log, ...argv],
    {
      cwd,
      input,
      env: testEnv(),
      encoding: 'utf8',
      timeout: 120_000,
      killSignal: 'SIGKILL',
    },
  );
  assert.equal(r.status, status, `${argv.join(' ')}: ${r.stderr}`);
  const calls: Call[] = [];
  for (const line of fs.readFileSync(log, 'utf8').split('\n')) {
    // Only whole lines: a call another process interrupted ("<unfinished ...>") is not needed here.
    const m = /^\d+\s+(\w+)\((.*)\)\s+= 0$/.exec(line);
    if (!m) continue;
    const [, call, argText] = m as unknown as [string, string, string];
    const fd = /^\d+<([^>]*)>/.exec(argText);
    const strings = [...argText.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((s) => s[1]!);
    const paths = fd ? [fd[1]!] : strings.map((s) => path.resolve(cwd, s));
    calls.push({ call: call.replace(/at2?$/, ''), paths });
  }
  fs.rmSync(log);
  return calls;
}

const stage = (name: string, ...args: string[]) => [path.join(BIN, name), ...args];

/**
 * Asserts that `final` was published durably: fsync of its temporary file, rename
 * over it, fsync of its directory, in that order. `strict`: the directory's fsync
 * also comes before the next rename or unlink (the runner's steps, one at a time).
 */
function assertDurable(calls: Call[], final: string, what: string, strict = false): number {
  const rename = calls.findIndex((c) => c.call === 'rename' && c.paths[1] === final);
  assert.ok(rename >= 0, `${what}: renamed into place`);
  const tmp = calls[rename]!.paths[0]!;
  const synced = calls.findIndex((c) => (c.call === 'fsync' || c.call === 'fdatasync') && c.paths[0] === tmp);
  assert.ok(synced >= 0 && synced < rename, `${what}: ${path.basename(tmp)} fsynced before the rename`);
  assertSyncedAfter(calls, rename, path.dirname(final), what, strict);
  return rename;
}

/** Asserts that `dir` is fsynced after call `i` (and, `strict`, before the next rename or unlink). */
function assertSyncedAfter(calls: Call[], i: number, dir: string, what: string, strict = false): void {
  const next = strict ? calls.findIndex((c, j) => j > i && (c.call === 'rename' || c.call === 'unlink')) : -1;
  const synced = calls.findIndex((c, j) => j > i && (next < 0 || j < next) && c.call === 'fsync' && c.paths[0] === dir);
  assert.ok(synced > i, `${what}: ${dir} fsynced after it${strict ? ', before the next step' : ''}`);
}

test('logsaver: every queue file is fsynced, renamed, then its directory fsynced; so is the parent of a directory it made', {
  skip: !straceWorks && 'no working strace here',
}, () => {
  const work = fs.realpathSync(scratch('ms-dur-'));
  const input = ['1', '2', '1'].map((y, i) => `${y}\t${(i + 1).toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\thttp://a.com/${i}\n`).join('');
  const calls = traced(work, stage('logsaver', '--queue-dir', 'q/new', '--name', 'r'), input);
  for (const y of ['1', '2']) assertDurable(calls, path.join(work, 'q/new', y, 'r.tsv'), `queue file ${y}`);
  const lastRename = calls.map((c) => c.call).lastIndexOf('rename');
  for (const made of ['q', 'q/new', 'q/new/1', 'q/new/2']) {
    const parent = path.dirname(path.join(work, made));
    assert.ok(
      calls.some((c, i) => i > lastRename && c.call === 'fsync' && c.paths[0] === parent),
      `${made} was made: ${path.relative(work, parent) || '.'} fsynced after the files were in place`,
    );
  }
});

test("filter-url --current-out and upload-domains --map: fsynced, renamed, then the directory fsynced (through a symlink: the target's)", {
  skip: !straceWorks && 'no working strace here',
}, () => {
  const work = fs.realpathSync(scratch('ms-dur-'));
  fs.mkdirSync(path.join(work, 'state'));
  fs.symlinkSync('state/cl', path.join(work, 'cl-link'));
  const joined = '0000000000000001\ta.com\thttp://a.com/\t-\t20110101000000\t\t\t-\t1\n';
  assertDurable(traced(work, stage('filter-url', '--now', '20110101010000', '--current-out', 'cl-link'), joined), path.join(work, 'state/cl'), 'current_log');
  madeDb(work, 'p.db', [['add', 'a']]);
  const rec = '0000000000000001\t20110728060000\t\t1\tnew.com\thttp://new.com/\n';
  assertDurable(
    traced(work, stage('upload-domains', '--db', 'p.db', '--map', 'state/map', '--now', '20110728070000'), rec),
    path.join(work, 'state/map'),
    'domain_map',
  );
});

test('a directory fsync that fails (EIO, injected by strace) fails the stage, naming the directory: the rename is not durable', {
  skip: !straceWorks && 'no working strace here',
}, () => {
  // They once ignored any error of the directory's fsync, and exited 0.
  const work = fs.realpathSync(scratch('ms-dur-'));
  const failing = (dir: string, argv: string[], input: string) =>
    spawnSync('strace', ['-f', '-qq', '-o', '/dev/null', '-P', dir, '-e', 'trace=fsync', '-e', 'inject=fsync:error=EIO', ...argv], {
      cwd: work,
      input,
      env: testEnv(),
      encoding: 'utf8',
      timeout: 60_000,
      killSignal: 'SIGKILL',
    });
  fs.mkdirSync(path.join(work, 'q/1'), { recursive: true });
  const r = failing(
    path.join(work, 'q/1'),
    stage('logsaver', '--queue-dir', 'q', '--name', 'r'),
    `1\t${'1'.padStart(16, '0')}\t20110728060000\t\t1\ta.com\thttp://a.com/\n`,
  );
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^logsaver: q\/1: cannot fsync: EIO/m);
  fs.mkdirSync(path.join(work, 'state'));
  const joined = '0000000000000001\ta.com\thttp://a.com/\t-\t20110101000000\t\t\t-\t1\n';
  const f = failing(path.join(work, 'state'), stage('filter-url', '--now', '20110101010000', '--current-out', 'state/cl'), joined);
  assert.equal(f.status, 1, f.stderr);
  assert.match(f.stderr, /^filter-url: state: cannot fsync: EIO/m);
});

test('the runner: everything staged is fsynced before COMMIT, and each publish step is made durable before the next', {
  skip: !straceWorks && 'no working strace here',
}, () => {
  const work = fs.realpathSync(scratch('ms-dur-'));
  const runs = ['2011072806', '2011072807'];
  fs.mkdirSync(path.join(work, 'var/inbox'), { recursive: true });
  fs.mkdirSync(path.join(work, 'var/state'));
  for (const run of runs) fs.copyFileSync(path.join(ROOT, 'fixtures/reflogs', `${run}.reflog`), path.join(work, 'var/inbox', `${run}.reflog`));
  madeDb(work, 'var/state/partner.db', [
    ['add', 'a'],
    ['add', 'b'],
  ]);
  const calls = traced(work, [RUNNER, '--now', '20110728080000']);
  const v = (rel: string) => path.join(work, 'var', rel);
  // The state's identity, made at the start and moved to a new incarnation at the first claim.
  assertDurable(calls, v('state/identity.json'), 'identity.json');
  // The first run makes state/ files and directories; the second finds them all there.
  for (const run of runs) {
    const staging = v(`state/staging/${run}`);
    const commit = path.join(staging, 'COMMIT');
    const committed = assertDurable(calls, commit, `${run}: COMMIT`, true);
    const uncommitted = calls.findIndex((c) => c.call === 'unlink' && c.paths[0] === commit);
    assert.ok(uncommitted > committed, `${run}: COMMIT removed`);
    const inRun = (i: number, what: string) => assert.ok(i > committed && i < uncommitted, `${run}: ${what} between COMMIT and its removal`);
    // Each staged file that will be published was fsynced (its last write done) before COMMIT.
    const queues = listFiles(v('queue')).filter((f) => f.endsWith(`/${run}.tsv`));
    assert.ok(queues.length >= 2, `queue files: ${queues}`);
    for (const staged of ['current_log', ...queues.map((q) => `queue/${q}`)]) {
      const f = path.join(staging, 'work', staged);
      const last = calls.map((c, i) => (c.call === 'fsync' && c.paths[0] === f && i < committed ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
      assert.ok(last >= 0, `${run}: staged ${staged} fsynced before COMMIT`);
    }
    for (const f of [...queues.map((q) => `queue/${q}`), 'state/current_log']) {
      const published = calls.findIndex((c, i) => i > committed && c.call === 'rename' && c.paths[1] === v(f));
      inRun(published, f);
      assert.ok(
        calls.some((c, i) => i < published && c.call === 'fsync' && c.paths[0] === calls[published]!.paths[0]),
        `${run}: ${f}'s source fsynced before its rename`,
      );
      assertSyncedAfter(calls, published, path.dirname(v(f)), `${run}: ${f}`, true);
    }
    const appended = calls.findIndex((c, i) => i > committed && c.call === 'fsync' && c.paths[0] === v('state/runs.jsonl'));
    inRun(appended, 'runs.jsonl fsynced');
    if (run === runs[0]) assertSyncedAfter(calls, appended, v('state'), `${run}: runs.jsonl was made`, true);
    // The reflog is the producer's file, not rewritten: its move is made durable on both sides.
    const moved = calls.findIndex((c) => c.call === 'rename' && c.paths[1] === v(`state/done/${run}.reflog`));
    inRun(moved, 'the reflog moved to done/');
    for (const dir of ['state/done', 'inbox']) assertSyncedAfter(calls, moved, v(dir), `${run}: the reflog moved`, true);
    assertSyncedAfter(calls, uncommitted, staging, `${run}: COMMIT's removal`);
  }
});

test("the runner: the mark that a committed run's summary line was printed (an error stopped its publish steps) is made durable", {
  skip: !straceWorks && 'no working strace here',
}, () => {
  // Written without fsync, it could be lost to a power cut after the invocation had
  // printed the line, and the roll forward printed it again.
  const work = fs.realpathSync(scratch('ms-dur-'));
  const run = '2011072806';
  fs.mkdirSync(path.join(work, 'var/inbox'), { recursive: true });
  fs.mkdirSync(path.join(work, `var/state/done/${run}.reflog`), { recursive: true }); // in the way: the reflog step fails
  fs.copyFileSync(path.join(ROOT, 'fixtures/reflogs', `${run}.reflog`), path.join(work, 'var/inbox', `${run}.reflog`));
  madeDb(work, 'var/state/partner.db', [['add', 'a']]);
  const calls = traced(work, [RUNNER, '--now', '20110728080000'], '', 1);
  assertDurable(calls, path.join(work, 'var/state/staging', run, 'reported'), 'reported');
});
