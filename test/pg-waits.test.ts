// Every PostgreSQL wait bounded by the client: a backend stopped (SIGSTOP) while it
// serves a statement ends the stage, partner-db or the runner's check within the client's
// time-out (--statement-timeout and a margin). And the runner's count of a dead attempt's
// new domains waits for that attempt's COMMIT to be decided, so new_domains adds up.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BIN, ROOT, hasStackTrace, partnerDb, scratch, testEnv } from './lib/run.js';
import { FAST_SUITE, PgCluster, pgSkipReason, pgTest } from './lib/pg.js';
import { DelayProxy } from './lib/delay-proxy.js';
import { runsJsonl } from './lib/runner-state.js';
import { RUN0, freshFirstOnly, runner } from './lib/runner.js';
import { answerTimeoutMs } from '../src/core/store/pg-waits.js';
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
  /database error: cannot reach PostgreSQL at 127\.0\.0\.1:\d+: no answer within 4 s \(--statement-timeout 2 s and a margin\): the server is stopped or hung, or the network is cut/;

test('the client waits for an answer --statement-timeout and a margin: a tenth, at least 2 s; no limit with none', () => {
  assert.equal(answerTimeoutMs({ ...DEFAULT_TIMEOUTS, statementMs: 2000 }), 4000);
  assert.equal(answerTimeoutMs({ ...DEFAULT_TIMEOUTS, statementMs: 300_000 }), 330_000);
  assert.equal(answerTimeoutMs({ ...DEFAULT_TIMEOUTS, statementMs: 0 }), 0);
});

pgTest('upload-domains: its backend stopped (SIGSTOP) as a statement reaches it, it fails within the client time-out', { timeout: 240_000 }, async () => {
  const work = scratch('ms-pgw-');
  const { proxied } = newPartners(work);
  try {
    const stop = stopAtFirstStatement();
    const input = '0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n';
    const r = await runAsync(path.join(BIN, 'upload-domains'), ['--db', proxied, '--statement-timeout', '2', '--now', '20110728070000'], input, work);
    assert.ok(stop.at > 0, 'the backend was stopped');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, NO_ANSWER);
    assert.ok(!hasStackTrace(r.stderr), r.stderr);
    const waited = r.end - stop.at;
    assert.ok(waited >= 3000 && waited < 4000 + 11_000, `ended ${waited} ms after its backend stopped`);
  } finally {
    continueAll();
  }
});

pgTest('partner-db: its backend stopped as a statement reaches it, it fails within the client time-out', { timeout: 240_000 }, async () => {
  const work = scratch('ms-pgw-');
  const { proxied } = newPartners(work);
  try {
    const stop = stopAtFirstStatement();
    const r = await runAsync(path.join(BIN, 'partner-db'), ['--db', proxied, '--statement-timeout', '2', 'list'], '', work);
    assert.ok(stop.at > 0, 'the backend was stopped');
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, NO_ANSWER);
    const waited = r.end - stop.at;
    assert.ok(waited >= 3000 && waited < 4000 + 11_000, `ended ${waited} ms after its backend stopped`);
  } finally {
    continueAll();
  }
});

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
    const args = ['--db', proxied, '--statement-timeout', '2'];
    try {
      // upload-domains dies just before its COMMIT; the runner asks the database whether it happened.
      const stop = stopAtFirstStatement((t) => t.includes('SELECT added_at FROM partner_domain'));
      const r = await runner(dir, args, { env: { NODE_OPTIONS: KILL_AT_COMMIT, KILL_AT_COMMIT: 'before', KILL_WHO: 'stage' } });
      assert.ok(stop.at > 0, `the check's backend was stopped: ${r.stderr}`);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(!hasStackTrace(r.stderr), r.stderr);
      assert.match(
        r.stderr,
        new RegExp(`cannot tell whether upload-domains of run ${RUN0} committed \\d+ new domain\\(s\\) before it died \\(.*no answer within 4 s`),
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
      // someone waits for the write lock (the check, or else the rerun's own assignment).
      const next = runner(dir, ['--db', proxied]);
      for (const t0 = Date.now(); Date.now() - t0 < 60_000; await new Promise((res) => setTimeout(res, 100))) {
        if (cluster!.psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'").trim() !== '0') break;
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
