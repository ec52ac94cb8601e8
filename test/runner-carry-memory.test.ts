// The carry is memory too (SPEC "Runs"): the URLs waiting under a cap are counted as sent
// in current_log, so a carry emptied, cut, with lines removed, put back older or deleted
// is refused before the chain reads it (exit 1, nothing published, the reflog stays),
// naming the backup that matches and the command that restores it; restored that way,
// the run gives what an untouched state gives. A carry missing where none was left is
// no fault.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { hasStackTrace } from './lib/run.js';
import { assertSameState, runsJsonl, snapshot } from './lib/runner-state.js';
import { REFLOGS, RUNS, copyOf, fresh, keepOnly, runner, twoHoursCommitted, warningLines, writeReflog } from './lib/runner.js';

const [, R1, R2] = RUNS.map((f) => f.replace(/\.reflog$/, '')) as [string, string, string];
const CAP = ['--max-per-domain', '2'];

/** Runs the runner in `dir`; returns its exit status and stderr (never a stack trace). */
async function run(dir: string, args: string[] = CAP): Promise<{ status: number | null; stderr: string }> {
  const r = await runner(dir, args);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  return r;
}

/** STATE/memory.json of `dir`. */
const memoryOf = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'var/state/memory.json'), 'utf8')) as { carry?: unknown };

/** A capped state with R0 then R1 committed (each by its own invocation) and R2 waiting; DIR/older is the carry R0 left. */
let base: string | null = null;
async function baseState(): Promise<string> {
  if (base !== null) return base;
  const dir = await twoHoursCommitted(CAP, 'carry');
  const carry = fs.readFileSync(path.join(dir, 'var/state/carry'));
  assert.ok(carry.length > 0 && !carry.equals(fs.readFileSync(path.join(dir, 'older'))), 'URLs wait, others than after R0');
  base = dir;
  return dir;
}

/** A copy of the base state with STATE/`names` emptied; returns it and its state directory. */
async function emptied(...names: string[]): Promise<{ dir: string; state: string }> {
  const dir = copyOf(await baseState());
  const state = path.join(dir, 'var/state');
  for (const n of names) fs.writeFileSync(path.join(state, n), '');
  return { dir, state };
}

/** The base state's R2 run untouched: what a restored state must give. */
let clean: string | null = null;
async function cleanRun(): Promise<string> {
  if (clean !== null) return clean;
  const dir = copyOf(await baseState());
  assert.equal((await run(dir)).status, 0);
  clean = dir;
  return dir;
}

/** The queue files of run `run` in `dir`, by path under the queue directory, with their bytes. */
function queueFilesOf(dir: string, run: string): Map<string, Buffer> {
  const q = path.join(dir, 'var/queue');
  const out = new Map<string, Buffer>();
  for (const id of fs.existsSync(q) ? fs.readdirSync(q) : []) {
    for (const f of fs.readdirSync(path.join(q, id)).filter((n) => n.includes(run))) out.set(path.join(id, f), fs.readFileSync(path.join(q, id, f)));
  }
  return out;
}

/** The run of `dir` that fails on its carry: its message, after the common checks (exit 1, nothing published, the reflog stays, failed at 'carry'). */
async function refused(dir: string): Promise<string> {
  const r = await run(dir);
  assert.equal(r.status, 1, r.stderr);
  const message = r.stderr.split('\n').find((l) => l.includes(`run ${R2} failed:`));
  assert.ok(message, r.stderr);
  assert.match(r.stderr, /nothing of it was published; 1 reflog\(s\) stay in/);
  assert.deepEqual([...queueFilesOf(dir, R2).keys()], [], 'nothing published');
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox', RUNS[2]!)), 'the reflog stays');
  assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'carry');
  return message;
}

describe('the carry is checked memory', () => {
  const slips: [string, (carry: string, dir: string) => void][] = [
    [': > carry', (carry) => fs.writeFileSync(carry, '')],
    ['cut mid-line', (carry) => fs.truncateSync(carry, Math.floor(fs.statSync(carry).size / 2))],
    [
      'lines removed',
      (carry) =>
        fs.writeFileSync(
          carry,
          fs
            .readFileSync(carry, 'utf8')
            .split('\n')
            .filter((_, i) => i % 3 !== 1)
            .join('\n'),
        ),
    ],
    ['an older copy put back', (carry, dir) => fs.copyFileSync(path.join(dir, 'older'), carry)],
    ['deleted', (carry) => fs.rmSync(carry)],
  ];
  for (const [what, slip] of slips) {
    test(`${what}: refused (exit 1, nothing published, the reflog stays), naming the backup and the command; restored that way, the untouched run's queue files byte for byte`, async () => {
      const clean = await cleanRun();
      const dir = copyOf(await baseState());
      const carry = path.join(dir, 'var/state/carry');
      const backup = path.join(dir, 'var/state/carry.last');
      assert.notEqual(fs.statSync(backup).ino, fs.statSync(carry).ino, 'the backup is a copy, not a hard link');
      const before = fs.readFileSync(backup);
      slip(carry, dir);
      const message = await refused(dir);
      assert.deepEqual(fs.readFileSync(backup), before, 'the backup is untouched by the slip');
      assert.ok(message.includes(`${carry}: not what the commit of run ${R1} left (`), message);
      assert.match(message, /which current_log has as sent, and what it lost would not be sent/);
      const restore = /restore it with '([^']+)'/.exec(message);
      assert.ok(restore, message);
      assert.equal(restore[1], `cp -p ${backup} ${carry}`);
      assert.match(message, /or, to go on with the carry as it is, run once with --reset-current-log/);
      // As the message says.
      assert.equal(spawnSync('sh', ['-c', restore[1]!]).status, 0);
      const again = await run(dir);
      assert.equal(again.status, 0, again.stderr);
      const want = queueFilesOf(clean, R2);
      assert.ok(want.size > 0);
      assert.deepEqual(queueFilesOf(dir, R2), want);
      assertSameState(snapshot(dir), snapshot(clean), `${what}, restored`);
    });
  }

  test('no backup matches: the message says so; --reset-current-log goes on with the carry as it is, with a warning', async () => {
    const { dir, state } = await emptied('carry', 'carry.last');
    const message = await refused(dir);
    assert.match(
      message,
      /found 0 bytes, 0 URLs, sha256 e3b0c44298fc: emptied\): .*no copy here matches it \(.*carry\.last neither\): restore the carry from a backup of that run/,
    );
    const reset = await run(dir, [...CAP, '--reset-current-log']);
    assert.equal(reset.status, 0, reset.stderr);
    assert.deepEqual(warningLines(reset.stderr), [
      `reflog-to-yacobot-queue: warning: ${R2}: ${path.join(state, 'carry')} is not what the last commit left; going on with it as it is (--reset-current-log): the URLs it lost are not sent`,
    ]);
    assert.equal(runsJsonl(dir).at(-1)!.carried_in, 0);
    // Committed, it is the memory again: the next hour runs unwarned.
    writeReflog(dir, '2011072809', [['20110728093000', 'http://a.example/x']]);
    const next = await run(dir);
    assert.equal(next.status, 0, next.stderr);
    assert.deepEqual(warningLines(next.stderr), []);
  });

  test('current_log and the carry both damaged: one message names both', async () => {
    const { dir, state } = await emptied('carry', 'current_log');
    const r = await run(dir);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'current_log');
    const message = r.stderr.split('\n').find((l) => l.includes(`run ${R2} failed:`))!;
    assert.ok(message.includes(`'cp -p ${path.join(state, 'current_log.last')} ${path.join(state, 'current_log')}'`), message);
    assert.ok(message.includes(`'cp -p ${path.join(state, 'carry.last')} ${path.join(state, 'carry')}'`), message);
  });
});

describe('a missing carry', () => {
  test('no fault where none was left: a state never capped, then the first capped run; nor where the carry left was empty', async () => {
    const dir = fresh();
    keepOnly(dir, RUNS[0]!);
    assert.equal((await run(dir, [])).status, 0);
    assert.equal(memoryOf(dir).carry, null, 'the commit left no carry');
    assert.ok(!fs.existsSync(path.join(dir, 'var/state/carry')));
    fs.copyFileSync(path.join(REFLOGS, RUNS[1]!), path.join(dir, 'var/inbox', RUNS[1]!));
    const capped = await run(dir, [...CAP, '--accept-settings-change']);
    assert.equal(capped.status, 0, capped.stderr);
    const carry = fs.readFileSync(path.join(dir, 'var/state/carry'));
    assert.ok(carry.length > 0);
    assert.deepEqual(fs.readFileSync(path.join(dir, 'var/state/carry.last')), carry);
    assert.equal((memoryOf(dir).carry as { size: number }).size, carry.length);
    // The cap taken off drains the carry; an empty carry removed loses nothing.
    writeReflog(dir, '2011072809', [['20110728093000', 'http://a.example/x']]);
    assert.equal((await run(dir, ['--accept-settings-change'])).status, 0);
    assert.equal(fs.readFileSync(path.join(dir, 'var/state/carry'), 'utf8'), '');
    fs.rmSync(path.join(dir, 'var/state/carry'));
    writeReflog(dir, '2011072810', [['20110728103000', 'http://a.example/y']]);
    const r = await run(dir, []);
    assert.equal(r.status, 0, r.stderr);
  });

  test('a carry where the commit left none, or missing from a state recorded before the carry was checked, fails', async () => {
    const never = fresh();
    keepOnly(never, RUNS[0]!);
    assert.equal((await run(never, [])).status, 0);
    fs.copyFileSync(path.join(await baseState(), 'older'), path.join(never, 'var/state/carry'));
    fs.copyFileSync(path.join(REFLOGS, RUNS[1]!), path.join(never, 'var/inbox', RUNS[1]!));
    const put = await run(never, []);
    assert.equal(put.status, 1, put.stderr);
    assert.match(put.stderr, /carry: not what the commit of run \S+ left \(no carry; found \d+ bytes, \d+ URLs, .*: put here from elsewhere/);
    // memory.json without the carry's identity (a runner before it), a cap stored: missing is a loss.
    const dir = copyOf(await baseState());
    const memory = path.join(dir, 'var/state/memory.json');
    const { carry: _, ...rest } = memoryOf(dir);
    fs.writeFileSync(memory, JSON.stringify(rest) + '\n');
    assert.equal((await run(copyOf(dir))).status, 0, 'the carry there: no fault');
    fs.rmSync(path.join(dir, 'var/state/carry'));
    const message = await refused(dir);
    assert.match(message, /carry: missing, though a run with --max-per-domain was committed here: .*Restore it from a backup, then run again/);
  });
});
