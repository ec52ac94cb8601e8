// The cron runner's move of a run's reflog to STATE/done/: archives kept, links followed, and a
// reflog renamed over the inbox name never lost.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, hasStackTrace } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import type { RunRecord } from '../src/runner/state/run-record.js';
import { publishSteps } from '../src/runner/commit/protocol.js';
import { countLines } from '../src/core/lines.js';
import { REFLOGS, RUNS, type Done, runner, sub, fresh, keepOnly, RUN0, freshFirstOnly, copyOf, ref1, takeQueueFiles, warningLines } from './lib/runner.js';

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

/** A scratch dir whose inbox holds one generated 60,000-line reflog (more than 4 MiB), 2011072806. */
/** Rewrites run `run`'s COMMIT marker as a runner from before `field` was recorded wrote it (the field must be there). */
function asOlderCommit(dir: string, run: string, field: 'reflogFile' | 'reflogLink'): void {
  const marker = path.join(dir, 'var/state/staging', run, 'COMMIT');
  const plan = JSON.parse(fs.readFileSync(marker, 'utf8')) as Record<string, unknown>;
  assert.ok(plan[field], `the marker records ${field}`);
  delete plan[field];
  fs.writeFileSync(marker, JSON.stringify(plan));
}

describe('the archive in done/', () => {
  // A re-sent hour committed again keeps the reflog its earlier run archived in done/ (RUN.reflog.~N~); a replay
  // copied out of done/ makes no second copy.
  test('a re-sent hour keeps the earlier archive', async () => {
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
    assert.deepEqual(
      warningLines(r3.stderr).map((l) => / a re-sent hour, set aside as /.test(l)),
      [true],
      r3.stderr,
    );
    assert.deepEqual(
      fs
        .readdirSync(done)
        .filter((f) => f.startsWith(name))
        .sort(),
      [RUNS[0]!, `${RUNS[0]!}.resent.~1~`, `${RUNS[0]!}.~1~`, `${RUNS[0]!}.~2~`, `${RUNS[0]!}.~3~`],
    );
    assert.deepEqual(fs.readFileSync(archived), third);
    assert.deepEqual(fs.readdirSync(inbox), []);
  });

  // A FIFO at done/RUN.reflog is kept as RUN.reflog.~1~, not opened: the commit of a re-sent hour does not hang.
  test('a FIFO at done/RUN.reflog is kept, not opened', async () => {
    // Compared byte for byte, it was opened for reading: open(2) waited for a writer for
    // ever, deaf to SIGTERM, and every roll forward after a kill did the same.
    const dir = copyOf((await ref1()).dir);
    const done = path.join(dir, 'var/state/done', RUNS[0]!);
    takeQueueFiles(dir, RUN0);
    fs.renameSync(done, path.join(dir, 'var/inbox', RUNS[0]!));
    assert.equal(spawnSync('mkfifo', [done]).status, 0);
    const r = await runner(dir, ['--log-level', 'silent'], { killAfter: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(
      r.stderr.includes(`warning: ${RUN0}: ${done}, the reflog an earlier run of this name read, is kept as ${RUNS[0]!}.~1~ (this run's takes its name)\n`),
      r.stderr,
    );
    assert.ok(fs.lstatSync(`${done}.~1~`).isFIFO());
    assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))));
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
  });

  // A reflog in the inbox that is a relative symlink goes to done/ as a link that still leads to the file it read,
  // there and moved back for a replay.
  test('a relative symlink stays a working link', async () => {
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
    assert.ok(fs.lstatSync(done).isSymbolicLink(), "still a link, to the sender's file");
    assert.equal(fs.readlinkSync(done), fs.realpathSync(path.join(incoming, 'x.reflog')));
    assert.ok(fs.readFileSync(done).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))));
    assert.deepEqual(fs.readdirSync(path.dirname(done)), [RUNS[0]!], 'no temporary link left');
    fs.renameSync(done, path.join(dir, 'var/inbox', RUNS[0]!));
    assert.ok(fs.readFileSync(path.join(dir, 'var/inbox', RUNS[0]!)).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))), 'moved back, it still leads there');
  });

  // A replay made with ln instead of mv (the inbox file a hard link of done/RUN.reflog) leaves the inbox once
  // processed.
  test('a replay made with ln leaves the inbox', async () => {
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
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [
        [run, 'ok'],
        [run, 'ok'],
      ],
    );
  });

  // A replay made with ln -s (the inbox file a symlink to done/RUN.reflog, relative or absolute) leaves
  // done/RUN.reflog the hour itself.
  test('a replay made with ln -s keeps the hour', async () => {
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
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status]),
        [
          [RUN0, 'ok'],
          [RUN0, 'ok'],
        ],
      );
    }
  });
});

describe('a reflog renamed over the inbox name', () => {
  // A reflog renamed over INBOX/RUN.reflog while that run is in progress stays in the inbox, and the next invocation
  // processes it.
  test('while its run is in progress: it stays', async () => {
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

  // A roll forward does not move a reflog that came under the name after the run's own had left; an old COMMIT
  // without the identity still moves it.
  test("after the run's own left: not moved", async () => {
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
    assert.ok(
      fs.readFileSync(path.join(dir, 'var/state/done', `${RUNS[0]!}.~1~`)).equals(fs.readFileSync(path.join(REFLOGS, RUNS[0]!))),
      'done/ keeps the one processed first',
    );
    assert.ok(fs.readFileSync(path.join(dir, 'var/state/done', RUNS[0]!)).equals(resent));
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status, typeof x.queue_name]),
      [
        [run, 'ok', 'undefined'],
        [run, 'ok', 'string'],
      ],
    );

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

  // A reflog re-sent under its name while the run copies it to another file system, or links it anew, stays in the
  // inbox; a crash after it was parked is finished.
  test('while copied or linked anew: it stays', async (t) => {
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
    assert.deepEqual(
      runsJsonl(dir2).map((x) => [x.run, x.status]),
      [[run, 'ok']],
    );

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
      const resume3 = await stoppedWith(
        dir3,
        ['--inbox', inbox],
        { NODE_OPTIONS: preload, SIGNAL_AFTER_CALL: 'copyFileSync', SIGNAL_ARG: inbox },
        'after copying',
      );
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

  // A symlinked reflog whose target is deleted once its run read it leaves the inbox as a link (absolute or relative
  // target, stopped or killed before the reflog step); another link renamed over it stays.
  test('a symlink whose target is deleted', async () => {
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
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status]),
        [
          [run, 'ok'],
          [RUNS[1]!.replace(/\.reflog$/, ''), 'ok'],
        ],
      );
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

  // A reflog renamed over INBOX/RUN.reflog between the reflog step's identity check and its move stays in the inbox.
  test('between the identity check and the move', async () => {
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

  // The reflog step after a crash that left a file parked: the run's goes to done/, one that came in its place goes
  // back to the inbox without replacing a newer one.
  test('the reflog step after a crash left one parked', () => {
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
        {
          version: 1,
          run: 'r',
          staging: path.join(dir, 'staging'),
          state: path.join(dir, 'state'),
          reflog,
          reflogFile,
          reflogLink: null,
          queueDir: dir,
          backlogWarn: 1,
          queue: [],
          record: {} as RunRecord,
        },
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
});
