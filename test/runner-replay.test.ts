// The cron runner replaying an hour: the warning when current_log forgot its URLs, and a replay's
// own queue and rejects files.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { hasStackTrace } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { mostForgetful, mostForgetfulSince } from '../src/runner/state/run-history.js';
import { replayWarning } from '../src/runner/run/now.js';
import { tailRecords } from '../src/runner/state/runs-log.js';
import { RUNS, type Done, runner, sub, fresh, keepOnly, RUN0, freshFirstOnly, copyOf, ref1, takeQueueFiles, writeReflog, warningLines } from './lib/runner.js';

/** A replay as docs/operations.md's "Replay a reflog" says: RUN's queue files taken, its reflog moved back from done/ into the inbox. */
function replayOf(dir: string, run: string): void {
  takeQueueFiles(dir, run);
  fs.renameSync(path.join(dir, 'var/state/done', `${run}.reflog`), path.join(dir, 'var/inbox', `${run}.reflog`));
}

/** The runner's warning for a replay of 2011072806 (now 07:00) after 2011072808 (now 09:00), which ran with --keep `keep`. */
function replayWarningLine(keep: string, forgotten: string): string {
  return (
    `reflog-to-yacobot-queue: warning: 2011072806: its now (20110728070000) is 2h older than that of run 2011072808 (20110728090000), which ran with --keep ${keep}: ` +
    `current_log has forgotten the URLs last seen up to ${forgotten}, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)\n`
  );
}

describe('the replay warning', () => {
  // A replay whose now is --keep or more older than a committed run's warns that the URLs current_log forgot are
  // sent again; one within --keep does not.
  test('warns at --keep or more older, not within', async () => {
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

  // A replay replayed again is not warned about (the first recorded its URLs again), until a newer run has forgotten
  // them.
  test('a replay replayed again is not warned about', async () => {
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

  // A late reflog more than --keep older than a run committed earlier in the same invocation (an interrupted run
  // redone first) warns as a replay does; exactly --keep older, it does not.
  test('a late reflog after a redone run warns too', async () => {
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
    assert.deepEqual(
      runsJsonl(dir).map((x) => x.run),
      ['2011072808', '2011072806', '2011072807'],
    );
    assert.deepEqual(warningLines(r.stderr), [replayWarningLine('1h', '20110728080000').trimEnd()], r.stderr);
  });

  // Pure helpers of the replay warning: the newest committed now in the tail of runs.jsonl, and the warning from
  // --keep older on.
  test('pure helpers: the newest now, the warning', () => {
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
    assert.deepEqual(
      tailRecords(f, size - inLine2).map((r) => (r as { run: string }).run),
      ['2011072807', '2011072810', 'x'],
    );
    assert.deepEqual(tailRecords(f + '.missing'), []);
    // The last of equal nows, and a newer one given wins over the records.
    assert.deepEqual(
      mostForgetful(
        [
          { run: 'a', now: '20110728070000', status: 'ok' },
          { run: 'b', now: '20110728070000', status: 'ok' },
        ],
        0,
      ),
      { run: 'b', now: '20110728070000' },
    );
    assert.deepEqual(mostForgetful([{ run: 'a', now: '20110728070000', status: 'ok' }], 0, { run: 'z', now: '20110728090000' }), {
      run: 'z',
      now: '20110728090000',
    });
    // Per committed name, the newest of the committed lines after its last one.
    assert.deepEqual([...mostForgetfulSince(tailRecords(f), 0)].sort(), [
      ['2011072806', { run: '2011072809', now: '20110728100000' }],
      ['2011072807', null], // x's now is not a real time
      ['2011072809', { run: '2011072807', now: '20110728080000' }],
      ['x', null],
    ]);
    const again = [
      line('a', '20110728070000', 'ok'),
      line('b', '20110728090000', 'ok'),
      line('c', '20110728090000', 'ok'),
      line('a', '20110728070000', 'ok'),
      line('d', '20110728080000', 'ok'),
    ];
    assert.deepEqual(
      Object.fromEntries(
        mostForgetfulSince(
          again.map((l) => JSON.parse(l)),
          0,
        ),
      ),
      {
        a: { run: 'd', now: '20110728080000' },
        b: { run: 'c', now: '20110728090000' },
        c: { run: 'd', now: '20110728080000' },
        d: null,
      },
    );
    assert.deepEqual(
      mostForgetfulSince(
        again.slice(0, 3).map((l) => JSON.parse(l)),
        0,
      ).get('a'),
      { run: 'c', now: '20110728090000' },
      'the last of equal nows',
    );
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
      assert.match(
        replayWarning('r', '20110728070000', { run: 'n', now: '20110729093045' }, 90 * 60_000, replayed)!,
        /is 1d2h30m45s older .* --keep is 1h30m:/,
      );
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
    assert.deepEqual(
      mostForgetful([k('a', '20110728200000', undefined), k('b', '20110728220000', 10 * h)], h),
      { run: 'a', now: '20110728200000' },
      "a line without keep_ms: this invocation's",
    );
    assert.deepEqual(mostForgetful([k('a', '20110728200000', undefined), k('b', '20110728220000', 10 * h)], 30 * h), {
      run: 'b',
      now: '20110728220000',
      keepMs: 10 * h,
    });
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
    assert.equal(
      replayWarning('2011072812', '20110728130000', recorded, h, true),
      null,
      "9h older than a run under --keep 10h, whatever this invocation's keep",
    );
  });

  // A run by hand without the cron's --keep is refused (exit 2), accepted with --accept-settings-change, and a
  // replay is judged by the --keep of the run that forgot.
  test('a run by hand without --keep is refused', async () => {
    const dir = fresh();
    keepOnly(dir);
    writeReflog(dir, '2011072806', [['20110728063000', 'http://a.example/x']]);
    writeReflog(dir, '2011072808', [['20110728083000', 'http://b.example/y']]);
    const cron = await runner(dir, ['--keep', '10h']);
    assert.equal(cron.status, 0, cron.stderr);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.keep_ms, x.resend_after_ms]),
      [
        [36_000_000, 3_600_000],
        [36_000_000, 3_600_000],
      ],
    );
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
      ['reflog-to-yacobot-queue: warning: settings change accepted (--accept-settings-change): --keep 1h replaces --keep 10h once a run commits'],
      byHand.stderr,
    );
    assert.equal(runsJsonl(dir).at(-1)!.sent, 0);
    // The same settings as the last committed run (the replay's 1h): nothing said.
    writeReflog(dir, '2011072809', [['20110728093000', 'http://c.example/z']]);
    const next = await runner(dir, ['--keep', '1h']);
    assert.equal(next.status, 0, next.stderr);
    assert.doesNotMatch(next.stderr, /warning/);
  });
});

describe('replayed hours', () => {
  // A failed replay of a committed hour leaves that run's rejects file alone: its own go to STATE/rejects/failed/,
  // which a later commit of the name removes.
  test("a failed replay leaves the run's rejects alone", async () => {
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

  // A replayed hour whose first queue files were not taken yet publishes its own under a name of their own, instead
  // of replacing them.
  test('untaken queue files: a name of its own', async () => {
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
    assert.deepEqual(
      queues.map((f) => fs.readFileSync(f, 'utf8')),
      before,
      'the untaken queue files are unchanged',
    );
    const last = runsJsonl(dir).at(-1)!;
    assert.deepEqual([last.status, last.sent], ['ok', 6]);
    assert.match(String(last.queue_name), new RegExp(`^${run}\\.replay-\\d{14}$`));
    const own = ['1', '2', '3'].map((y) => path.join(dir, 'var/queue', y, `${last.queue_name}.tsv`)).filter((f) => fs.existsSync(f));
    assert.equal(
      own.map((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).length).reduce((a, b) => a + b, 0),
      6,
      'the 6 new URLs, in files of their own',
    );
    assert.ok(fs.existsSync(path.join(dir, 'var/state/done', RUNS[0]!)));
  });

  // A replayed hour with untaken queue files at several Yacobots goes through with queue files of a name of its own
  // at each; the old ones stay to be taken.
  test('untaken queue files at several Yacobots', async () => {
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
    assert.deepEqual(
      ['1', '2', '3'].map((y) => fs.readFileSync(queue(y), 'utf8')),
      before,
      'the old files stay to be taken',
    );
    for (const y of ['1', '2', '3'])
      assert.equal(
        fs
          .readFileSync(path.join(dir, 'var/queue', y, `${own}.tsv`), 'utf8')
          .split('\n')
          .filter(Boolean).length,
        1,
        `queue ${y}`,
      );
  });
});
