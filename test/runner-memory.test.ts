// The memory of what was sent is checked, not trusted (SPEC "Runs"): current_log emptied,
// cut or put back older is refused before the chain reads it (exit 1, nothing published,
// the reflog stays), naming the backup that matches and the command that restores it;
// restored that way, the run gives what an untouched state gives. The replay warning's
// reference lives in the state, so rotating runs.jsonl does not silence it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { hasStackTrace } from './lib/run.js';
import { assertSameState, runsJsonl, snapshot } from './lib/runner-state.js';
import { RUNS, copyOf, fresh, keepOnly, runner, takeQueueFiles, twoHoursCommitted, warningLines, writeReflog } from './lib/runner.js';

const [, R1, R2] = RUNS.map((f) => f.replace(/\.reflog$/, '')) as [string, string, string];

/** Runs the runner in `dir`; returns its exit status and stderr (never a stack trace). */
async function run(dir: string, args: string[] = []): Promise<{ status: number | null; stderr: string }> {
  const r = await runner(dir, args);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  return r;
}

/** A state with R0 then R1 committed (each by its own invocation) and R2 waiting; DIR/older is current_log as R0 left it. */
let base: string | null = null;
async function baseState(): Promise<string> {
  base ??= await twoHoursCommitted([], 'current_log');
  return base;
}

/** The queue files of run `run` in `dir`. */
function queueFilesOf(dir: string, run: string): string[] {
  const q = path.join(dir, 'var/queue');
  if (!fs.existsSync(q)) return [];
  return fs.readdirSync(q).flatMap((id) =>
    fs
      .readdirSync(path.join(q, id))
      .filter((f) => f.startsWith(run))
      .map((f) => path.join(id, f)),
  );
}

describe('a checked memory', () => {
  const slips: [string, (current: string, dir: string) => void][] = [
    [': > current_log', (current) => fs.writeFileSync(current, '')],
    ['cut to half', (current) => fs.truncateSync(current, Math.floor(fs.statSync(current).size / 2))],
    ['an older copy put back', (current, dir) => fs.copyFileSync(path.join(dir, 'older'), current)],
  ];
  for (const [what, slip] of slips) {
    test(`${what}: refused (exit 1, nothing published, the reflog stays), naming the backup and the command; restored that way, the untouched run's result`, async () => {
      const clean = copyOf(await baseState());
      assert.equal((await run(clean)).status, 0);
      const dir = copyOf(await baseState());
      const state = path.join(dir, 'var/state');
      const current = path.join(state, 'current_log');
      const backup = path.join(state, 'current_log.last');
      assert.notEqual(fs.statSync(backup).ino, fs.statSync(current).ino, 'the backup is a copy, not a hard link');
      const before = fs.readFileSync(backup);
      slip(current, dir);
      assert.deepEqual(fs.readFileSync(backup), before, 'the backup is untouched by the slip');
      const r = await run(dir);
      assert.equal(r.status, 1, r.stderr);
      const message = r.stderr.split('\n').find((l) => l.includes(`run ${R2} failed:`));
      assert.ok(message, r.stderr);
      assert.ok(message.includes(`${current}: not what the commit of run ${R1} left (`), message);
      const restore = /restore it with '([^']+)'/.exec(message);
      assert.ok(restore, message);
      assert.equal(restore[1], `cp -p ${backup} ${current}`);
      assert.match(message, /or, to go on with current_log as it is, run once with --reset-current-log/);
      assert.match(r.stderr, /nothing of it was published; 1 reflog\(s\) stay in/);
      assert.deepEqual(queueFilesOf(dir, R2), [], 'nothing published');
      assert.ok(fs.existsSync(path.join(dir, 'var/inbox', RUNS[2]!)), 'the reflog stays');
      assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'current_log');
      // As the message says.
      assert.equal(spawnSync('sh', ['-c', restore[1]!]).status, 0);
      const again = await run(dir);
      assert.equal(again.status, 0, again.stderr);
      assertSameState(snapshot(dir), snapshot(clean), `${what}, restored`);
    });
  }

  test('no backup matches: the message says so; --reset-current-log goes on with current_log as it is, with a warning', async () => {
    const dir = copyOf(await baseState());
    const state = path.join(dir, 'var/state');
    fs.writeFileSync(path.join(state, 'current_log'), '');
    fs.writeFileSync(path.join(state, 'current_log.last'), '');
    const r = await run(dir);
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      /found 0 bytes, 0 URLs, sha256 e3b0c44298fc: emptied\): .*no copy here matches it \(.*current_log\.last neither\): restore current_log from a backup of that run/,
    );
    const reset = await run(dir, ['--reset-current-log']);
    assert.equal(reset.status, 0, reset.stderr);
    assert.match(
      reset.stderr,
      new RegExp(`warning: ${R2}: .*current_log is not what the last commit left; going on with it as it is \\(--reset-current-log\\)`),
    );
    // Committed, it is the memory again: the next hour runs unwarned.
    writeReflog(dir, '2011072809', [['20110728093000', 'http://a.example/x']]);
    const next = await run(dir);
    assert.equal(next.status, 0, next.stderr);
    assert.deepEqual(warningLines(next.stderr), []);
  });

  test('the replay warning survives the rotation of runs.jsonl: its reference is in the state', async () => {
    const dir = fresh();
    keepOnly(dir);
    writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
    writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
    assert.equal((await run(dir)).status, 0);
    const memory = JSON.parse(fs.readFileSync(path.join(dir, 'var/state/memory.json'), 'utf8')) as { forgetful: unknown };
    assert.deepEqual(memory.forgetful, { run: '2011072808', now: '20110728090000', keepMs: 3_600_000 });
    fs.renameSync(path.join(dir, 'var/state/runs.jsonl'), path.join(dir, 'var/state/runs.jsonl.1')); // logrotate's create
    takeQueueFiles(dir, '2011072806');
    fs.renameSync(path.join(dir, 'var/state/done/2011072806.reflog'), path.join(dir, 'var/inbox/2011072806.reflog'));
    const r = await run(dir);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(warningLines(r.stderr), [
      'reflog-to-yacobot-queue: warning: 2011072806: its now (20110728070000) is 2h older than that of run 2011072808 (20110728090000), which ran with --keep 1h: ' +
        'current_log has forgotten the URLs last seen up to 20110728080000, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)',
    ]);
    assert.equal(runsJsonl(dir).at(-1)!.sent, 1, 'a.example/x sent again, as warned');
  });
});
