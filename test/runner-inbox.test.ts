// The cron runner's inbox: what is a reflog, which names run, and an inbox that cannot be used.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, hasStackTrace, runRunner, testEnv } from './lib/run.js';
import { assertSameState, runsJsonl, snapshot } from './lib/runner-state.js';
import { REFLOG_HEAD_BYTES, firstHeaderLine, notAReflog } from '../src/runner/run/reflog-checks.js';
import { hourNotBegun, notAnHour } from '../src/runner/run/now.js';
import { formatTimestamp } from '../src/core/time.js';
import { REFLOGS, RUNS, runner, sub, fresh, ref, keepOnly, RUN0, freshFirstOnly, copyOf, ref1, writeReflog } from './lib/runner.js';

const roMountWorks =
  spawnSync('unshare', [
    '-rm',
    'bash',
    '-c',
    'd=$(mktemp -d) && mount --bind "$d" "$d" && mount -o remount,ro,bind "$d" && ! touch "$d/x" 2>/dev/null; s=$?; rmdir "$d"; exit $s',
  ]).status === 0;

describe('what is not a reflog', () => {
  // A reflog whose last line has no newline is processed with --allow-unterminated, with a warning on stderr and in
  // runs.jsonl.
  test('no final newline: --allow-unterminated', async () => {
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

  // A file that is not a reflog (an HTML error page saved as the hour) fails its run, publishing nothing; emptied,
  // it commits as an empty hour.
  test('an HTML page fails its run; emptied, it commits', async () => {
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
    assert.deepEqual(
      runsJsonl(dir)
        .slice(-2)
        .map((x) => [x.run, x.status]),
      [
        ['2011072902', 'ok'],
        ['2011072903', 'ok'],
      ],
    );
  });

  // Not a reflog, re-sent for an hour committed before: the advice is to remove it, not to empty it (which would
  // replace the reflog in done/).
  test('a re-sent non-reflog: the advice is to remove it', async () => {
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

  // An empty reflog, one of a single header line (with empty lines or not), and several reflogs concatenated still
  // commit.
  test('empty, header-only and concatenated reflogs', async () => {
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
    assert.deepEqual(
      runs.map((x) => [x.run, x.status, x.sent]),
      [
        ['2011072901', 'ok', 0],
        ['2011072902', 'ok', 0],
        ['2011072903', 'ok', 0],
        ['2011072904', 'ok', 2],
      ],
    );
    assert.deepEqual(
      runs.map((x) => (x.stages as Record<string, Record<string, unknown>>)['analyze-dump']!.skipped_header),
      [0, 1, 1, 2],
    );
  });

  // Not a reflog: the rule (no reflog line, more than one header line, or one without its LF) and the first line it
  // quotes.
  test('the rule and the line it quotes', () => {
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
    assert.equal(notAReflog(ad(0, 1, 5), f, 'x'), null, "a reject (the reject ratio is analyze-dump's)");
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

  // A FIFO named *.reflog in the inbox fails its run at once (exit 1, naming it), not a runner stuck in open(2),
  // deaf to SIGTERM, holding the lock.
  test('a FIFO named *.reflog fails at once', () => {
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
    assert.deepEqual(
      runs.map((x) => [x.run, x.status, x.failed_stage]),
      [['2011072805', 'failed', 'reflog']],
    );
    assert.ok(fs.lstatSync(fifo).isFIFO(), 'the FIFO stays in the inbox');
    assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072806.reflog')), 'the later reflog waits');
    assert.ok(
      !fs.existsSync(path.join(dir, 'var/queue')) ||
        fs.readdirSync(path.join(dir, 'var/queue')).every((d) => fs.readdirSync(path.join(dir, 'var/queue', d)).length === 0),
      'nothing published',
    );
  });
});

describe('names', () => {
  // An inbox whose path holds a TAB or a newline runs (analyze-dump gets the reflog's path as --input-name).
  test('an inbox path with a TAB or a newline', async () => {
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

  // A reflog whose run name is longer than 200 bytes is skipped with a warning, and the rest of the inbox runs.
  test('a run name over 200 bytes is skipped', async () => {
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    // Counted in UTF-8 bytes: 'é' is two.
    const ok200 = `2011072807${'é'.repeat(95)}`;
    const long201 = `${ok200}x`;
    const long240 = `2011072808${'x'.repeat(230)}`;
    assert.deepEqual(
      [ok200, long201, long240].map((n) => Buffer.byteLength(n)),
      [200, 201, 240],
    );
    fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(dir, 'var/inbox', `${ok200}.reflog`));
    for (const n of [long201, long240]) fs.copyFileSync(path.join(REFLOGS, '2011072808.reflog'), path.join(dir, 'var/inbox', `${n}.reflog`));
    const r = await runner(dir);
    assert.equal(r.status, 0, r.stderr);
    for (const n of [long201, long240]) {
      const file = path.join(dir, 'var/inbox', `${n}.reflog`);
      assert.ok(r.stderr.includes(`warning: skipping ${file}: run name '${n}' is longer than 200 bytes\n`), r.stderr);
    }
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [
        ['2011072806', 'ok'],
        [ok200, 'ok'],
      ],
    );
    assert.ok(fs.existsSync(path.join(dir, 'var/queue/1', `${ok200}.tsv`)), 'the 200-byte name ran');
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')).sort(), [`${long201}.reflog`, `${long240}.reflog`], 'the skipped ones stay');
  });

  // A reflog whose name holds a newline is skipped with a one-line warning, the newline shown as \n.
  test('a name with a newline: a one-line warning', () => {
    // The warning printed the name as it is: its second half read as a message of its own.
    const dir = fresh();
    keepOnly(dir);
    fs.copyFileSync(path.join(REFLOGS, '2011072806.reflog'), path.join(dir, 'var/inbox', '2011072806\nx.reflog'));
    const r = runRunner(dir, ['--log-level', 'silent']);
    assert.equal(r.status, 0, r.stderr);
    const file = path.join(dir, 'var/inbox', '2011072806\\nx.reflog');
    assert.ok(r.stderr.includes(`warning: skipping ${file}: run name '2011072806\\nx' contains a space, a slash or a control character\n`), r.stderr);
    assert.deepEqual(
      r.stderr.split('\n').filter((l) => !l.startsWith(`${path.basename(RUNNER)}: `)),
      [''],
      r.stderr,
    );
  });

  // A run's failure is reported on one line when the reflog's path holds a newline (a FIFO in such an inbox).
  test('a failure on one line for a path with a newline', () => {
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

  // A reflog whose name starts with ten digits that are no real hour (2011072824) waits in the inbox with a warning,
  // not run on the clock.
  test('ten digits that are no real hour wait', async () => {
    // On the clock's now (years after its hour) filter-url would have dropped all of current_log.
    const dir = freshFirstOnly();
    const inbox = path.join(dir, 'var/inbox');
    for (const name of ['2011072824', '2011023112-b']) fs.copyFileSync(path.join(REFLOGS, '2011072807.reflog'), path.join(inbox, `${name}.reflog`));
    const r = await runner(dir, ['--keep', '10h']);
    assert.equal(r.status, 0, r.stderr);
    for (const [name, digits] of [
      ['2011072824', '2011072824'],
      ['2011023112-b', '2011023112'],
    ]) {
      assert.ok(
        r.stderr.includes(
          `reflog-to-yacobot-queue: warning: skipping ${path.join(inbox, `${name}.reflog`)}: its name starts with ${digits}, which is no real hour (YYYYMMDDhh): a typo in the name? ` +
            "Its now would be this machine's clock, and current_log would forget every URL not seen since --keep before that; rename it (or give --now)\n",
        ),
        r.stderr,
      );
    }
    assert.deepEqual(fs.readdirSync(inbox).sort(), ['2011023112-b.reflog', '2011072824.reflog']);
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [[RUN0, 'ok']],
    );
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

  // A reflog named for an hour that has not begun (a typo: 2107 for 2011) waits in the inbox with a warning; the
  // others run.
  test('an hour that has not begun waits', async () => {
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
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [[RUN0, 'ok']],
    );
    // An hour that has begun runs; --now decides the now by itself, so it runs too.
    assert.equal(hourNotBegun(formatTimestamp(new Date()).slice(0, 10), new Date(), h), null);
    assert.equal(hourNotBegun('x2107072806', new Date(), h), null, 'a name that starts with no hour');
    // Alone in the inbox, it is not "nothing to do".
    const alone = await runner(dir);
    assert.equal(alone.status, 0, alone.stderr);
    assert.ok(
      alone.stderr.endsWith(
        `reflog-to-yacobot-queue: nothing run: the 1 *.reflog file(s) in ${path.join(dir, 'var/inbox')} were skipped (see the warnings above)\n`,
      ),
      alone.stderr,
    );
    const now = await runner(dir, ['--now', '20110728090000', '--keep', '10h']);
    assert.equal(now.status, 0, now.stderr);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
  });
});

describe('the inbox and the state', () => {
  // An inbox on another file system: each reflog is copied into state/done and removed, same result.
  test('an inbox on another file system', async (t) => {
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

  // After a failed run, the count of reflogs that stay in the inbox says the skipped ones too.
  test('after a failure: the count of reflogs left', async () => {
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

  // After a signal, the count of reflogs that stay in the inbox does not count a skipped hour not begun twice.
  test('after a signal: a skipped hour counted once', async () => {
    // The inbox was read again and an hour not begun counted among the runs, then again as skipped.
    const dir = freshFirstOnly();
    const inbox = path.join(dir, 'var/inbox');
    writeReflog(dir, '2107072806', [['21070728063000', 'http://typo.example/']]); // an hour not begun: skipped
    const r = await runner(dir, ['--log-level', 'silent'], { env: { REFLOG_RUNNER_FAILPOINT: `${RUN0}:chain`, REFLOG_RUNNER_FAILSIGNAL: 'SIGTERM' } });
    assert.equal(r.status, 143, r.stderr);
    assert.ok(r.stderr.includes(`the next invocation runs it again); 1 reflog(s) stay in ${inbox}, and the 1 skipped\n`), r.stderr);
    assert.equal(fs.readdirSync(inbox).length, 2);
  });

  // A read-only inbox fails the invocation before anything runs: no run publishes its queue files, hour after hour,
  // and fails to move its reflog.
  test('a read-only inbox fails before any run', { skip: !roMountWorks && 'no user namespace for a read-only bind mount here' }, () => {
    // It used to run: each run published its queue files, then failed to move its reflog
    // out (EROFS) with COMMIT in place, and every invocation rolled it forward, publishing
    // the same queue files again (a consumer that took them got them again every hour).
    const dir = fresh();
    const r = spawnSync(
      'unshare',
      ['-rm', 'bash', '-c', 'mount --bind var/inbox var/inbox && mount -o remount,ro,bind var/inbox && exec "$0" --log-level silent', RUNNER],
      { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 120_000 },
    );
    assert.equal(r.status, 1, r.stderr);
    assert.equal(
      r.stderr,
      `${path.basename(RUNNER)}: ${path.join(dir, 'var/inbox')}: cannot move processed reflogs out of the inbox: EROFS; nothing was run\n`,
    );
    assert.ok(!fs.existsSync(path.join(dir, 'var/queue')), 'no queue file published');
    // last-invocation.json records the failed invocation, for status.
    assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state')).sort(), ['last-invocation.json', 'partner.db']);
  });

  // An --inbox below a regular file is a usage error (exit 2), found before anything is made under --state.
  test('an --inbox below a regular file: usage error', () => {
    const dir = sub('inboxfile-');
    fs.writeFileSync(path.join(dir, 'file'), 'x\n');
    const r = runRunner(dir, ['--inbox', 'file/inbox', '--state', 'st'], 20_000);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--inbox \S+\/file\/inbox: is not an existing directory \(check --inbox, or create it\)\nTry '/);
    assert.ok(!fs.existsSync(path.join(dir, 'st')), 'no state directory made');
  });

  // A file or a symlink in STATE/staging that is no run's directory is left alone, and the runs go on.
  test('stray entries in STATE/staging are left alone', async () => {
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
    assert.deepEqual(
      runsJsonl(dir).map((x) => x.status),
      ['ok'],
    );
  });
});
