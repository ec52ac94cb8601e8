// The cron runner's options and config file, and the backlog it watches.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, runRunner } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { UsageError } from '../src/core/errors.js';
import { parseArgs, parseConfig } from '../src/runner/options/parse.js';
import { assignedInLog } from '../src/runner/run/stage-log.js';
import { hourEndOf, resolveNow } from '../src/runner/run/now.js';
import { planInbox } from '../src/runner/state/inbox.js';
import type { RunRecord } from '../src/runner/state/run-record.js';
import { shellQuote } from '../src/core/errors.js';
import { checkQueueName } from '../src/stages/logsaver.js';
import { publishSteps } from '../src/runner/commit/protocol.js';
import { countLines } from '../src/core/lines.js';
import { generateReflog } from '../scripts/gen-reflog.js';
import { type Done, runner, sub, fresh, keepOnly, writeReflog } from './lib/runner.js';

describe('options', () => {
  // Config file: flags win, relative paths, unknown keys name the line.
  test('config file: flags win, relative paths, keys', async () => {
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    fs.writeFileSync(path.join(dir, 'runner.conf'), '# hourly runner\ninbox = var/inbox\nstate = var/state\nqueue-dir = var/elsewhere\nbacklog-warn = 50\n');
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

  // The runner's --max-reject-ratio, --memory, --keep and --resend-after reach the stages (each changes the result
  // it should).
  test('the stage options reach the stages', async () => {
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
        inbox: (dir) =>
          writeReflog(dir, '2011072806', [
            ['20110728063000', 'http://good.example/'],
            ['20110728063001', 'ftp://bad.example/'],
          ]),
        look: (dir, r) =>
          `exit ${r.status}, ${runsJsonl(dir)
            .map((x) => x.status)
            .join(' ')}`,
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
        look: (dir) =>
          runsJsonl(dir)
            .map((x) => `${x.run} sent ${x.sent}`)
            .join(', '),
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

  // Pure helpers: config parsing, option precedence, now, inbox order.
  test('pure helpers: parsing, precedence, now, order', () => {
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
    assert.throws(
      () => parseConfig('a = 1\n', 'f'),
      (e: unknown) => e instanceof UsageError && /f:1: unknown key 'a'/.test(e.message),
    );
    assert.throws(() => parseConfig('\ninbox\n', 'f'), /f:2: want "key = value"/);
    assert.deepEqual(
      [...parseConfig('# c\n inbox = "/x y" \r\nnow=20110728070000\n', 'f')],
      [
        ['inbox', { value: '/x y', line: 2 }],
        ['now', { value: '20110728070000', line: 3 }],
      ],
    );
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
    assert.deepEqual(
      plan.skipped.map((x) => x.why),
      [
        "run name 'a b' contains a space, a slash or a control character",
        "run name '0\ufffd' is not valid UTF-8 (rename the file; ls -b shows its bytes as escapes)",
      ],
    );
    // Bytewise is UTF-8 byte order, not JavaScript's UTF-16 order: U+FF5E (EF BD 9E) comes before
    // U+1F600 (F0 9F 98 80), whose first UTF-16 unit (D83D) sorts before FF5E. Nor a locale's: 'B' before 'a'.
    assert.deepEqual(planInbox(['a\u{1F600}.reflog', 'a\uff5e.reflog', 'a.reflog', 'B.reflog']).runs, ['B', 'a', 'a\uff5e', 'a\u{1F600}']);
    assert.equal(shellQuote("it's"), `'it'\\''s'`);
    // What logsaver refuses as a queue name (hasControl) is no run name either: the run would fail at every invocation.
    const odd = planInbox(['a\u0085.reflog', 'b\u2028.reflog', 'c\u202e.reflog', 'd\u00e9.reflog', 'e\u00a0f.reflog', 'g\u3000h.reflog']);
    assert.deepEqual(odd.runs, ['d\u00e9']);
    const why = (shown: string) => `run name '${shown}' contains a space, a slash or a control character`;
    // A no-break or ideographic space reads as a space: refused as one.
    assert.deepEqual(
      odd.skipped.map((x) => x.why),
      [why('a\\u0085'), why('b\\u2028'), why('c\\u202e'), why('e\u00a0f'), why('g\u3000h')],
    );
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
    assert.deepEqual(steps, ['queue:1', 'queue:3', 'current_log', 'carry', 'settings', 'memory', 'rejects', 'record', 'reflog', 'uncommit', 'cleanup']);
  });

  // Option values are checked up front (usage errors), and a config file's relative paths are relative to its own
  // directory.
  test('values checked up front; config-relative paths', () => {
    const usage = (argv: string[], message: RegExp) =>
      assert.throws(
        () => parseArgs(argv, '/w'),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
        JSON.stringify(argv),
      );
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
      'inbox = in\nstate = \'../st\'\ndb = "p.db"\nqueue-dir = q\'"\nmax-reject-ratio = 0.5\nbacklog-warn = 7\n',
    );
    const c = parseArgs(['--config', 'etc/runner.conf', '--db', 'flag.db'], dir);
    assert.ok(typeof c === 'object');
    assert.deepEqual(
      [c.inbox, c.state, c.db, c.queueDir, c.maxRejectRatio, c.backlogWarn, c.config],
      [path.join(dir, 'etc/in'), path.join(dir, 'st'), path.join(dir, 'flag.db'), path.join(dir, 'etc', 'q\'"'), '0.5', 7, path.join(dir, 'etc/runner.conf')],
    );
    assert.equal((parseArgs(['--config', 'etc/runner.conf'], dir) as { db: string }).db, path.join(dir, 'etc/p.db'));
    // A quote that opens a value and is never closed (a URI with its password cut short, once taken for a file name).
    fs.writeFileSync(path.join(dir, 'etc/open.conf'), 'inbox = in\nqueue-dir = "q\'\n');
    usage(['--config', path.join(dir, 'etc/open.conf')], /^\/.*\/etc\/open\.conf:2: queue-dir: the " that opens the value is never closed$/);
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
    assert.match(
      lvl.stderr,
      /^reflog-to-yacobot-queue: log-level is one of debug, info, warn, error, silent; got 'verbose'\nTry 'reflog-to-yacobot-queue --help'/,
    );
  });
});

describe('backlog', () => {
  // backlog: counted from the *.tsv queue files of Yacobot directories only, and a warning only above --backlog-
  // warn, not at it.
  test('counted from Yacobot *.tsv files, warned above', async () => {
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

  // countLines (URLs of a queue file, sent and backlog): a last line without LF counts, and a file over the 1 MiB
  // read buffer counts each line once.
  test('countLines: no final LF, a file over 1 MiB', () => {
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
});
