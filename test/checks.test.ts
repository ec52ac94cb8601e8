// The checks before the chain and `reflog-to-yacobot-queue check`: a wrong --db (missing,
// or with an empty owner table beside a state with committed runs), a queue directory
// that cannot take the files, a missing inbox each fail the invocation before any stage
// runs, publishing nothing and advising no init; `check` names each and changes nothing.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { committedJob as committedRuns, deliver, newJob } from './lib/job.js';
import { RUNNER, canRunAsNobody, madeDb, runAsNobody, runRunner, scratch } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';

/** Every file under `dir` with its bytes' digest (partner.db, the lock and last-invocation.json included); a symbolic link as its target. */
function everyFile(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else if (e.isSymbolicLink()) out[r] = `-> ${fs.readlinkSync(path.join(dir, r))}`;
      else
        out[r] = createHash('sha256')
          .update(fs.readFileSync(path.join(dir, r)))
          .digest('hex');
    }
  };
  walk('.');
  return out;
}

/** A job with run 2011072806 committed and 2011072807 waiting in the inbox (the first made once, copied). */
function committedJob(): string {
  const dir = committedRuns('ms-checks-', ['2011072806']);
  deliver(dir, '2011072807');
  return dir;
}

/** Runs the runner; asserts it failed with `status` before any stage ran and published nothing; returns its stderr. */
function failsBeforeChain(dir: string, args: string[], status: number): string {
  const queued = fs.existsSync(path.join(dir, 'var/queue')) ? everyFile(path.join(dir, 'var/queue')) : {};
  const records = runsJsonl(dir).length;
  const r = runRunner(dir, ['--log-level', 'warn', ...args]);
  assert.equal(r.status, status, r.stderr);
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072807.reflog')), 'the reflog stays in the inbox');
  if (fs.existsSync(path.join(dir, 'var/queue'))) assert.deepEqual(everyFile(path.join(dir, 'var/queue')), queued, 'nothing published');
  assert.equal(runsJsonl(dir).length, records, 'no run began: no run record');
  assert.doesNotMatch(r.stderr, /analyze-dump|\binit\b/, 'no stage ran, no advice to init');
  return r.stderr;
}

/** `check` with `args`: its exit status and its lines by check name. */
function check(dir: string, args: string[] = []): { status: number | null; lines: Map<string, string>; stdout: string } {
  const r = runRunner(dir, ['check', ...args]);
  assert.equal(r.stderr, '', 'check writes its lines to stdout');
  const lines = new Map<string, string>();
  for (const l of r.stdout.split('\n').filter(Boolean)) {
    const m = /^(ok|FAIL) ([a-z-]+): /.exec(l);
    assert.ok(m, `a check line: ${l}`);
    lines.set(m[2]!, l);
  }
  return { status: r.status, lines, stdout: r.stdout };
}

test('check: passes on a good set-up, one ok line per check, and changes nothing (no lock file, no database file)', () => {
  const dir = committedJob();
  fs.rmSync(path.join(dir, 'var/state/lock'));
  const before = everyFile(dir);
  const c = check(dir);
  assert.equal(c.status, 0, c.stdout);
  assert.deepEqual([...c.lines.keys()], ['config', 'inbox', 'state', 'settings', 'memory', 'database', 'identity', 'queue']);
  for (const l of c.lines.values()) assert.match(l, /^ok /);
  assert.match(c.lines.get('database')!, /2 Yacobot\(s\), 2 active, \d+ domain\(s\)/);
  assert.deepEqual(everyFile(dir), before, 'check changed nothing');
});

test('a missing --db on a state with committed runs: "wrong --db?" before any stage, no init; check names it', () => {
  const dir = committedJob();
  const stderr = failsBeforeChain(dir, ['--db', 'var/elsewhere.db'], 1);
  assert.match(stderr, /elsewhere\.db: wrong --db\? the state .*var\/state has committed runs \(the last: run 2011072806\), but it does not exist/);
  assert.ok(!fs.existsSync(path.join(dir, 'var/elsewhere.db')), 'no database made');
  const c = check(dir, ['--db', 'var/elsewhere.db']);
  assert.equal(c.status, 1);
  assert.match(c.lines.get('database')!, /^FAIL database: .*wrong --db\?/);
  assert.doesNotMatch(c.stdout, /\binit\b/);
  assert.match(c.lines.get('inbox')!, /^ok /, 'the other checks still run');
});

test('an empty owner table on a state with committed runs is "wrong --db?"; --reset-current-log goes on with it', () => {
  const dir = committedJob();
  madeDb(dir, 'var/fresh.db', [['add', 'y1']]);
  const stderr = failsBeforeChain(dir, ['--db', 'var/fresh.db'], 1);
  assert.match(stderr, /fresh\.db: wrong --db\? .* but its owner table is empty: .*--reset-current-log/);
  assert.match(check(dir, ['--db', 'var/fresh.db']).lines.get('database')!, /^FAIL .*owner table is empty/);
  const on = runRunner(dir, ['--log-level', 'warn', '--db', 'var/fresh.db', '--reset-current-log']);
  assert.equal(on.status, 0, on.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.status, 'ok');
});

test('a new set-up without a database is told to create one (no committed run: init is the remedy)', () => {
  const dir = newJob('ms-checks-new-');
  fs.rmSync(path.join(dir, 'var/state/partner.db'));
  deliver(dir, '2011072807');
  const r = runRunner(dir, ['--log-level', 'warn']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /database does not exist; create one with: partner-db --db \S+ init$/m);
  assert.equal(runsJsonl(dir).length, 0, 'no run began');
});

test("a Yacobot's queue directory that is a symbolic link to nothing fails before any stage (the commit could not make it); check names it", () => {
  const dir = committedJob();
  fs.renameSync(path.join(dir, 'var/queue/2'), path.join(dir, 'var/queue/2.aside'));
  fs.symlinkSync('/nonexistent/queue-2', path.join(dir, 'var/queue/2'));
  const stderr = failsBeforeChain(dir, [], 1);
  assert.match(stderr, /var\/queue\/2: is a symbolic link to \/nonexistent\/queue-2, which is not there, .*mkdir -p \/nonexistent\/queue-2/);
  assert.match(check(dir).lines.get('queue')!, /^FAIL queue: .*var\/queue\/2: is a symbolic link to \/nonexistent\/queue-2/);
  // The link's target made: both pass.
  fs.symlinkSync(path.join(dir, 'var/queue/2.aside'), path.join(dir, 'var/queue/2.link'));
  fs.rmSync(path.join(dir, 'var/queue/2'));
  fs.renameSync(path.join(dir, 'var/queue/2.link'), path.join(dir, 'var/queue/2'));
  assert.match(check(dir).lines.get('queue')!, /^ok /);
});

test("a queue directory that cannot take a Yacobot's files fails before any stage; check names it", () => {
  const dir = committedJob();
  fs.renameSync(path.join(dir, 'var/queue/2'), path.join(dir, 'var/queue/2.aside'));
  fs.writeFileSync(path.join(dir, 'var/queue/2'), '');
  const stderr = failsBeforeChain(dir, [], 1);
  assert.match(stderr, /var\/queue\/2: is not a directory, where Yacobot 2's queue directory goes/);
  const c = check(dir);
  assert.equal(c.status, 1);
  assert.match(c.lines.get('queue')!, /^FAIL queue: .*var\/queue\/2: is not a directory/);
  // The three faults at once: each named on its own line (the queue's Yacobots from its directories, the database unread).
  const all = check(dir, ['--db', 'var/elsewhere.db', '--inbox', 'var/no-inbox']);
  assert.equal(all.status, 1);
  assert.deepEqual(
    [...all.lines].filter(([, l]) => l.startsWith('FAIL')).map(([k]) => k),
    ['inbox', 'database', 'queue'],
    all.stdout,
  );
  assert.match(all.lines.get('queue')!, /var\/queue\/2: is not a directory/);
  assert.doesNotMatch(all.stdout, /\binit\b/);
});

test('a queue directory this user may not write (another owner) fails before any stage, naming the fix', { skip: !canRunAsNobody(RUNNER) }, () => {
  const dir = committedJob();
  fs.chmodSync(dir, 0o755);
  for (const f of [dir, ...listTree(dir)]) fs.chownSync(f, 65534, 65534);
  fs.chownSync(path.join(dir, 'var/queue/1'), 0, 0);
  fs.chmodSync(path.join(dir, 'var/queue/1'), 0o755);
  const r = runAsNobody(dir, RUNNER, ['--log-level', 'warn']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    /var\/queue\/1: cannot write here: EACCES; Yacobot 1's queue files go here \(give it to this user: chown nobody .*\); nothing was run/,
  );
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072807.reflog')));
  assert.equal(runsJsonl(dir).length, 1);
  const c = runAsNobody(dir, RUNNER, ['check', '--db', 'var/elsewhere.db']);
  assert.equal(c.status, 1);
  assert.match(c.stdout, /^FAIL database: .*wrong --db\?/m);
  assert.match(c.stdout, /^FAIL queue: .*var\/queue\/1: cannot write here: EACCES/m);
});

test('a missing inbox: exit 2 before anything; check names it and exits 1', () => {
  const dir = committedJob();
  const r = runRunner(dir, ['--inbox', 'var/no-inbox']);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--inbox .*no-inbox: is not an existing directory/);
  const c = check(dir, ['--inbox', 'var/no-inbox']);
  assert.equal(c.status, 1);
  assert.match(c.lines.get('inbox')!, /^FAIL inbox: --inbox .*no-inbox: is not an existing directory/);
});

test('check: a config file that cannot be read is one FAIL line, exit 1; settings that differ are named', () => {
  const dir = committedJob();
  fs.writeFileSync(path.join(dir, 'bad.conf'), 'keep = 10h\nkepe = 1h\n');
  const bad = runRunner(dir, ['check', '--config', 'bad.conf']);
  assert.equal(bad.status, 1, bad.stderr);
  assert.match(bad.stdout, /^FAIL config: bad\.conf:2: unknown key 'kepe'/);
  const c = check(dir, ['--keep', '10h']);
  assert.equal(c.status, 1);
  assert.match(c.lines.get('settings')!, /^FAIL settings: settings differ .*--keep 10h here, 1h stored/);
});

test('an unreachable PostgreSQL --db fails before any stage, within --connect-timeout', () => {
  const dir = committedJob();
  const t0 = Date.now();
  const stderr = failsBeforeChain(dir, ['--db', 'postgresql://nobody@127.0.0.1:1/none', '--connect-timeout', '2'], 1);
  assert.match(stderr, /127\.0\.0\.1:1/);
  assert.ok(Date.now() - t0 < 20_000);
});

test('the accepted settings change names the settings that changed, and only those', () => {
  const dir = committedJob();
  const r = runRunner(dir, ['--log-level', 'warn', '--max-per-domain', '50', '--accept-settings-change']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /settings change accepted \(--accept-settings-change\): --max-per-domain 50 replaces --max-per-domain none once a run commits/);
  assert.doesNotMatch(r.stderr, /--keep|--resend-after/);
});

/** Every path under `dir`. */
function listTree(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((r) => path.join(dir, r));
}

test('status and explain on a state directory with no trace of the job name a wrong --state or a missing --config', () => {
  const dir = scratch('ms-checks-empty-');
  const s = runRunner(dir, ['status']);
  assert.equal(s.status, 1);
  assert.match(
    s.stdout,
    /^NOT healthy: no invocation recorded: \S+var\/state holds no trace of this job \(no such directory\): a wrong --state, or the cron's --config not given here\?/,
  );
  const e = runRunner(dir, ['explain', 'http://a.example/x']);
  assert.equal(e.status, 1);
  assert.match(e.stderr, /no such database, and \S+ holds no trace of this job .*Give the options the cron uses/);
  assert.doesNotMatch(e.stderr, /\binit\b/);
});

test('no active Yacobot fails before any stage, naming the partner-db command', () => {
  const dir = committedJob();
  const db = new Database(path.join(dir, 'var/state/partner.db'));
  db.exec('UPDATE yacobot SET active = 0');
  db.close();
  const stderr = failsBeforeChain(dir, [], 1);
  assert.match(stderr, /partner\.db: no active Yacobot; add one with: partner-db --db \S+partner\.db add NAME \(or enable one\)/);
  assert.match(check(dir).lines.get('database')!, /^FAIL database: .*no active Yacobot/);
});
