// Every PostgreSQL wait bounded by the client: a backend stopped (SIGSTOP) while it
// serves a statement ends the stage, partner-db or the runner's check within the client's
// time-out (--answer-timeout), and at the default settings a whole run within 30 s. And
// the runner's count of a dead attempt's new domains waits for that attempt's COMMIT to
// be decided, so new_domains adds up.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BIN, ROOT, hasStackTrace, partnerDb, scratch, testEnv } from './lib/run.js';
import { FAST_SUITE, PgCluster, pgSkipReason, pgTest } from './lib/pg.js';
import { DelayProxy } from './lib/delay-proxy.js';
import { runsJsonl } from './lib/runner-state.js';
import { REFLOGS, RUN0, RUNS, freshFirstOnly, runner, takeQueueFiles } from './lib/runner.js';
import { answerTimeoutMs, serverLockMs, serverStatementMs } from '../src/core/store/pg-waits.js';
import { DEFAULT_TIMEOUTS } from '../src/core/store/store.js';

let cluster: PgCluster | null = null;
let proxy: DelayProxy | null = null;
/** Backends this file stopped: continued after each test, whatever happened. */
const stopped = new Set<number>();

before(async () => {
  if (pgSkipReason() !== null || FAST_SUITE) return;
  cluster = await PgCluster.start();
  proxy = await DelayProxy.start(cluster.port);
});
after(() => {
  continueAll();
  proxy?.close();
  cluster?.remove();
});

function continueAll(): void {
  for (const pid of stopped) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  }
  stopped.clear();
  if (proxy) proxy.gate = null;
}

/** SIGSTOPs the backend that serves the proxy's connection from `port`; returns its pid. */
function stopBackend(port: number): number {
  const pid = Number(cluster!.psql('postgres', `SELECT pid FROM pg_stat_activity WHERE client_port = ${port}`).trim());
  assert.ok(pid > 0, `a backend serves port ${port}`);
  process.kill(pid, 'SIGSTOP');
  stopped.add(pid);
  return pid;
}

/** A new database with three Yacobots, and its URI through the proxy. */
function newPartners(work: string): { direct: string; proxied: string } {
  const direct = cluster!.newDatabase();
  partnerDb(work, direct, 'init');
  for (const [name, w] of [
    ['alpha', '1'],
    ['beta', '1'],
    ['gamma', '2'],
  ] as const)
    partnerDb(work, direct, 'add', name, '--weight', w);
  return { direct, proxied: proxy!.through(direct) };
}

/** Runs a binary without blocking this process (the proxy lives here); SIGKILLed after 90 s. */
function runAsync(file: string, args: string[], input: string, cwd: string): Promise<{ status: number | null; stderr: string; end: number }> {
  const child = spawn(file, args, { cwd, env: testEnv(), stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.end(input);
  const hung = setTimeout(() => child.kill('SIGKILL'), 90_000);
  return new Promise((resolve) =>
    child.on('close', (status) => {
      clearTimeout(hung);
      resolve({ status, stderr, end: Date.now() });
    }),
  );
}

/** Stops the backend as the first statement (a Query or Parse message) reaches it; returns when that was. */
function stopAtFirstStatement(match: (text: string) => boolean = () => true): { at: number } {
  const when = { at: 0 };
  proxy!.gate = (chunk, port) => {
    if (when.at !== 0 || (chunk[0] !== 0x51 && chunk[0] !== 0x50) || !match(chunk.toString('latin1'))) return;
    when.at = Date.now(); // about when the client sent it, and began to wait
    stopBackend(port);
  };
  return when;
}

const NO_ANSWER =
  /database error: cannot reach PostgreSQL at 127\.0\.0\.1:\d+: no answer within 2 s \(--answer-timeout\): the server is stopped or hung, or the network is cut/;

test('the client waits for each answer --answer-timeout; the server stops a statement before that, and a lock wait inside one with it', () => {
  const t = (answer: number, statement: number, lock = 60_000) => ({ connectMs: 5000, answerMs: answer, statementMs: statement, lockMs: lock });
  assert.deepEqual(DEFAULT_TIMEOUTS, t(20_000, 15_000));
  assert.equal(answerTimeoutMs(DEFAULT_TIMEOUTS), 20_000);
  assert.equal(serverStatementMs(DEFAULT_TIMEOUTS), 15_000);
  assert.equal(serverLockMs(DEFAULT_TIMEOUTS), 15_000);
  // An older configuration's --statement-timeout 300: the server's limit comes below the client's.
  assert.equal(serverStatementMs(t(20_000, 300_000)), 18_000);
  assert.equal(serverStatementMs(t(2000, 0)), 1000);
  assert.equal(serverLockMs(t(20_000, 15_000, 5000)), 5000);
  // Without --answer-timeout, as before it: the statement's limit and a margin (a tenth, at least 1 s).
  assert.equal(answerTimeoutMs(t(0, 300_000)), 330_000);
  assert.equal(answerTimeoutMs(t(0, 2000)), 3000);
  assert.equal(serverStatementMs(t(0, 2000)), 2000);
  assert.equal(answerTimeoutMs(t(0, 0)), 0);
  assert.equal(serverStatementMs(t(0, 0)), 0);
});

pgTest('upload-domains: its backend stopped (SIGSTOP) as a statement reaches it, it fails within the client time-out', { timeout: 240_000 }, async () => {
  const work = scratch('ms-pgw-');
  const { proxied } = newPartners(work);
  try {
    const stop = stopAtFirstStatement();
    const input = '0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n';
    const r = await runAsync(path.join(BIN, 'upload-domains'), ['--db', proxied, '--answer-timeout', '2', '--now', '20110728070000'], input, work);
    assert.ok(stop.at > 0, 'the backend was stopped');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, NO_ANSWER);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    const waited = r.end - stop.at;
    assert.ok(waited >= 1500 && waited < 2000 + 11_000, `ended ${waited} ms after its backend stopped`);
  } finally {
    continueAll();
  }
});

pgTest('partner-db: its backend stopped as a statement reaches it, it fails within the client time-out', { timeout: 240_000 }, async () => {
  const work = scratch('ms-pgw-');
  const { proxied } = newPartners(work);
  try {
    const stop = stopAtFirstStatement();
    const r = await runAsync(path.join(BIN, 'partner-db'), ['--db', proxied, '--answer-timeout', '2', 'list'], '', work);
    assert.ok(stop.at > 0, 'the backend was stopped');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, NO_ANSWER);
    const waited = r.end - stop.at;
    assert.ok(waited >= 1500 && waited < 2000 + 11_000, `ended ${waited} ms after its backend stopped`);
  } finally {
    continueAll();
  }
});

/** SIGSTOPs the whole server: the postmaster, then every process it started. */
function stopServer(): void {
  const postmaster = Number(fs.readFileSync(path.join(cluster!.data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(postmaster, 'SIGSTOP');
  stopped.add(postmaster);
  const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
    .stdout.trim()
    .split('\n')
    .filter(Boolean)
    .map(Number);
  for (const pid of children) {
    process.kill(pid, 'SIGSTOP');
    stopped.add(pid);
  }
}

/** What a failed run must leave: exit 1 without a stack trace, no queue file, the reflog in the inbox. */
function assertNothingPublished(dir: string, r: { status: number | null; stderr: string }, run = RUN0): void {
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const queue = path.join(dir, 'var/queue');
  const files = fs.existsSync(queue) ? (fs.readdirSync(queue, { recursive: true }) as string[]).filter((f) => f.endsWith('.tsv')) : [];
  assert.deepEqual(files, [], 'no queue file');
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox', `${run}.reflog`)), 'the reflog stays');
}

/** Within this of a stop, at the default settings, the run has ended (SPEC: a dead server is not a slow one). */
const DEAD_SERVER_BOUND_MS = 30_000;

for (const [what, at, stop] of [
  ["upload-domains' backend, at its first statement", (t: string) => t.includes('partner_domain') || t.includes('information_schema'), 'backend'],
  ["upload-domains' backend, at its first INSERT of new domains", (t: string) => t.includes('INSERT INTO partner_domain'), 'backend'],
  [
    'the whole server (the postmaster and every process), at the first INSERT of new domains',
    (t: string) => t.includes('INSERT INTO partner_domain'),
    'server',
  ],
  ["upload-domains' backend, at the COMMIT of its new domains", (t: string) => t.includes('COMMIT'), 'backend'],
] as const) {
  pgTest(
    `at the default settings, ${what} stopped (SIGSTOP): the run ends within 30 s, exit 1, nothing published; once it goes on, the next run commits`,
    { timeout: 300_000 },
    async (t) => {
      const dir = freshFirstOnly();
      const { proxied } = newPartners(dir);
      let stoppedAt = 0;
      const inserted = new Set<number>();
      proxy!.gate = (chunk, port) => {
        const text = chunk.toString('latin1');
        if (text.includes('INSERT INTO partner_domain')) inserted.add(port);
        if (stoppedAt !== 0 || !at(text) || (text.includes('COMMIT') && !inserted.has(port))) return;
        stoppedAt = Date.now();
        if (stop === 'server') stopServer();
        else stopBackend(port);
      };
      try {
        const r = await runner(dir, ['--db', proxied]);
        const took = Date.now() - stoppedAt;
        assert.ok(stoppedAt > 0, `stopped: ${r.stderr}`);
        assertNothingPublished(dir, r);
        assert.match(r.stderr, /no answer within 20 s \(--answer-timeout\)|no connection within 5 s/);
        t.diagnostic(`ended ${took} ms after the stop`);
        assert.ok(took < DEAD_SERVER_BOUND_MS, `ended ${took} ms after the stop: ${r.stderr}`);
      } finally {
        continueAll();
      }
      const again = await runner(dir, ['--db', proxied]);
      assert.equal(again.status, 0, again.stderr);
    },
  );
}

pgTest(
  'at the default settings, the whole server stopped before an invocation whose state has a committed run: it ends within 30 s, exit 1, nothing published',
  { timeout: 300_000 },
  async (t) => {
    const dir = freshFirstOnly();
    const { proxied } = newPartners(dir);
    const first = await runner(dir, ['--db', proxied]);
    assert.equal(first.status, 0, first.stderr);
    takeQueueFiles(dir, RUN0);
    fs.copyFileSync(path.join(REFLOGS, RUNS[1]!), path.join(dir, 'var/inbox', RUNS[1]!));
    const run1 = RUNS[1]!.replace(/\.reflog$/, '');
    stopServer();
    try {
      const r = await runner(dir, ['--db', proxied]);
      // The catch-up warning's connection and upload-domains' each wait --connect-timeout.
      assertNothingPublished(dir, r, run1);
      assert.match(r.stderr, /no connection within 5 s \(--connect-timeout\): the server is stopped or hung, or the network is cut/);
      t.diagnostic(`ended ${r.ms} ms after it started`);
      assert.ok(r.ms < DEAD_SERVER_BOUND_MS, `ended after ${r.ms} ms: ${r.stderr}`);
    } finally {
      continueAll();
    }
  },
);

const KILL_AT_COMMIT = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/kill-at-commit.js')).href}`;

/** new_domains summed over every line of runs.jsonl, and the domains the database holds. */
function counts(dir: string, direct: string): { sum: number; owned: number } {
  const sum = runsJsonl(dir).reduce((n, r) => n + Number(r.new_domains ?? 0), 0);
  const owned = Number(cluster!.psql(PgCluster.dbName(direct), 'SELECT count(*) FROM partner_domain').trim());
  return { sum, owned };
}

pgTest(
  "the runner's check of a dead upload-domains' COMMIT, its backend stopped: exit 1 within the client time-out, and the next invocation counts",
  { timeout: 300_000 },
  async () => {
    const dir = freshFirstOnly();
    const { direct, proxied } = newPartners(dir);
    const args = ['--db', proxied, '--answer-timeout', '2'];
    try {
      // upload-domains dies just before its COMMIT; the runner asks the database whether it happened.
      const stop = stopAtFirstStatement((t) => t.includes('SELECT domains FROM domain_commit'));
      const r = await runner(dir, args, { env: { NODE_OPTIONS: KILL_AT_COMMIT, KILL_AT_COMMIT: 'before', KILL_WHO: 'stage' } });
      assert.ok(stop.at > 0, `the check's backend was stopped: ${r.stderr}`);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      assert.match(
        r.stderr,
        new RegExp(`cannot tell whether upload-domains of run ${RUN0} committed \\d+ new domain\\(s\\) before it died \\(.*no answer within 2 s`),
      );
      assert.match(r.stderr, /nothing was published, and the next invocation asks again and runs the hour/);
      assert.deepEqual(runsJsonl(dir), [], 'no line until the count is known');
    } finally {
      continueAll();
    }
    const again = await runner(dir, args);
    assert.equal(again.status, 0, again.stderr);
    const { sum, owned } = counts(dir, direct);
    assert.ok(owned > 0);
    assert.equal(sum, owned, 'new_domains over runs.jsonl: the domains assigned');
  },
);

pgTest(
  'the runner killed while its COMMIT waits on a stopped backend: the next invocation waits for that COMMIT before counting',
  { timeout: 300_000 },
  async () => {
    const dir = freshFirstOnly();
    const { direct, proxied } = newPartners(dir);
    let runnerPid = 0;
    const inserted = new Set<number>();
    let killedAt = 0;
    // The COMMIT of upload-domains' assignment reaches a stopped backend, and the whole
    // runner is SIGKILLed: the transaction holds its locks, undecided, until the backend goes on.
    proxy!.gate = (chunk, port) => {
      const text = chunk.toString('latin1');
      if (text.includes('INSERT INTO partner_domain')) inserted.add(port);
      if (killedAt === 0 && inserted.has(port) && text.includes('COMMIT')) {
        stopBackend(port);
        process.kill(-runnerPid, 'SIGKILL');
        killedAt = Date.now();
      }
    };
    try {
      const r = await runner(dir, ['--db', proxied], { started: (pid) => (runnerPid = pid) });
      assert.ok(killedAt > 0, `killed at the COMMIT: ${r.stderr}`);
      assert.equal(r.signal, 'SIGKILL');
      proxy!.gate = null;
      // The next invocation while that COMMIT is still undecided; the backend goes on once
      // someone tries the write lock (the check, or else the rerun's own assignment).
      const next = runner(dir, ['--db', proxied]);
      for (const t0 = Date.now(); Date.now() - t0 < 60_000; await new Promise((res) => setTimeout(res, 100))) {
        const sql = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_try_advisory_xact_lock%' AND pid <> pg_backend_pid()";
        if (cluster!.psql('postgres', sql).trim() !== '0') break;
      }
      continueAll();
      const again = await next;
      assert.equal(again.status, 0, again.stderr);
    } finally {
      continueAll();
    }
    const { sum, owned } = counts(dir, direct);
    assert.ok(owned > 0);
    assert.equal(sum, owned, 'new_domains over runs.jsonl: the domains assigned');
  },
);
