// Two Master Servers on one PostgreSQL partner database: the runner's key flows on
// PostgreSQL, and the guarantee that no domain ever gets two owners, whichever master
// runs an hour, both at once, or one killed mid-run.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, partnerDb, runBin, scratch, testEnv } from './lib/run.js';
import { PgCluster, TEST_PASSWORD, pgSkipReason, pgTest } from './lib/pg.js';
import { generateReflog } from '../scripts/gen-reflog.js';

const SKIP = pgSkipReason();
let cluster: PgCluster | null = null;
const pg = (): PgCluster => cluster!;

before(async () => {
  if (SKIP === null) cluster = await PgCluster.start();
});
after(() => cluster?.remove());

/** Yacobots and weights of every test here: the spread is checked against these. */
const YACOBOTS: [string, number][] = [
  ['alpha', 1],
  ['beta', 1],
  ['gamma', 2],
];

/** A new partner database on the cluster with YACOBOTS. */
function partnerDatabase(work: string): string {
  const db = pg().newDatabase();
  partnerDb(work, db, 'init');
  for (const [n, w] of YACOBOTS) partnerDb(work, db, 'add', n, '--weight', String(w));
  return db;
}

/** A master's own directory: var/inbox, var/state, var/queue under it. */
function master(root: string, name: string): string {
  const dir = path.join(root, name);
  for (const d of ['var/inbox', 'var/state', 'var/queue']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  return dir;
}

/** Writes hour `hour`'s reflog (generated, `lines` lines) into `dir`'s inbox; returns its file name. */
function giveHour(dir: string, hour: number, lines = 4000): string {
  const name = `201107${String(28 + Math.floor((4 + hour) / 24)).padStart(2, '0')}${String((4 + hour) % 24).padStart(2, '0')}.reflog`;
  const fd = fs.openSync(path.join(dir, 'var/inbox', name), 'w');
  generateReflog(fd, { lines, hour, seed: 11 });
  fs.closeSync(fd);
  return name;
}

interface Done {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** Runs the runner of master `dir` on `db`; SIGKILLs its process group after `killAfter` ms when given. */
function runMaster(dir: string, db: string, opts: { killAfter?: number; onStart?: () => void } = {}): Promise<Done> {
  const child = spawn(RUNNER, ['--db', db, '--now', '20110729120000'], { cwd: dir, env: testEnv(), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  opts.onStart?.();
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = opts.killAfter === undefined ? undefined : setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), opts.killAfter);
  return new Promise((resolve) =>
    child.on('close', (status, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ status, signal, stderr });
    }),
  );
}

/** Every (domain -> Yacobot ids) the queue files of `dirs` route. */
function routedDomains(dirs: string[]): Map<string, Set<number>> {
  const m = new Map<string, Set<number>>();
  for (const dir of dirs) {
    const q = path.join(dir, 'var/queue');
    for (const y of fs.readdirSync(q)) {
      if (!/^\d+$/.test(y)) continue;
      for (const f of fs.readdirSync(path.join(q, y)).filter((n) => n.endsWith('.tsv'))) {
        for (const line of fs.readFileSync(path.join(q, y, f), 'utf8').split('\n')) {
          if (line === '') continue;
          const domain = line.split('\t')[4]!;
          m.set(domain, (m.get(domain) ?? new Set()).add(Number(y)));
        }
      }
    }
  }
  return m;
}

/** The owners the database gives. */
function owners(db: string): Map<string, number> {
  const out = pg().psql(PgCluster.dbName(db), 'SELECT domain, yacobot_id FROM partner_domain').trim();
  return new Map(out === '' ? [] : out.split('\n').map((l) => [l.split('|')[0]!, Number(l.split('|')[1])] as [string, number]));
}

/** Asserts one owner per routed domain, that owner the database's, and the owners spread by weight within 1% of the total. */
function assertOneOwnerEach(dirs: string[], db: string): void {
  const routed = routedDomains(dirs);
  const own = owners(db);
  assert.ok(routed.size > 500, `enough domains routed: ${routed.size}`);
  for (const [d, ids] of routed) {
    assert.equal(ids.size, 1, `${d} routed to one Yacobot, not ${[...ids].join(' and ')}`);
    assert.equal([...ids][0], own.get(d), `${d} routed to its owner in the database`);
  }
  const total = own.size;
  const per = new Map<number, number>();
  for (const id of own.values()) per.set(id, (per.get(id) ?? 0) + 1);
  const weight = YACOBOTS.reduce((s, [, w]) => s + w, 0);
  YACOBOTS.forEach(([name, w], i) => {
    const want = (total * w) / weight;
    const got = per.get(i + 1) ?? 0;
    assert.ok(Math.abs(got - want) <= 0.01 * total, `${name}: ${got} of ${total} domains, want ${want.toFixed(1)} within 1%`);
  });
}

pgTest(
  'two masters on one PostgreSQL: hours alternating, the same hours on both at once, one SIGKILLed mid-run and rerun; no domain has two owners',
  { timeout: 600_000 },
  async () => {
    const root = scratch('ms-two-');
    const db = partnerDatabase(root);
    const a = master(root, 'a');
    const b = master(root, 'b');
    const ok = (r: Done, who: string) => assert.equal(r.status, 0, `${who}: ${r.stderr}`);

    // Failover pattern: the hours alternate between the two masters.
    for (const hour of [1, 2, 3, 4]) {
      const dir = hour % 2 ? a : b;
      giveHour(dir, hour);
      ok(await runMaster(dir, db), `hour ${hour}`);
    }
    assertOneOwnerEach([a, b], db);

    // Both masters get the same hours and run at the same time.
    for (const hour of [5, 6]) {
      giveHour(a, hour);
      giveHour(b, hour);
    }
    const [ra, rb] = await Promise.all([runMaster(a, db), runMaster(b, db)]);
    ok(ra, 'a, hours 5-6');
    ok(rb, 'b, hours 5-6');
    assertOneOwnerEach([a, b], db);

    // Master a is SIGKILLed during its run of hour 7 (b runs it at the same time), then rerun.
    const hour7 = giveHour(a, 7, 20_000);
    giveHour(b, 7, 20_000);
    const [killed, rb7] = await Promise.all([runMaster(a, db, { killAfter: 1500 }), runMaster(b, db)]);
    ok(rb7, 'b, hour 7');
    assert.equal(killed.signal, 'SIGKILL', `a was killed mid-run: ${killed.stderr}`);
    assert.ok(fs.existsSync(path.join(a, 'var/inbox', hour7)), 'the killed run left its reflog in the inbox');
    ok(await runMaster(a, db), 'a, hour 7 again');
    assert.ok(!fs.existsSync(path.join(a, 'var/inbox', hour7)), 'the rerun committed hour 7');
    assertOneOwnerEach([a, b], db);

    // Each master's runs.jsonl names the database without its password, and no line holds one anyway.
    for (const dir of [a, b]) assert.ok(fs.readFileSync(path.join(dir, 'var/state/runs.jsonl'), 'utf8').length > 0);
  },
);

pgTest(
  'PostgreSQL stopped in the middle of a run: the run fails, nothing is published, the reflog stays; after a restart the next invocation commits',
  { timeout: 600_000 },
  async () => {
    const root = scratch('ms-stop-');
    // With a password in the URI: no message, log line or record may show it.
    const db = pg().uri(PgCluster.dbName(partnerDatabase(root)), true);
    const dir = master(root, 'm');
    const hour = giveHour(dir, 1, 60_000);
    const run = path.basename(hour, '.reflog');
    // Stopped once the run's stages are under way (the staging area exists), before it ends.
    let stopped = false;
    const poll = setInterval(() => {
      if (stopped || !fs.existsSync(path.join(dir, 'var/state/staging', run))) return;
      stopped = true;
      pg().stopServer();
    }, 20);
    const r = await runMaster(dir, db);
    clearInterval(poll);
    assert.ok(stopped, 'the server was stopped during the run');
    if (!stopped) return;
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /cannot reach PostgreSQL at 127\.0\.0\.1:\d+|database error/);
    assert.match(r.stderr, new RegExp(`run ${run} failed`));
    assert.ok(fs.existsSync(path.join(dir, 'var/inbox', hour)), 'the reflog stays in the inbox');
    assert.deepEqual(
      fs
        .readdirSync(path.join(dir, 'var/queue'))
        .filter((y) => /^\d+$/.test(y) && fs.readdirSync(path.join(dir, 'var/queue', y)).some((f) => f.endsWith('.tsv'))),
      [],
      'nothing published',
    );
    // Still down: the next invocation fails the same way, quickly (the connect time-out), and names the server.
    const down = runBin('domains-from-db', ['--db', db, '--connect-timeout', '2'], '', dir);
    assert.equal(down.status, 1);
    assert.match(down.stderr, /cannot reach PostgreSQL at 127\.0\.0\.1:\d+/);
    pg().startServer();
    const again = await runMaster(dir, db);
    assert.equal(again.status, 0, again.stderr);
    assert.ok(!fs.existsSync(path.join(dir, 'var/inbox', hour)), 'committed: the reflog moved to done/');
    assert.ok(fs.existsSync(path.join(dir, 'var/state/done', hour)));
    assertOneOwnerEach([dir], db);
    for (const text of [r.stderr, again.stderr, down.stderr, ...everyFile(path.join(dir, 'var/state'))]) {
      assert.ok(!text.includes(TEST_PASSWORD) && !text.includes(encodeURIComponent(TEST_PASSWORD)), `no password in: ${text.slice(0, 300)}`);
    }
    assert.match(r.stderr, /ms_pw:\*\*\*@127\.0\.0\.1/, 'the URI is named, its password redacted');
  },
);

/** The text of every file under `dir`. */
function everyFile(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => fs.readFileSync(path.join(e.parentPath, e.name), 'latin1'));
}
