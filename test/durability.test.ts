// What a power cut right after a stage's exit must not undo: each file a stage
// publishes by rename (logsaver's queue files, filter-url's --current-out,
// upload-domains' --map) is fsynced before the rename, and its directory after it
// (and the parent of a directory the stage made). Seen through strace, where the
// machine has it and allows ptrace; the runner's own commit is checked in
// reflog-to-yacobot-queue.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BIN, partnerDb, scratch, testEnv } from './lib/run.js';

const straceWorks = spawnSync('strace', ['-qq', '-e', 'trace=none', 'true']).status === 0;

interface Call {
  call: string;
  /** The absolute paths the call names: fsync's file, rename's source and target. */
  paths: string[];
}

/** Runs `bin/stage args < input` in `cwd` under strace; returns its successful fsync/rename/mkdir calls in order. */
function traced(cwd: string, stage: string, args: string[], input: string): Call[] {
  const log = path.join(cwd, '.strace');
  const r = spawnSync('strace', ['-f', '-y', '-qq', '-e', 'trace=fsync,fdatasync,rename,renameat,renameat2,mkdir,mkdirat', '-o', log, path.join(BIN, stage), ...args], {
    cwd,
    input,
    env: testEnv(),
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(r.status, 0, `${stage}: ${r.stderr}`);
  const calls: Call[] = [];
  for (const line of fs.readFileSync(log, 'utf8').split('\n')) {
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

/** Asserts that `final` was published durably: fsync of its temporary file, rename over it, fsync of its directory, in that order. */
function assertDurable(calls: Call[], final: string, what: string): void {
  const rename = calls.findIndex((c) => c.call === 'rename' && c.paths[1] === final);
  assert.ok(rename >= 0, `${what}: renamed into place`);
  const tmp = calls[rename]!.paths[0]!;
  const synced = calls.findIndex((c) => (c.call === 'fsync' || c.call === 'fdatasync') && c.paths[0] === tmp);
  assert.ok(synced >= 0 && synced < rename, `${what}: ${path.basename(tmp)} fsynced before the rename`);
  const dir = calls.findIndex((c, i) => i > rename && c.call === 'fsync' && c.paths[0] === path.dirname(final));
  assert.ok(dir > rename, `${what}: its directory fsynced after the rename`);
}

test('logsaver: every queue file is fsynced, renamed, then its directory fsynced; so is the parent of a directory it made', { skip: !straceWorks && 'no working strace here' }, () => {
  const work = fs.realpathSync(scratch('ms-dur-'));
  const input = ['1', '2', '1'].map((y, i) => `${y}\t${(i + 1).toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\thttp://a.com/${i}\n`).join('');
  const calls = traced(work, 'logsaver', ['--queue-dir', 'q/new', '--name', 'r'], input);
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

test('filter-url --current-out and upload-domains --map: fsynced, renamed, then the directory fsynced (through a symlink: the target\'s)', { skip: !straceWorks && 'no working strace here' }, () => {
  const work = fs.realpathSync(scratch('ms-dur-'));
  fs.mkdirSync(path.join(work, 'state'));
  fs.symlinkSync('state/cl', path.join(work, 'cl-link'));
  const joined = '0000000000000001\ta.com\thttp://a.com/\t-\t20110101000000\t\t\t-\t1\n';
  assertDurable(traced(work, 'filter-url', ['--now', '20110101010000', '--current-out', 'cl-link'], joined), path.join(work, 'state/cl'), 'current_log');
  partnerDb(work, 'p.db', 'init');
  partnerDb(work, 'p.db', 'add', 'a');
  const rec = '0000000000000001\t20110728060000\t\t1\tnew.com\thttp://new.com/\n';
  assertDurable(traced(work, 'upload-domains', ['--db', 'p.db', '--map', 'state/map', '--now', '20110728070000'], rec), path.join(work, 'state/map'), 'domain_map');
});
