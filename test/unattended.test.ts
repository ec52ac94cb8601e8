// The cron runner left alone: settings drift, cut reflogs, re-sent hours, a lost
// current_log, full disks, accounting of failed attempts and retention. Each event is
// run for real in a scratch directory, as an operator (or cron) would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import { ROOT, RUNNER, madeDb, runRunner, scratch, hasStackTrace, testEnv } from './lib/run.js';
import { runsJsonl, snapshot } from './lib/runner-state.js';
import { keyedByHere } from '../src/runner/state/keying.js';
import { unterminatedReflog } from '../src/runner/run/reflog-checks.js';

const YACOBOTS = [
  ['add', 'alpha'],
  ['add', 'beta'],
];

/** A scratch directory with var/inbox, var/state and a partner database with two Yacobots. */
function fresh(): string {
  const dir = scratch('ms-unattended-');
  fs.mkdirSync(path.join(dir, 'var/inbox'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'var/state'), { recursive: true });
  madeDb(dir, 'var/state/partner.db', YACOBOTS);
  return dir;
}

/** The reflog text of `urls` seen at `ts` (YYYYMMDDhhmmss), after its header line. */
function reflogText(ts: string, urls: readonly string[], tag = ''): string {
  return `reflog-dump v2\n${urls.map((u, i) => `1000\t0\t${ts}\t${i}\t${u}\t1${tag === '' ? '' : `\t${tag}`}\n`).join('')}`;
}

/** Writes INBOX/HOUR.reflog: `n` URLs of `n` domains seen in the middle of hour HOUR (YYYYMMDDhh). */
function hour(dir: string, name: string, n = 20, from = 0): string {
  const urls = Array.from({ length: n }, (_, i) => `http://d${from + i}.example/p${from + i}`);
  const f = path.join(dir, 'var/inbox', `${name}.reflog`);
  fs.writeFileSync(f, reflogText(`${name}3000`, urls));
  return f;
}

/** Runs the runner in `dir` with `args`; returns status and stderr. */
function run(dir: string, ...args: string[]): { status: number | null; stderr: string } {
  const r = runRunner(dir, args);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  return { status: r.status, stderr: r.stderr };
}

/** The files under var/ (but runs.jsonl and the lock) and the database rows. */
function state(dir: string): Record<string, string> {
  return snapshot(dir);
}

const inbox = (dir: string) => fs.readdirSync(path.join(dir, 'var/inbox')).sort();

test("settings are state: a run without the cron's --keep exits 2 before any stage, naming both values; --accept-settings-change (flag or config key) runs and stores the new ones", () => {
  const dir = fresh();
  for (const h of ['2011072806', '2011072807', '2011072808']) hour(dir, h, 20, Number(h.slice(-2)) * 100);
  const cron = run(dir, '--keep', '10h');
  assert.equal(cron.status, 0, cron.stderr);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8')), {
    keep_ms: 36_000_000,
    resend_after_ms: 3_600_000,
    keep: '10h',
    resend_after: '1h',
    run: '2011072808',
    keyed_by: keyedByHere(),
  });
  hour(dir, '2011072809', 20, 900);
  const before = state(dir);
  const byHand = run(dir);
  assert.equal(byHand.status, 2, byHand.stderr);
  assert.match(byHand.stderr, /settings differ from those stored with the state \(.*settings\.json, by run 2011072808\): --keep 1h here, 10h stored\./);
  assert.match(byHand.stderr, /--accept-settings-change \(config key accept-settings-change = yes\)/);
  assert.deepEqual(state(dir), before, 'nothing changed: no stage ran');
  assert.ok(!fs.existsSync(path.join(dir, 'var/state/staging/2011072809')), 'no staging area made');
  // --resend-after differs too: both named.
  const both = run(dir, '--keep', '2h', '--resend-after', '30m');
  assert.equal(both.status, 2, both.stderr);
  assert.match(both.stderr, /--keep 2h here, 10h stored; --resend-after 30m here, 1h stored/);
  // The config key.
  fs.writeFileSync(path.join(dir, 'by-hand.conf'), 'keep = 2h\naccept-settings-change = yes\n');
  const accepted = run(dir, '--config', 'by-hand.conf');
  assert.equal(accepted.status, 0, accepted.stderr);
  assert.match(accepted.stderr, /settings change accepted/);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8')).keep_ms, 7_200_000);
  assert.deepEqual(inbox(dir), []);
  // From now on 2h is the setting: the cron's 10h is refused in its turn, the flag form accepted.
  hour(dir, '2011072810', 5, 1000);
  assert.equal(run(dir, '--keep', '10h').status, 2);
  const flag = run(dir, '--keep', '10h', '--accept-settings-change');
  assert.equal(flag.status, 0, flag.stderr);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8')).keep_ms, 36_000_000);
});

test('settings of a state made before settings.json: those of the last committed runs.jsonl line; with none at all, adopted and stored', () => {
  const dir = fresh();
  hour(dir, '2011072806');
  assert.equal(run(dir, '--keep', '10h').status, 0);
  fs.rmSync(path.join(dir, 'var/state/settings.json'));
  hour(dir, '2011072807', 20, 100);
  const r = run(dir);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /\(.*runs\.jsonl, by run 2011072806\): --keep 1h here, 10h stored/);
  // Lines without the settings (a runner before they were recorded): adopted.
  const runs = path.join(dir, 'var/state/runs.jsonl');
  fs.writeFileSync(
    runs,
    runsJsonl(dir)
      .map((x) => JSON.stringify({ ...x, keep_ms: undefined, resend_after_ms: undefined }) + '\n')
      .join(''),
  );
  const adopted = run(dir, '--keep', '3h');
  assert.equal(adopted.status, 0, adopted.stderr);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8')).keep_ms, 3 * 3_600_000);
  assert.equal(runsJsonl(dir).at(-1)!.status, 'ok');
});

test('switches: a bad value in the config file is a usage error naming the line', () => {
  const dir = fresh();
  fs.writeFileSync(path.join(dir, 'c.conf'), '\nallow-unterminated = maybe\n');
  const r = run(dir, '--config', 'c.conf');
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /c\.conf:2: allow-unterminated is yes or no/);
});

/** The published queue files (QUEUE/<id>/<name>.tsv), sorted. */
function queueFiles(dir: string): string[] {
  const q = path.join(dir, 'var/queue');
  if (!fs.existsSync(q)) return [];
  return fs
    .readdirSync(q)
    .flatMap((id) => fs.readdirSync(path.join(q, id)).map((f) => `${id}/${f}`))
    .sort();
}

test('a reflog cut mid-line fails its run (exit 1, nothing published, it stays in the inbox, later hours wait), naming --allow-unterminated; with it, it commits', () => {
  const dir = fresh();
  const f = hour(dir, '2011072806', 200);
  const whole = fs.readFileSync(f);
  const cut = whole.subarray(0, Math.floor(whole.length / 2));
  assert.notEqual(cut.at(-1), 10, 'cut mid-line');
  fs.writeFileSync(f, cut);
  hour(dir, '2011072807', 10, 1000);
  const r = run(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`run 2011072806 failed: ${f.replace(/[.]/g, '\\.')}: its last line has no newline: cut off after \\d+ line\\(s\\)`));
  assert.match(r.stderr, /\); not committed: that would lose the rest of the hour for good\. It stays in the inbox/);
  // docs/operations.md shows the message as it is.
  assert.ok(
    fs.readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8').includes(`run 2011072806 failed: ${unterminatedReflog('INBOX/2011072806.reflog', 9735)}\n`),
  );
  assert.match(r.stderr, /run again with --allow-unterminated \(config key allow-unterminated = yes\)/);
  assert.match(r.stderr, /nothing of it was published; 2 reflog\(s\) stay in/);
  assert.deepEqual(queueFiles(dir), []);
  assert.ok(!fs.existsSync(path.join(dir, 'var/state/current_log')), 'current_log not written');
  assert.deepEqual(inbox(dir), ['2011072806.reflog', '2011072807.reflog']);
  assert.deepEqual(
    runsJsonl(dir).map((x) => [x.run, x.status, x.failed_stage]),
    [['2011072806', 'failed', 'reflog']],
  );
  // The config key lets it through, as it is, and the hour after it runs.
  fs.writeFileSync(path.join(dir, 'c.conf'), 'allow-unterminated = yes\n');
  const ok = run(dir, '--config', 'c.conf');
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stderr, /warning: 2011072806: the reflog's last line has no newline; committed as it is \(--allow-unterminated\)/);
  assert.deepEqual(inbox(dir), []);
  assert.deepEqual(
    runsJsonl(dir)
      .slice(1)
      .map((x) => [x.run, x.status]),
    [
      ['2011072806', 'ok'],
      ['2011072807', 'ok'],
    ],
  );
});

test('a gzip file or an HTML page saved as the hour is named as such, not answered with a hint to raise --max-reject-ratio', () => {
  const dir = fresh();
  const f = hour(dir, '2011072806', 200);
  fs.writeFileSync(f, zlib.gzipSync(fs.readFileSync(f)));
  const gz = run(dir);
  assert.equal(gz.status, 1, gz.stderr);
  assert.match(gz.stderr, /2011072806\.reflog: is gzip-compressed \(it starts with the bytes 1f 8b\), not a reflog: decompress it/);
  assert.doesNotMatch(gz.stderr, /max-reject-ratio/);
  // Even where a reject ratio would let it through.
  const high = run(dir, '--max-reject-ratio', '1');
  assert.equal(high.status, 1, high.stderr);
  assert.match(high.stderr, /is gzip-compressed/);
  // An error page whose lines have TABs: rejected lines, which no ratio should let through.
  const rows = Array.from({ length: 50 }, (_, i) => `<tr><td>${i}</td>\t<td>x</td></tr>`).join('\n');
  fs.writeFileSync(f, `<!DOCTYPE html>\n<html><body><table>\n${rows}\n</table></body></html>\n`);
  const html = run(dir);
  assert.equal(html.status, 1, html.stderr);
  assert.match(html.stderr, /2011072806\.reflog: is an HTML page, not a reflog \(the first line: '<!DOCTYPE html>'\): a download that got an error page\?/);
  assert.doesNotMatch(html.stderr, /max-reject-ratio/);
  assert.deepEqual(queueFiles(dir), []);
  assert.deepEqual(inbox(dir), ['2011072806.reflog']);
});

/** Runs the runner in `dir` with `env` added (a failpoint), and `args`. */
function runEnv(dir: string, env: Record<string, string>, ...args: string[]): { status: number | null; signal: NodeJS.Signals | null; stderr: string } {
  const r = spawnSync(RUNNER, args, { cwd: dir, env: testEnv(env), encoding: 'utf8', timeout: 120_000 });
  // A runner SIGKILLed at a failpoint: its lock goes with the last holder.
  spawnSync('flock', ['-w', '10', path.join(dir, 'var/state/lock'), 'true']);
  return { status: r.status, signal: r.signal, stderr: r.stderr };
}

test('a re-sent hour, byte for byte, is set aside in done/ with a warning, changes nothing, and the hours after it run', () => {
  const clean = fresh();
  const dir = fresh();
  for (const d of [clean, dir]) {
    hour(d, '2011072806', 30);
    hour(d, '2011072807', 30, 15);
  }
  const first = fs.readFileSync(path.join(dir, 'var/inbox/2011072806.reflog'));
  assert.equal(run(clean).status, 0);
  assert.equal(run(dir).status, 0);
  // The sender retries hour 06; hour 08 comes after it.
  for (const d of [clean, dir]) hour(d, '2011072808', 30, 30);
  fs.writeFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), first);
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  const aside = path.join(dir, 'var/state/done/2011072806.reflog.resent.~1~');
  assert.ok(
    r.stderr.includes(
      `warning: ${path.join(dir, 'var/inbox/2011072806.reflog')}: the same bytes as ${path.join(dir, 'var/state/done/2011072806.reflog')}, ` +
        `which a committed run of 2011072806 read: a re-sent hour, set aside as ${aside}; nothing was run`,
    ),
    r.stderr,
  );
  assert.match(r.stderr, /1 run\(s\) committed .*; 1 re-sent reflog\(s\) set aside in /);
  assert.deepEqual(fs.readFileSync(aside), first, 'kept, not deleted');
  assert.deepEqual(inbox(dir), []);
  assert.deepEqual(
    runsJsonl(dir).map((x) => [x.run, x.status]),
    [
      ['2011072806', 'ok'],
      ['2011072807', 'ok'],
      ['2011072808', 'ok'],
    ],
  );
  // Everything else as if it had never come.
  assert.equal(run(clean).status, 0);
  const got = state(dir);
  delete got['var/state/done/2011072806.reflog.resent.~1~'];
  assert.deepEqual(got, state(clean));
  // Sent again, it is set aside again, beside the first.
  fs.writeFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), first);
  const again = run(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stderr, /nothing run; 1 re-sent reflog\(s\) set aside/);
  assert.ok(fs.existsSync(path.join(dir, 'var/state/done/2011072806.reflog.resent.~2~')));
});

test('a re-sent hour with other bytes, its first queue files not taken yet, runs as a replay whose queue files have a name of their own; nothing is lost, later hours run', () => {
  const dir = fresh();
  hour(dir, '2011072806', 20);
  assert.equal(run(dir).status, 0);
  const published = Object.fromEntries(queueFiles(dir).map((f) => [f, fs.readFileSync(path.join(dir, 'var/queue', f), 'utf8')]));
  assert.ok(Object.keys(published).length > 0);
  // The sender sends hour 06 again, with URLs the first copy lacked; hour 07 comes too.
  hour(dir, '2011072806', 30, 10);
  hour(dir, '2011072807', 5, 100);
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  const recs = runsJsonl(dir);
  assert.deepEqual(
    recs.map((x) => [x.run, x.status]),
    [
      ['2011072806', 'ok'],
      ['2011072806', 'ok'],
      ['2011072807', 'ok'],
    ],
  );
  const name = recs[1]!.queue_name as string;
  assert.match(name, /^2011072806\.replay-\d{14}$/);
  assert.match(
    r.stderr,
    new RegExp(`warning: 2011072806: queue files of an earlier run of this name are still in .*; this run's are named ${name.replace('.', '\\.')}\\.tsv`),
  );
  // The first run's files are as they were; the replay's hold the new URLs (d20..d39), all of them.
  for (const [f, text] of Object.entries(published)) assert.equal(fs.readFileSync(path.join(dir, 'var/queue', f), 'utf8'), text, f);
  const replayUrls = queueFiles(dir)
    .filter((f) => f.endsWith(`/${name}.tsv`))
    .flatMap((f) =>
      fs
        .readFileSync(path.join(dir, 'var/queue', f), 'utf8')
        .trimEnd()
        .split('\n'),
    )
    .map((l) => l.split('\t')[5]!)
    .sort();
  assert.deepEqual(replayUrls, Array.from({ length: 20 }, (_, i) => `http://d${20 + i}.example/p${20 + i}`).sort());
  assert.equal(recs[1]!.sent, 20);
  assert.deepEqual(inbox(dir), []);
});

test('a replay killed just before its commit publishes, when rerun, under the queue name its first attempt chose', () => {
  const dir = fresh();
  hour(dir, '2011072806', 20);
  assert.equal(run(dir).status, 0);
  hour(dir, '2011072806', 30, 10);
  const killed = runEnv(dir, { REFLOG_RUNNER_FAILPOINT: '2011072806:commit' });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  const chosen = JSON.parse(fs.readFileSync(path.join(dir, 'var/state/staging/2011072806/run.json'), 'utf8')).queue as string;
  assert.match(chosen, /^2011072806\.replay-\d{14}$/);
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.queue_name, chosen);
  assert.deepEqual(
    queueFiles(dir)
      .filter((f) => f.includes('replay'))
      .map((f) => path.basename(f)),
    queueFiles(dir)
      .filter((f) => f.includes('replay'))
      .map(() => `${chosen}.tsv`),
  );
  assert.ok(queueFiles(dir).some((f) => f.endsWith(`${chosen}.tsv`)));
  assert.ok(!queueFiles(dir).some((f) => path.basename(f).startsWith('.')), 'no prepared copy left');
});

test("current_log deleted after committed runs fails the next run (exit 1, nothing published), naming the file, the copy to restore it from and --reset-current-log; restored, the result is a clean run's", () => {
  const clean = fresh();
  const dir = fresh();
  for (const d of [clean, dir]) for (const h of ['2011072806', '2011072807', '2011072808']) hour(d, h, 20, 10 * (Number(h.slice(-2)) - 6));
  assert.equal(run(clean).status, 0);
  assert.equal(run(dir).status, 0);
  const current = path.join(dir, 'var/state/current_log');
  const link = path.join(dir, 'var/state/current_log.last');
  fs.rmSync(current);
  for (const d of [clean, dir]) hour(d, '2011072809', 20, 25);
  const r = run(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(
    r.stderr.includes(
      `run 2011072809 failed: ${current}: missing, though runs were committed here: it is the memory of the URLs sent, and without it every URL would be sent again as new. ` +
        `Restore it from the copy the runner keeps of the last committed one (cp -p ${link} ${current}), then run again; ` +
        `or to start the memory over, run with --reset-current-log (config key reset-current-log = yes)\n`,
    ),
    r.stderr,
  );
  assert.match(r.stderr, /nothing of it was published; 1 reflog\(s\) stay in/);
  assert.ok(!queueFiles(dir).some((f) => f.includes('2011072809')), 'nothing published');
  assert.deepEqual(runsJsonl(dir).at(-1)!.failed_stage, 'current_log');
  // As the message says.
  fs.copyFileSync(link, current);
  const again = run(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.equal(run(clean).status, 0);
  assert.deepEqual(state(dir), state(clean), 'the same as a run that never lost it');
});

test('--reset-current-log starts the memory over when current_log is lost; before the first commit a missing current_log is an empty one', () => {
  const dir = fresh();
  hour(dir, '2011072806', 10);
  const first = run(dir);
  assert.equal(first.status, 0, first.stderr);
  assert.doesNotMatch(first.stderr, /warning/);
  fs.rmSync(path.join(dir, 'var/state/current_log'));
  fs.rmSync(path.join(dir, 'var/state/current_log.last'));
  hour(dir, '2011072807', 10); // the same URLs, 1 h later
  const r = run(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /Restore it from a backup, then run again; or to start the memory over, run with --reset-current-log/);
  const reset = run(dir, '--reset-current-log');
  assert.equal(reset.status, 0, reset.stderr);
  assert.match(reset.stderr, /warning: 2011072807: .*current_log is missing; starting the memory of sent URLs over \(--reset-current-log\)/);
  assert.equal(runsJsonl(dir).at(-1)!.sent, 10, 'every URL sent as new');
});

/** Whether this process may mount a tmpfs (root, and a sandbox that allows it). */
function canMount(): boolean {
  const probe = scratch('ms-mnt-');
  const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' }).status === 0;
  if (ok) spawnSync('umount', [probe], { stdio: 'ignore' });
  return ok;
}

/** A fresh directory whose var/state is a tmpfs of `size` (unmount it when done), its database moved out to DIR/p.db. */
function stateOnTmpfs(size: string): { dir: string; state: string } {
  const dir = fresh();
  const state = path.join(dir, 'var/state');
  fs.renameSync(path.join(state, 'partner.db'), path.join(dir, 'p.db'));
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', state]).status, 0);
  return { dir, state };
}

test("a full state disk: the run's message is the failing stage's own, with the file it could not write, though its log could not take it", (t) => {
  if (!canMount()) return t.skip('cannot mount a tmpfs here');
  const { dir, state } = stateOnTmpfs('256k');
  try {
    // 30,000 lines with a small --memory: analyze-dump spills to STATE/staging/RUN/work/tmp.
    const urls = Array.from({ length: 30_000 }, (_, i) => `http://site${i % 97}.com/p/${i}/${'z'.repeat(40)}`);
    fs.writeFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), reflogText('20110728063000', urls));
    // The disk full but for 32 KiB: run.json and the stage logs are made, analyze-dump's spill and its log lines do not fit.
    const avail = Number(spawnSync('df', ['-k', '--output=avail', state], { encoding: 'utf8' }).stdout.trim().split('\n')[1]);
    fs.writeFileSync(path.join(state, 'fill'), Buffer.alloc((avail - 32) * 1024));
    const r = run(dir, '--db', path.join(dir, 'p.db'), '--memory', '1M', '--log-level', 'silent');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /run 2011072806 failed: analyze-dump: .*\/var\/state\/staging\/2011072806\/work\/tmp\/.*: cannot write: ENOSPC/);
    assert.doesNotMatch(r.stderr, /exit status 1|Error: ENOSPC/);
    assert.deepEqual(inbox(dir), ['2011072806.reflog']);
  } finally {
    spawnSync('umount', [state]);
  }
});

test('a step after the commit that fails (the move of the reflog to done/) says the run is committed and what still waits', () => {
  const dir = fresh();
  hour(dir, '2011072806');
  fs.mkdirSync(path.join(dir, 'var/state/done/2011072806.reflog'), { recursive: true });
  const r = run(dir);
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    /done\/2011072806\.reflog: cannot move .* here: EISDIR.*; run 2011072806 is committed, nothing of it is lost: still waiting: move its reflog to done\/, remove its staging area, which the next invocation does once this is fixed\n/,
  );
  fs.rmdirSync(path.join(dir, 'var/state/done/2011072806.reflog'));
  const again = run(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.deepEqual(inbox(dir), []);
});

test("a committed run's runs.jsonl line names the domains its failed attempts assigned, besides its own new_domains; each domain is counted once in new_domains over all lines", () => {
  const dir = fresh();
  hour(dir, '2011072806', 20);
  const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/fail-publish.js')).href;
  const failed = runEnv(dir, { NODE_OPTIONS: `--import=${preload}`, FAIL_PUBLISH: '1' });
  assert.equal(failed.status, 1, failed.stderr);
  hour(dir, '2011072806', 25); // sent again, 5 domains more
  const r = run(dir);
  assert.equal(r.status, 0, r.stderr);
  const [f, ok] = runsJsonl(dir);
  assert.deepEqual([f!.status, f!.new_domains], ['failed', 20]);
  assert.deepEqual([ok!.status, ok!.new_domains, ok!.new_domains_failed_attempts], ['ok', 5, 20]);
  assert.match(r.stderr, /2011072806: .*; 5 new domains \(and 20 by its failed attempts\);/);
  // The next commit of another hour names none.
  hour(dir, '2011072807', 3, 100);
  assert.equal(run(dir).status, 0);
  assert.equal(runsJsonl(dir).at(-1)!.new_domains_failed_attempts, undefined);
});

test('--keep-done removes processed reflogs and rejects files older than it after an invocation that committed a run; by default all are kept', () => {
  const dir = fresh();
  const withReject = (name: string) => fs.appendFileSync(hour(dir, name, 20), `1000\t0\t${name}3000\t9\tftp://bad.example/\t1\n`);
  withReject('2011072806');
  assert.equal(run(dir, '--max-reject-ratio', '0.5').status, 0);
  const old = ['var/state/done/2011072806.reflog', 'var/state/rejects/2011072806.tsv'].map((f) => path.join(dir, f));
  for (const f of old) assert.ok(fs.existsSync(f), f);
  spawnSync('sleep', ['16']);
  // An invocation that commits nothing removes nothing.
  const none = run(dir, '--keep-done', '15s');
  assert.equal(none.status, 0, none.stderr);
  for (const f of old) assert.ok(fs.existsSync(f), `${f} kept: nothing committed`);
  // Without --keep-done: kept.
  withReject('2011072807');
  assert.equal(run(dir, '--max-reject-ratio', '0.5').status, 0);
  for (const f of old) assert.ok(fs.existsSync(f), `${f} kept by default`);
  withReject('2011072808');
  fs.writeFileSync(path.join(dir, 'c.conf'), 'keep-done = 15s\nmax-reject-ratio = 0.5\n');
  const r = run(dir, '--config', 'c.conf');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /removed 2 file\(s\) of done\/ and rejects\/ older than 15s \(--keep-done\)/);
  for (const f of old) assert.ok(!fs.existsSync(f), `${f} removed`);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/done')).sort(), ['2011072807.reflog', '2011072808.reflog']);
  assert.deepEqual(
    fs
      .readdirSync(path.join(dir, 'var/state/rejects'))
      .filter((f) => f.endsWith('.tsv'))
      .sort(),
    ['2011072807.tsv', '2011072808.tsv'],
  );
  assert.equal(run(dir, '--keep-done', 'soon').status, 2);
});

test('runs.jsonl under logrotate: rotated by rename (create) or by copytruncate, the next run appends a whole line to a file of its own, and the settings stay', () => {
  const dir = fresh();
  const runs = path.join(dir, 'var/state/runs.jsonl');
  hour(dir, '2011072806', 5);
  assert.equal(run(dir, '--keep', '10h').status, 0);
  // rename: the runner opens runs.jsonl by name at each append, and makes it anew.
  fs.renameSync(runs, `${runs}.1`);
  hour(dir, '2011072807', 5, 10);
  const a = run(dir, '--keep', '10h');
  assert.equal(a.status, 0, a.stderr);
  assert.deepEqual(
    runsJsonl(dir).map((x) => x.run),
    ['2011072807'],
  );
  // copytruncate: copied, then emptied in place; the next line goes at its start, no hole before it.
  fs.copyFileSync(runs, `${runs}.2`);
  fs.truncateSync(runs, 0);
  hour(dir, '2011072808', 5, 20);
  const b = run(dir, '--keep', '10h');
  assert.equal(b.status, 0, b.stderr);
  assert.equal(fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean).length, 1);
  assert.deepEqual(
    runsJsonl(dir).map((x) => x.run),
    ['2011072808'],
  );
  // The settings are not in runs.jsonl alone: a run without the cron's --keep is still refused.
  hour(dir, '2011072809', 5, 30);
  fs.writeFileSync(runs, '');
  assert.equal(run(dir).status, 2);
});

test('a state disk with no space at all: the message names the file the runner could not write, not "internal error: ENOSPC ... write"', (t) => {
  if (!canMount()) return t.skip('cannot mount a tmpfs here');
  const { dir, state } = stateOnTmpfs('64k');
  try {
    hour(dir, '2011072806');
    fs.mkdirSync(path.join(state, 'staging'));
    fs.writeFileSync(path.join(state, 'lock'), '');
    const fill = fs.openSync(path.join(state, 'fill'), 'w');
    try {
      for (;;) fs.writeSync(fill, Buffer.alloc(4096));
    } catch {
      /* full */
    } finally {
      fs.closeSync(fill);
    }
    const r = run(dir, '--db', path.join(dir, 'p.db'));
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /reflog-to-yacobot-queue: .*\/var\/state\/lock: cannot write the holder into the lock file: ENOSPC/);
    assert.doesNotMatch(r.stderr, /internal error/);
  } finally {
    spawnSync('umount', [state]);
  }
});

test('a late hour with an older updatetag sends nothing again and keeps the newer tag: the next hour does not send it either', () => {
  const dir = fresh();
  const x = 'http://late.example/x';
  const sentIn = () =>
    fs
      .readdirSync(path.join(dir, 'var/queue'))
      .flatMap((y) => fs.readdirSync(path.join(dir, 'var/queue', y)).map((f) => [f, fs.readFileSync(path.join(dir, 'var/queue', y, f), 'utf8')] as const))
      .filter(([, text]) => text.includes(x))
      .map(([f]) => f)
      .sort();
  const hourWith = (name: string, ts: string, tag: string, other: string) =>
    fs.writeFileSync(path.join(dir, 'var/inbox', `${name}.reflog`), reflogText(ts, [x, other], tag));
  hourWith('2011072814', '20110728141000', 'v2', 'http://a.example/');
  assert.equal(run(dir, '--keep', '10h').status, 0);
  hourWith('2011072813', '20110728133000', 'v1', 'http://b.example/'); // arrives late
  assert.equal(run(dir, '--keep', '10h').status, 0);
  const current = fs.readFileSync(path.join(dir, 'var/state/current_log'), 'utf8');
  assert.match(current, /\t20110728141000\tv2\t2\tlate\.example\thttp:\/\/late\.example\/x\n/);
  hourWith('2011072815', '20110728144500', 'v2', 'http://c.example/');
  assert.equal(run(dir, '--keep', '10h').status, 0);
  assert.deepEqual(sentIn(), ['2011072814.tsv']);
});
