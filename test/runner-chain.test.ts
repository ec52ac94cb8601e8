// The cron runner's chain of stages: their messages as the runner reports them, the partner
// database, and the gate before upload-domains.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { ROOT, hasStackTrace, lockHolder, runBin, scratch } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { runPaths } from '../src/runner/state/layout.js';
import { failureMessage, readStageLog, repeatedWarnings } from '../src/runner/run/stage-log.js';
import { SPILL_PREFIX } from '../src/core/sorter.js';
import { HOST_TAG } from '../src/core/temps.js';
import { shellQuote } from '../src/core/errors.js';
import { runStages, stageEnv } from '../src/runner/run/pipeline.js';
import { RunProgress } from '../src/runner/run/progress.js';
import { sayTo } from '../src/runner/say.js';
import type { RunnerOptions } from '../src/runner/options/types.js';
import { REFLOGS, type Done, runner, fresh, keepOnly, RUN0, freshFirstOnly, copyOf, ref1, writeReflog, failingSecondHour } from './lib/runner.js';

describe('stage messages', () => {
  // A stage's warning reaches the runner's stderr (an inactive Yacobot that still owns domains), not only its log,
  // which the cleanup removes.
  test("a stage warning reaches the runner's stderr", async () => {
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

  // analyze-dump's messages in a run name the reflog, not '-' (the runner hands it over on stdin).
  test("analyze-dump's messages name the reflog", async () => {
    const dir = fresh();
    keepOnly(dir);
    writeReflog(dir, '2011072806', [
      ['20110728063000', 'http://good.example/'],
      ['20110728063001', 'ftp://bad.example/'],
    ]);
    const r = await runner(dir);
    assert.equal(r.status, 1, r.stderr);
    const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
    const want = `analyze-dump: ${reflog}: rejected 1 of 2 records (50.00%), more than --max-reject-ratio 0.01; no records written`;
    assert.ok(r.stderr.includes(`run 2011072806 failed: ${want}\n`), r.stderr);
    assert.equal(runsJsonl(dir)[0]!.error, want);
  });

  // A run failed on the reject ratio says where its rejected lines are and which flag lets it through.
  test('a reject-ratio failure says where and which flag', async () => {
    const dir = fresh();
    keepOnly(dir);
    writeReflog(dir, '2011072806', [
      ['20110728063000', 'http://good.example/'],
      ['20110728063001', 'ftp://bad.example/'],
    ]);
    const r = await runner(dir);
    assert.equal(r.status, 1, r.stderr);
    const rejects = path.join(dir, 'var/state/rejects/failed/2011072806.tsv');
    assert.ok(
      r.stderr.includes(
        `reflog-to-yacobot-queue: the rejected lines are in ${rejects}; if the reflog is to go through anyway, run again with a higher --max-reject-ratio\n`,
      ),
      r.stderr,
    );
    assert.match(fs.readFileSync(rejects, 'utf8'), /^3\tunsupported scheme: ftp\t/);
  });

  // join-current failing at the end of hour 2 cuts its output: upload-domains fails on the cut line before its
  // commit, and the failed line names join-current.
  test("join-current's cut output: the line names it", async () => {
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
    // The memory check refuses an edited current_log before join-current reads it:
    // the operator's flag takes it as it is, so that join-current meets the bad line.
    const r = await runner(dir, ['--reset-current-log']);
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

  // A stage that dies of an exception it did not catch (a module that fails to load) is reported by its message, not
  // by Node's first line.
  test('an uncaught exception is reported by its message', () => {
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

  // The runner repeats every warning of analyze-dump but the cut last line, which it says in its own words.
  test('analyze-dump warnings repeated, but the cut line', () => {
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
});

describe('database and gate', () => {
  // A run failed on a partner database another process held says the run is not lost, and goes through once it lets
  // go.
  test('a held partner database: the run is not lost', async () => {
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
      r.stderr.endsWith(
        `reflog-to-yacobot-queue: the run is not lost: once the other process has let go of ${db}, run again (or let the next invocation do it)\n`,
      ),
      r.stderr,
    );
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(
      runsJsonl(dir).map((x) => x.status),
      ['failed', 'ok'],
    );
  });

  // The stages' environment holds glibc's mmap and trim thresholds, unless the operator set them.
  test("the stages' environment: glibc malloc thresholds", () => {
    const env = stageEnv({ PATH: '/bin', TZ: 'UTC' });
    assert.equal(env.MALLOC_MMAP_THRESHOLD_, '131072');
    assert.equal(env.MALLOC_TRIM_THRESHOLD_, '8388608');
    assert.equal(env.PATH, '/bin');
    assert.equal(env.TZ, 'UTC');
    const set = stageEnv({ MALLOC_MMAP_THRESHOLD_: '65536', MALLOC_TRIM_THRESHOLD_: '1048576' });
    assert.equal(set.MALLOC_MMAP_THRESHOLD_, '65536');
    assert.equal(set.MALLOC_TRIM_THRESHOLD_, '1048576');
  });

  // runStages: a log directory that cannot take the chain's log is an error for the caller, not an unhandled rejection.
  test('runStages: an uncreatable log rejects', async () => {
    const dir = scratch('ms-stages-');
    fs.writeFileSync(path.join(dir, 'R.reflog'), '');
    const p = { ...runPaths({ inbox: dir, state: dir }, 'R'), logs: path.join(dir, 'missing') };
    const o = {
      state: dir,
      db: path.join(dir, 'p.db'),
      dbArgs: [],
      maxRejectRatio: null,
      memory: null,
      resendAfter: null,
      keep: null,
      killAfterMs: 1000,
    } as unknown as RunnerOptions;
    const progress = new RunProgress('R', sayTo(null));
    await assert.rejects(runStages(o, p, '20110728070000', 3, path.join(ROOT, 'bin'), progress), /ENOENT/);
  });

  // A database upload-domains refuses at its start fails the run: nothing published, nothing assigned.
  test('a database upload-domains refuses fails the run', async () => {
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
});
