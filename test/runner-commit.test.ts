// The cron runner's commit: what a run publishes and records, what a failed run leaves,
// runs.jsonl, and places it cannot write.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { ROOT, RUNNER, canRunAsNobody, hasStackTrace, runAsNobody, runRunner, scratch, testEnv } from './lib/run.js';
import { assertSameState, runsJsonl, snapshot } from './lib/runner-state.js';
import { appendRecordOnce } from '../src/runner/state/runs-log.js';
import { REFLOGS, RUNS, runner, sub, fresh, ref, keepOnly, RUN0, freshFirstOnly, copyOf, ref1, takeQueueFiles, failingSecondHour } from './lib/runner.js';

/** A row only a hand edit with foreign keys off makes (one naming no Yacobot): upload-domains refuses the database at its start, after the checks before the chain passed. */
const GHOST_ROW = "INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('ghost.com', 99, 'x')";

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

describe('a run', () => {
  // An uninterrupted run publishes every reflog and records it.
  test('publishes every reflog and records it', async () => {
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

  // runs.jsonl, summary, a second invocation with nothing to do.
  test('runs.jsonl, summary, then nothing to do', async () => {
    const { dir, stderr } = await ref();
    const r = { stderr };
    assert.ok(!hasStackTrace(r.stderr));
    const recs = runsJsonl(dir);
    assert.deepEqual(
      recs.map((x) => x.run),
      RUNS.map((f) => f.replace(/\.reflog$/, '')),
    );
    const first = recs[0]!;
    assert.equal(first.status, 'ok');
    assert.equal(first.now, '20110728070000', 'now of 2011072806.reflog is the end of its hour');
    const ad = (first.stages as Record<string, Record<string, number>>)['analyze-dump']!;
    assert.equal(ad.records_out! + ad.rejected! + ad.skipped!, ad.lines_in);
    const per = first.sent_per_yacobot as Record<string, number>;
    assert.equal(
      Object.values(per).reduce((a, b) => a + b, 0),
      first.sent,
    );
    assert.ok((first.new_domains as number) > 0);
    assert.ok(typeof first.seconds === 'number' && first.backlog);
    assert.match(r.stderr, /2011072806: \d+ lines, \d+ records, 2 rejected, 2 skipped; \d+ URLs sent/);
    assert.match(r.stderr, /3 run\(s\) committed/);
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /nothing to do/);
    assert.equal(runsJsonl(dir).length, 3);
  });

  // npm start (the demo) works, and a second start says there was nothing new.
  test('npm start (the demo) runs, then has nothing new', () => {
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
});

describe('a failed run', () => {
  // A failed run whose runs.jsonl line cannot be written still says why it failed, besides the runs.jsonl error.
  test('says why even when runs.jsonl cannot be written', () => {
    // Only 'runs.jsonl: cannot open: EISDIR' was printed: the stage's message was lost.
    const dir = fresh();
    keepOnly(dir, '2011072806.reflog');
    const h = new Database(path.join(dir, 'var/state/partner.db'));
    h.pragma('foreign_keys = OFF');
    h.exec(GHOST_ROW);
    h.close();
    // A runs.jsonl past the file size limit (a directory there, or a link into a directory
    // that is gone, is refused before any run): its append fails with EFBIG, as a full disk
    // fails it; the stages' files stay far below the limit.
    fs.writeFileSync(path.join(dir, 'var/state/runs.jsonl'), `${JSON.stringify({ pad: 'x'.repeat(1000) })}\n`.repeat(300));
    const r = spawnSync('bash', ['-c', 'ulimit -f 256 && exec "$0" --log-level silent', RUNNER], {
      cwd: dir,
      env: testEnv(),
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /^reflog-to-yacobot-queue: run 2011072806 failed: upload-domains: .*ghost\.com to Yacobot 99, which does not exist/m);
    assert.match(r.stderr, /^reflog-to-yacobot-queue: \S*runs\.jsonl: cannot append to: EFBIG/m);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
  });

  // A failing stage (upload-domains refusing a row that names no Yacobot) publishes nothing and changes no state.
  test('a failing stage publishes nothing', async () => {
    // After the first hour (a copy of its run), no Yacobot is left active for the next ones.
    const dir = copyOf((await ref1()).dir);
    const db = path.join(dir, 'var/state/partner.db');
    for (const f of ['2011072807.reflog', '2011072808.reflog']) fs.copyFileSync(path.join(REFLOGS, f), path.join(dir, 'var/inbox', f));
    const h = new Database(db);
    h.pragma('foreign_keys = OFF');
    h.exec(GHOST_ROW);
    h.close();
    const before = snapshot(dir);
    const r = await runner(dir);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(!hasStackTrace(r.stderr));
    assert.match(r.stderr, /upload-domains: .*ghost\.com to Yacobot 99, which does not exist/);
    // The failed run and the one after it wait in the inbox; the message counts both.
    assert.ok(
      r.stderr.includes(
        `reflog-to-yacobot-queue: nothing of it was published; 2 reflog(s) stay in ${path.join(dir, 'var/inbox')} (see ${path.join(dir, 'var/state/runs.jsonl')})\n`,
      ),
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

  // A queue side that cannot take every file (what the check of QUEUE before the chain
  // cannot see: here Yacobot 2's disk is full) publishes none of the run, and a rerun
  // after the fix ends the same.
  test('a queue side that cannot take every file', async () => {
    // Queue files are copied beside their places and fsynced before the COMMIT; once the
    // first Yacobot's file was published before the second one's copy failed.
    const { snap: want } = await ref1();
    const dir = freshFirstOnly();
    fs.mkdirSync(path.join(dir, 'var/queue'), { recursive: true });
    const before = snapshot(dir);
    const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/fail-publish.js')).href;
    const r = await runner(dir, [], { env: { NODE_OPTIONS: `--import=${preload}`, FAIL_QUEUE_COPY: '2' } });
    assert.equal(r.status, 1, r.stderr);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    assert.match(r.stderr, /var\/queue\/2\/2011072806\.tsv: cannot copy into place: ENOSPC/);
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
    const again = await runner(dir);
    assert.equal(again.status, 0, again.stderr);
    assertSameState(snapshot(dir), want, 'rerun after the queue path was fixed');
  });

  // A failed run records the domains its upload-domains committed all the same (they stay assigned).
  test('records the domains upload-domains committed', async () => {
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

  // An invocation that stops on an error after some runs committed still prints their summary lines, before the
  // error.
  test("prints committed runs' summaries before the error", async () => {
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
    assert.deepEqual(
      runsJsonl(dir).map((x) => [x.run, x.status]),
      [
        [first, 'ok'],
        [second, 'ok'],
      ],
    );
  });
});

describe('rejects', () => {
  // A run without rejects removes the rejects files a failed attempt of the same reflog left.
  test('a run without rejects removes stale ones', async () => {
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
    // A failing attempt without rejects (upload-domains refusing a row that names no Yacobot) removes them too.
    const db = new Database(path.join(dir, 'var/state/partner.db'));
    db.pragma('foreign_keys = OFF');
    db.exec(GHOST_ROW);
    const noActive = await runner(dir);
    assert.equal(noActive.status, 1, noActive.stderr);
    assert.equal(runsJsonl(dir).at(-1)!.failed_stage, 'upload-domains');
    assert.ok(!fs.existsSync(kept), 'a failed attempt that rejected nothing leaves no rejects file');
    db.exec("DELETE FROM partner_domain WHERE domain = 'ghost.com'");
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

  // A committed run's record names its published rejects file, and the file holds the run's rejects.
  test('the record names the published rejects file', async () => {
    const { dir } = await ref();
    const first = runsJsonl(dir)[0]!;
    const rejected = (first.stages as Record<string, { rejected: number }>)['analyze-dump']!.rejected;
    assert.ok(rejected > 0, 'the first fixture hour has rejects');
    assert.equal(first.rejects_file, path.join(dir, 'var/state/rejects/2011072806.tsv'));
    assert.equal(
      fs
        .readFileSync(first.rejects_file as string, 'utf8')
        .split('\n')
        .filter(Boolean).length,
      rejected,
    );
  });
});

describe('runs.jsonl', () => {
  // runs.jsonl append: a torn last line is cut, a retried record is not doubled.
  test('a torn last line is cut, a retry not doubled', () => {
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

  // runs.jsonl append on a nearly full disk: an error naming the file, and no torn line left (a short write is not
  // taken for the whole line).
  test('a nearly full disk leaves no torn line', () => {
    // The kernel takes what fits and reports ENOSPC (here EFBIG: a file size limit) only on
    // the next write. One writeSync used to leave a torn line and report success; the next
    // append cut it off: the runner exited 0 with every record of a full state disk lost.
    const dir = sub('jsonl-full-');
    const f = path.join(dir, 'runs.jsonl');
    const before = `${JSON.stringify({ run_id: 'a', pad: 'x'.repeat(2900) })}\n`;
    fs.writeFileSync(f, before);
    const fsutil = pathToFileURL(path.join(ROOT, 'dist/src/runner/state/runs-log.js')).href;
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

  // A runs.jsonl that is not a regular file fails the invocation before anything runs: a FIFO does not hold it for
  // ever, a directory does not have each run publish and then fail.
  test('not a regular file: fails before any run', async () => {
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
});

describe('places it cannot write', () => {
  // A --state that cannot be created is an error naming the directory and the reason (exit 1), not an internal
  // error.
  test('a --state that cannot be created', () => {
    const dir = sub('nostate-');
    fs.mkdirSync(path.join(dir, 'inbox'));
    fs.writeFileSync(path.join(dir, 'file'), 'not a directory\n');
    const r = runRunner(dir, ['--inbox', 'inbox', '--state', 'file/state'], 20_000);
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stderr.includes(`\nreflog-to-yacobot-queue: ${path.join(dir, 'file/state/staging')}: cannot create directory: ENOTDIR`), r.stderr);
    assert.doesNotMatch(r.stderr, /internal error/);
  });

  // A place the commit writes that this user cannot (done/ made by root running the runner by hand) fails the
  // invocation before anything runs.
  test('done/ made by root: fails before any run', async () => {
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
      r.stderr.includes(
        `reflog-to-yacobot-queue: ${done}: cannot write here: EACCES; a run's commit writes here (made by another user, such as root running the runner by hand?); nothing was run\n`,
      ),
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

  // QUEUE owned by root with the Yacobot directories given to the runner's user, or a Yacobot's directory it cannot
  // write that gets nothing, stops no run.
  test('root-owned QUEUE, or a Yacobot dir it cannot write', async () => {
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

  // done/ a symbolic link whose target is missing fails the invocation before anything runs; runs.jsonl one into a
  // directory that is there does not.
  test('a dangling done/ symlink fails up front', async () => {
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
});
