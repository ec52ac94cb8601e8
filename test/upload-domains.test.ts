// upload-domains: least-loaded spread, rendezvous agreement, concurrent runs on one
// database, disabled Yacobots, reruns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { BIN, madeDb, partnerDb, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import { FAST_SUITE } from './lib/pg.js';
import { LeastLoaded, loadRendezvous } from '../src/core/store/assign.js';
import { SqliteStore } from '../src/core/store/sqlite.js';
import { openDb } from '../src/core/store/sqlite-db.js';
import { DataError } from '../src/core/errors.js';
import { SPOOL_PREFIX, chooserFor } from '../src/stages/upload-domains.js';
import { loadDomainMap, writeDomainMap } from '../src/core/domain-map.js';
import { SQLITE, backends, type Backend } from './lib/backends.js';
import { HOST_TAG, ownedTempPrefix } from '../src/core/temps.js';

/** A filtered_log with one record per domain of `domains`, the whole list `repeat` times over. */
function filtered(domains: string[], repeat = 1): string {
  let out = '';
  let i = 0;
  for (let r = 0; r < repeat; r++) {
    for (const d of domains) {
      i++;
      out += `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\t${d}\thttp://${d}/${r}\n`;
    }
  }
  return out;
}

const BACKENDS = backends();

/** The database of each scratch directory that newDbOn made on PostgreSQL (else p.db in it). */
const pgDbs = new Map<string, { be: Backend; db: string }>();
const dbOf = (work: string): string => pgDbs.get(work)?.db ?? 'p.db';

const pdb = (work: string, ...args: string[]): string => partnerDb(work, dbOf(work), ...args);

function newDb(yacobots: [string, number][]): string {
  const work = scratch('ms-up-');
  madeDb(
    work,
    'p.db',
    yacobots.map(([name, w]) => ['add', name, '--weight', String(w)]),
  );
  return work;
}

/** newDb on backend `be`: a scratch directory whose database (dbOf) has these Yacobots. */
function newDbOn(be: Backend, yacobots: [string, number][]): string {
  if (be.name === 'sqlite') return newDb(yacobots);
  const work = scratch('ms-up-');
  pgDbs.set(work, { be, db: be.newDb(work) });
  pdb(work, 'init');
  for (const [name, w] of yacobots) pdb(work, 'add', name, '--weight', String(w));
  return work;
}

/** The rows of `sql` on the database of `work`, each as its columns' text. */
function rowsOf(work: string, sql: string): string[][] {
  return (pgDbs.get(work)?.be ?? SQLITE).rows(work, dbOf(work), sql);
}

/** Runs `sql` (a change) on the database of `work`. */
function execOn(work: string, sql: string): void {
  (pgDbs.get(work)?.be ?? SQLITE).exec(work, dbOf(work), sql);
}

/** `s` as a regular expression matching it literally. */
const literally = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function owners(work: string): Map<string, number> {
  return new Map(rowsOf(work, 'SELECT domain, yacobot_id FROM partner_domain').map(([d, id]) => [d!, Number(id)]));
}

/** Parses routed output into domain -> set of Yacobot ids, checking it is the input with an id in front. */
function routing(stdout: string, input: string): Map<string, Set<number>> {
  const lines = stdout.split('\n').filter((l) => l);
  const inLines = input.split('\n').filter((l) => l);
  assert.deepEqual(
    lines.map((l) => l.slice(l.indexOf('\t') + 1)),
    inLines,
    'routed records are the input records, in input order',
  );
  const m = new Map<string, Set<number>>();
  for (const l of lines) {
    const f = l.split('\t');
    const s = m.get(f[5]!) ?? new Set<number>();
    s.add(Number(f[0]));
    m.set(f[5]!, s);
  }
  return m;
}

const domainsN = (n: number, prefix = 'd') => Array.from({ length: n }, (_, i) => `${prefix}${i}.com`);

for (const be of BACKENDS) {
  test(`least-loaded: 1000 new domains over weights 1,1,2 land within one domain of the weight shares [${be.name}]`, () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
      ['c', 2],
    ]);
    const input = filtered(domainsN(1000), 2);
    const r = runBin('upload-domains', ['--db', dbOf(work), '--now', '20110728070000'], input, work);
    assert.equal(r.status, 0, r.stderr);
    const routed = routing(r.stdout, input);
    const own = owners(work);
    assert.equal(own.size, 1000);
    const per = new Map<number, number>();
    for (const [d, ids] of routed) {
      assert.equal(ids.size, 1, `${d} routed to one Yacobot`);
      const id = [...ids][0]!;
      assert.equal(id, own.get(d), `${d} routed to its owner in the database`);
      per.set(id, (per.get(id) ?? 0) + 1);
    }
    const want = new Map([
      [1, 250],
      [2, 250],
      [3, 500],
    ]);
    for (const [id, n] of want) assert.ok(Math.abs((per.get(id) ?? 0) - n) <= 1, `Yacobot ${id}: ${per.get(id)} domains, want ${n}±1`);
    const s = summaryOf(r.stderr);
    assert.equal(s.domains_new, 1000);
    assert.equal(s.assigned_by_us, 1000);
    assert.equal(s.records_out, 2000);
  });
}

test('least-loaded takes existing loads into account and spreads a batch', () => {
  const ll = new LeastLoaded([
    { id: 2, weight: 1, domains: 5 },
    { id: 1, weight: 1, domains: 7 },
    { id: 3, weight: 2, domains: 0 },
  ]);
  const picks = Array.from({ length: 12 }, () => ll.pick());
  // 3 first (load 0) until it reaches 2's load (5/1 = 10/2), then ties go to the smaller id.
  assert.deepEqual(picks.slice(0, 10), [3, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
  assert.deepEqual(picks.slice(10), [2, 3]);
});

test('least-loaded: ties go to the smallest id whatever order the Yacobots are given in', () => {
  const ll = new LeastLoaded([
    { id: 3, weight: 1, domains: 0 },
    { id: 1, weight: 1, domains: 0 },
    { id: 2, weight: 1, domains: 0 },
  ]);
  assert.deepEqual(
    Array.from({ length: 6 }, () => ll.pick()),
    [1, 2, 3, 1, 2, 3],
  );
});

test('least-loaded: loads equal in decimal are a tie (smallest id), though 3 x 0.1 and 1 x 0.3 differ in binary', () => {
  // 3 domains / 0.3 and 1 domain / 0.1 are both 10.
  for (const [w1, d1, w2, d2] of [
    [0.3, 3, 0.1, 1],
    [0.7, 7, 0.1, 1],
    [0.1, 1, 0.3, 3],
    [1.1, 11, 0.1, 1],
  ] as const) {
    assert.equal(
      new LeastLoaded([
        { id: 1, weight: w1, domains: d1 },
        { id: 2, weight: w2, domains: d2 },
      ]).pick(),
      1,
      `${d1}/${w1} against ${d2}/${w2}`,
    );
  }
  // A real difference still decides, however small: 3/0.3 = 10 against 1/0.1000001 = 9.99999,
  // weights of 1 and 1.0000000000001 with a domain each, and millions of domains.
  for (const [w1, d1, w2, d2] of [
    [0.3, 3, 0.1000001, 1],
    [1, 1, 1.0000000000001, 1],
    [1000000, 10000001, 999999.91, 10000000], // 10.000001 against 10.0000009
    [1e-7, 1, 2e-7, 1],
    // 3/0.3333333333333333 = 9.0000000000000009 against 9/1: equal as doubles, so a
    // division of the scaled weights would call it a tie.
    [0.3333333333333333, 3, 1, 9],
  ] as const) {
    assert.equal(
      new LeastLoaded([
        { id: 1, weight: w1, domains: d1 },
        { id: 2, weight: w2, domains: d2 },
      ]).pick(),
      2,
      `${d1}/${w1} against ${d2}/${w2}`,
    );
  }
  assert.equal(
    new LeastLoaded([
      { id: 1, weight: 1e-7, domains: 1 },
      { id: 2, weight: 0.0000001, domains: 1 },
    ]).pick(),
    1,
    'the same weight written two ways',
  );
  // The same through the stage.
  const w = newDb([
    ['y1', 0.3],
    ['y2', 0.1],
  ]);
  for (const d of ['a', 'b', 'c']) pdb(w, 'assign', `${d}.com`, 'y1');
  pdb(w, 'assign', 'd.com', 'y2');
  const r = runBin('upload-domains', ['--db', 'p.db', '--now', '20110727210000'], filtered(['new.com']), w);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.split('\t')[0], '1');
});

for (const be of BACKENDS) {
  test(`rendezvous: two separate databases with the same Yacobots assign every new domain alike [${be.name}]`, () => {
    const ys: [string, number][] = [
      ['a', 1],
      ['b', 2],
      ['c', 1],
      ['d', 0.5],
    ];
    const w1 = newDbOn(be, ys);
    const w2 = newDbOn(be, ys);
    const doms = domainsN(400, 'r');
    // Different inputs, orders and earlier history: only the Yacobot list matters.
    pdb(w2, 'assign', 'unrelated.com', 'a');
    const in1 = filtered(doms);
    const in2 = filtered([...doms].reverse());
    const r1 = runBin('upload-domains', ['--db', dbOf(w1), '--assign', 'rendezvous'], in1, w1);
    const r2 = runBin('upload-domains', ['--db', dbOf(w2), '--assign', 'rendezvous'], in2, w2);
    assert.equal(r1.status, 0, r1.stderr);
    assert.equal(r2.status, 0, r2.stderr);
    const o1 = owners(w1);
    const o2 = owners(w2);
    const per = new Map<number, number>();
    for (const d of doms) {
      assert.equal(o1.get(d), o2.get(d), `owner of ${d}`);
      per.set(o1.get(d)!, (per.get(o1.get(d)!) ?? 0) + 1);
    }
    // Weighted: b (weight 2 of 4.5) gets clearly more than d (0.5 of 4.5); everyone gets some.
    for (const id of [1, 2, 3, 4]) assert.ok((per.get(id) ?? 0) > 0, `Yacobot ${id} got domains`);
    assert.ok(per.get(2)! > 2 * per.get(4)!, `weights matter: ${JSON.stringify([...per])}`);
    // The routed output agrees with the databases too.
    for (const [d, ids] of routing(r1.stdout, in1)) assert.deepEqual([...ids], [o1.get(d)]);
  });
}

test('rendezvous shares follow the weights over many domains', async () => {
  const pick = await loadRendezvous();
  const ys = [
    { id: 1, weight: 1 },
    { id: 2, weight: 1 },
    { id: 3, weight: 2 },
  ];
  const per = [0, 0, 0, 0];
  for (let i = 0; i < 20000; i++) per[pick(`dom${i}.example`, ys)]!++;
  assert.ok(Math.abs(per[3]! / 20000 - 0.5) < 0.02, `weight 2 share ${per[3]! / 20000}`);
  assert.ok(Math.abs(per[1]! / 20000 - 0.25) < 0.02, `weight 1 share ${per[1]! / 20000}`);
  // Removing a Yacobot only moves the domains it had.
  for (let i = 0; i < 2000; i++) {
    const d = `dom${i}.example`;
    const before = pick(d, ys);
    if (before !== 2) assert.equal(pick(d, [ys[0]!, ys[2]!]), before, d);
  }
});

/** Runs upload-domains with stdin held open until `release` resolves; `pid` to watch it meanwhile. */
function startUpload(work: string, args: string[], input: string, release: Promise<void>, tail = '') {
  const child = spawn(path.join(BIN, 'upload-domains'), args, { cwd: work, env: testEnv() });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b) => (stdout += b));
  child.stderr.on('data', (b) => (stderr += b));
  child.stdin.write(input);
  void release.then(() => child.stdin.end(tail));
  const done = new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (status) => resolve({ status, stdout, stderr })),
  );
  return { pid: child.pid!, done };
}

/**
 * Whether upload-domains `pid` has looked up all of its input so far: it spooled a new
 * domain's record (its spool file exists), and its main thread sleeps waiting for more
 * input (in epoll_wait; where the kernel does not name the wait, asleep at all).
 */
function waitsWithAllLookedUp(pid: number): boolean {
  if (!fs.readdirSync(os.tmpdir()).some((f) => f.startsWith(`.upload-domains-${pid}-`))) return false;
  try {
    const wchan = fs.readFileSync(`/proc/${pid}/wchan`, 'utf8');
    if (wchan !== '' && wchan !== '0') return /epoll/.test(wchan);
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('S');
  } catch {
    return false;
  }
}

for (const be of BACKENDS) {
  test(`two upload-domains at once on one database never give a domain two owners [${be.name}]`, {
    skip: FAST_SUITE && 'a race (npm run test:all)',
  }, async () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
      ['c', 1],
    ]);
    const shared = domainsN(300, 's');
    const onlyA = domainsN(100, 'a');
    const onlyB = domainsN(100, 'b');
    const inA = filtered([...shared, ...onlyA]);
    const inB = filtered([...onlyB, ...[...shared].reverse()]);
    let go!: () => void;
    const release = new Promise<void>((r) => (go = r));
    // Different assignment rules, so a process that kept its own choice would disagree.
    const pa = startUpload(work, ['--db', dbOf(work), '--assign', 'least-loaded'], inA, release);
    const pb = startUpload(work, ['--db', dbOf(work), '--assign', 'rendezvous'], inB, release);
    // Both have looked every domain up (and found it new) before either commits. (A fixed
    // 1500 ms was too short for two Node starts on a loaded machine: then the later one
    // found the shared domains already assigned, and nobody lost a race.)
    const deadline = Date.now() + 60_000;
    while (!(waitsWithAllLookedUp(pa.pid) && waitsWithAllLookedUp(pb.pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    go();
    const [ra, rb] = await Promise.all([pa.done, pb.done]);
    assert.equal(ra.status, 0, ra.stderr);
    assert.equal(rb.status, 0, rb.stderr);
    const own = owners(work);
    assert.equal(own.size, 500);
    for (const [r, input] of [
      [ra, inA],
      [rb, inB],
    ] as const) {
      for (const [d, ids] of routing(r.stdout, input)) assert.deepEqual([...ids], [own.get(d)], `${d} routed to the database's owner`);
    }
    const sa = summaryOf(ra.stderr);
    const sb = summaryOf(rb.stderr);
    assert.equal(Number(sa.assigned_by_us) + Number(sb.assigned_by_us), 500, 'each domain assigned once');
    assert.equal(Number(sa.lost_race) + Number(sb.lost_race), 300, 'the shared domains were lost by one of the two');
  });
}

for (const be of BACKENDS) {
  test(`a disabled Yacobot gets no records, even through a stale --map [${be.name}]`, () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
      ['c', 1],
    ]);
    const doms = domainsN(90, 'x');
    const input = filtered(doms);
    assert.equal(runBin('upload-domains', ['--db', dbOf(work), '--map', 'map'], input, work).status, 0);
    const before = owners(work);
    assert.ok([...before.values()].includes(2));
    pdb(work, 'disable', 'b');
    const r = runBin('upload-domains', ['--db', dbOf(work), '--map', 'map'], filtered([...doms, 'fresh.com']), work);
    assert.equal(r.status, 0, r.stderr);
    const routed = r.stdout
      .split('\n')
      .filter((l) => l)
      .map((l) => Number(l.split('\t')[0]));
    assert.equal(routed.length, 91);
    assert.ok(!routed.includes(2), 'nothing routed to the disabled Yacobot');
    const after = owners(work);
    assert.ok(![...after.values()].includes(2), 'the database gives it no domain');
    for (const [d, id] of before) if (id !== 2) assert.equal(after.get(d), id, `${d} did not move`);
    const map = fs.readFileSync(path.join(work, 'map'), 'utf8');
    assert.ok(!/\t2\n/.test(map), 'the rewritten map names it nowhere');
    const lines = map.split('\n').filter((l) => l);
    assert.deepEqual(
      [...lines].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
      lines,
      'map sorted bytewise',
    );
    assert.equal(lines.length, 91);
  });
}

for (const be of BACKENDS) {
  test(`reruns with the same --now give identical rows and output [${be.name}]`, () => {
    const input = filtered(domainsN(50, 'z'));
    const dump = (work: string) => {
      return rowsOf(work, 'SELECT * FROM partner_domain ORDER BY domain');
    };
    const ys: [string, number][] = [
      ['a', 1],
      ['b', 3],
    ];
    const w1 = newDbOn(be, ys);
    const w2 = newDbOn(be, ys);
    const r1 = runBin('upload-domains', ['--db', dbOf(w1), '--now', '20110728070000'], input, w1);
    const r2 = runBin('upload-domains', ['--db', dbOf(w2), '--now', '20110728070000'], input, w2);
    assert.equal(r1.status, 0, r1.stderr);
    assert.equal(r2.status, 0, r2.stderr);
    assert.equal(r1.stdout, r2.stdout);
    assert.deepEqual(dump(w1), dump(w2));
    // Second run on the same database: every domain is known now, nothing changes.
    const again = runBin('upload-domains', ['--db', dbOf(w1), '--now', '20990101000000'], input, w1);
    assert.equal(again.stdout, r1.stdout);
    assert.equal(summaryOf(again.stderr).domains_new, 0);
    assert.deepEqual(dump(w1), dump(w2));
  });
}

for (const be of BACKENDS) {
  test(`a commit that adds domains records its token in domain_commit and removes the rows older than 90 days [${be.name}]`, () => {
    const work = newDbOn(be, [['a', 1]]);
    const day = 86_400_000;
    const at = (ms: number) => new Date(Date.now() - ms).toISOString();
    for (const [token, ms] of [
      ['old', 91 * day],
      ['older', 400 * day],
      ['recent', 89 * day],
    ] as const)
      be.exec(work, dbOf(work), `INSERT INTO domain_commit (token, domains, committed_at) VALUES ('${token}', 1, '${at(ms)}')`);
    const r = runBin('upload-domains', ['--db', dbOf(work), '--now', '20110728070000', '--log-level', 'info'], filtered(['new.example']), work);
    assert.equal(r.status, 0, r.stderr);
    const token = /"committing":1,"token":"([0-9a-f]{32})"/.exec(r.stderr)?.[1];
    assert.ok(token, r.stderr);
    assert.deepEqual(
      be.rows(work, dbOf(work), 'SELECT token, domains FROM domain_commit ORDER BY token').map(([t, n]) => [t, Number(n)]),
      [
        ['recent', 1],
        [token, 1],
      ].sort(),
    );
  });
}

for (const be of BACKENDS) {
  test(`no active Yacobot: fails before any output even when every domain is known [${be.name}]`, () => {
    const work = newDbOn(be, [['a', 1]]);
    pdb(work, 'assign', 'k.com', 'a');
    execOn(work, 'UPDATE yacobot SET active = 0');
    const db = literally(dbOf(work));
    const r = runBin('upload-domains', ['--db', dbOf(work)], filtered(['k.com']), work);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, failedOutput('upload-domains'));
    assert.match(r.stderr, new RegExp(`upload-domains: ${db}: no active Yacobot; add one with: partner-db --db ${db} add NAME`));
  });
}

test('no active Yacobot at commit time (all disabled while the input was read): an error saying so, and no row written', async () => {
  const work = newDb([['a', 1]]);
  const db = openDb(path.join(work, 'p.db'));
  const store = new SqliteStore(db, 'p.db');
  try {
    db.prepare('UPDATE yacobot SET active = 0').run();
    await assert.rejects(
      store.assignNew({ count: 1, name: () => 'new.com', owner: () => undefined }, chooserFor('least-loaded', null), '20110728070000'),
      (e: unknown) => e instanceof DataError && /^no active Yacobot at commit time \(disabled during the run\?\)/.test(e.message) && e.place?.file === 'p.db',
    );
    assert.equal(db.prepare('SELECT count(*) FROM partner_domain').pluck().get(), 0);
  } finally {
    db.close();
  }
});

test('a spooled run leaves no spool file behind, on success or failure', () => {
  const work = newDb([['a', 1]]);
  const tmp = path.join(work, 'spool');
  const good = filtered(domainsN(20, 'q'));
  const r = runBin('upload-domains', ['--db', 'p.db', '--tmp', tmp], good, work);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(summaryOf(r.stderr).spooled, 20);
  assert.deepEqual(fs.readdirSync(tmp), []);
  const bad = filtered(domainsN(20, 'w')) + 'garbage\n';
  const f = runBin('upload-domains', ['--db', 'p.db', '--tmp', tmp], bad, work);
  assert.equal(f.status, 1);
  assert.match(f.stderr, /upload-domains: -:21: expected 6 fields/);
  assert.deepEqual(fs.readdirSync(tmp), []);
  assert.equal(owners(work).size, 20, 'a failed run assigns nothing');
});

test('--map: a repeated, out-of-order or malformed domain is an error naming the line; a FIFO map is refused before the database changes', () => {
  const work = newDb([['a', 1]]);
  const input = filtered(['new.com']);
  for (const [text, want] of [
    ['a.com\t1\na.com\t1\n', /^upload-domains: map:2: domain a\.com appears twice\n/],
    ['b.com\t1\na.com\t1\n', /^upload-domains: map:2: not sorted: a\.com after b\.com\n/],
    // Domains no stream carries (was: accepted, and written back into the map).
    ['D1.com\t1\n', /^upload-domains: map:1: bad domain 'D1\.com' \(want lower-case ASCII/],
    ['a.com\t1\nпример.рф\t1\n', /^upload-domains: map:2: bad domain 'пример\.рф'/],
    ['a b.com\t1\n', /^upload-domains: map:1: bad domain 'a b\.com'/],
  ] as const) {
    fs.writeFileSync(path.join(work, 'map'), text);
    const r = runBin('upload-domains', ['--db', 'p.db', '--map', 'map'], input, work);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, failedOutput('upload-domains'));
    assert.match(r.stderr, want);
  }
  execFileSync('mkfifo', [path.join(work, 'fifo')]);
  const f = runBin('upload-domains', ['--db', 'p.db', '--map', 'fifo'], input, work);
  assert.equal(f.status, 1, f.stderr);
  assert.match(f.stderr, /^upload-domains: fifo: is not a regular file: refusing to replace it\n/);
  assert.equal(owners(work).size, 0, 'nothing committed');
});

for (const be of BACKENDS) {
  test(`a domain the database gives to an inactive Yacobot (set so by hand) is routed there, with a warning and a count [${be.name}]`, () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
    ]);
    pdb(work, 'assign', 'old.com', 'b');
    execOn(work, 'UPDATE yacobot SET active = 0 WHERE id = 2'); // by hand, not partner-db disable
    fs.writeFileSync(path.join(work, 'map'), 'old.com\t2\n');
    const r = runBin('upload-domains', ['--db', dbOf(work), '--map', 'map', '--now', '20110727210000'], filtered(['old.com', 'new.com']), work);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(
      r.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t')[0]),
      ['2', '1'],
    );
    const s = summaryOf(r.stderr);
    assert.equal(s.domains_of_inactive, 1);
    const db = literally(dbOf(work));
    assert.match(
      r.stderr,
      new RegExp(`1 domain\\(s\\) belong to inactive Yacobot\\(s\\) 2 and were routed to them; to move them to active ones: partner-db --db ${db} disable 2`),
    );
  });
}

test('least-loaded: weights written with different numbers of decimals (1 and 0.5, 2.25 and 3) and tiny ones (1e-7) share by their values', () => {
  const spread = (ys: { id: number; weight: number }[], n: number) => {
    const l = new LeastLoaded(ys.map((y) => ({ ...y, domains: 0 })));
    const got = new Map<number, number>();
    for (let i = 0; i < n; i++) {
      const id = l.pick();
      got.set(id, (got.get(id) ?? 0) + 1);
    }
    return ys.map((y) => got.get(y.id) ?? 0);
  };
  assert.deepEqual(
    spread(
      [
        { id: 1, weight: 1 },
        { id: 2, weight: 0.5 },
      ],
      30,
    ),
    [20, 10],
  );
  assert.deepEqual(
    spread(
      [
        { id: 1, weight: 2.25 },
        { id: 2, weight: 3 },
      ],
      21,
    ),
    [9, 12],
  );
  // String(0.0000001) is '1e-7': the exponent counts.
  assert.deepEqual(
    spread(
      [
        { id: 1, weight: 0.0000001 },
        { id: 2, weight: 0.0000002 },
        { id: 3, weight: 1e-6 },
      ],
      26,
    ),
    [2, 4, 20],
  );
});

test('a spool that a SIGKILLed run left in --tmp is removed by the next run; live, foreign and unrelated names stay', { timeout: 60_000 }, async () => {
  const work = newDb([['a', 1]]);
  const tmp = path.join(work, 'spool');
  // Killed while it waits for more input, its first new domain's record spooled.
  const child = spawn(path.join(BIN, 'upload-domains'), ['--db', 'p.db', '--tmp', tmp], { cwd: work, env: testEnv(), stdio: ['pipe', 'ignore', 'ignore'] });
  const ended = new Promise((r) => child.on('close', r));
  child.stdin.write(filtered(domainsN(5, 'k')));
  const spools = () => (fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((f) => f.startsWith(`${SPOOL_PREFIX}${child.pid}-${HOST_TAG}-`)) : []);
  for (const deadline = Date.now() + 30_000; spools().length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
  child.kill('SIGKILL');
  await ended;
  const left = spools();
  assert.equal(left.length, 1, 'the killed run left its spool');
  const keep = [
    `${ownedTempPrefix(SPOOL_PREFIX)}1.spool`,
    `${SPOOL_PREFIX}${child.pid}-${HOST_TAG === '00000000' ? '11111111' : '00000000'}-1.spool`,
    `${SPOOL_PREFIX}${child.pid}-1.spool`,
  ];
  for (const f of keep) fs.writeFileSync(path.join(tmp, f), 'x');
  const r = runBin('upload-domains', ['--db', 'p.db', '--tmp', tmp], filtered(domainsN(3, 'n')), work);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`removed ${path.join(tmp, left[0]!)}, left by a run that was killed`), r.stderr);
  assert.deepEqual(fs.readdirSync(tmp).sort(), [...keep].sort(), "only the dead run's spool was removed");
});

test('a record of the longest line the input allows (1 MiB) is written out after the spool, not refused there', () => {
  const work = newDb([['a', 1]]);
  const pre = `${'1'.padStart(16, '0')}\t20110728060000\t\t1\tlong.com\thttp://long.com/`;
  const input = pre + 'x'.repeat((1 << 20) - pre.length) + '\n';
  const r = runBin('upload-domains', ['--db', 'p.db', '--now', '20110728070000'], input, work);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `1\t${input}`);
});

for (const be of BACKENDS) {
  test(`a run that fails before the commit still counts its new domains as new, not known [${be.name}]`, () => {
    const work = newDbOn(be, [['a', 1]]);
    pdb(work, 'assign', 'k.com', 'a');
    const r = runBin('upload-domains', ['--db', dbOf(work)], filtered(['k.com', 'n1.com', 'n2.com']) + 'bad line\n', work);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /upload-domains: -:4: /);
    const s = summaryOf(r.stderr) as Record<string, number>;
    assert.equal(s.status, 'failed');
    assert.deepEqual([s.domains_known, s.domains_from_db, s.domains_new], [1, 1, 2]);
    assert.equal(rowsOf(work, "SELECT count(*) FROM partner_domain WHERE domain LIKE 'n%'")[0]![0], '0', 'nothing assigned');
  });
}

test('a Yacobot id set by hand beyond 2^53 - 1 is an error naming it, not a route to another id', () => {
  const work = newDb([['a', 1]]);
  const db = new Database(path.join(work, 'p.db'));
  db.prepare('INSERT INTO yacobot (id, name) VALUES (?, ?)').run(123456789012345678n, 'big');
  db.prepare('INSERT INTO partner_domain VALUES (?, ?, ?)').run('k.com', 123456789012345678n, '20110101000000');
  db.close();
  const r = runBin('upload-domains', ['--db', 'p.db'], filtered(['k.com']), work);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('upload-domains'));
  assert.match(r.stderr, /upload-domains: p\.db: Yacobot 'big' has id 123456789012345678, outside the ids this program handles/);
});

test('a domain the database gives to a Yacobot that does not exist (written with foreign keys off) is an error before any output, naming it and the fix', () => {
  const run = (rows: [string, bigint | string][]) => {
    const work = newDb([['a', 1]]);
    pdb(work, 'assign', 'known.com', 'a');
    const db = new Database(path.join(work, 'p.db'));
    db.pragma('foreign_keys = OFF');
    for (const [d, id] of rows) db.prepare("INSERT INTO partner_domain VALUES (?, ?, 'x')").run(d, id);
    db.close();
    // A known domain first: it would stream out before the bad one is met.
    return { work, r: runBin('upload-domains', ['--db', 'p.db'], filtered(['known.com', 'zzznew.com']), work) };
  };
  const { work, r } = run([['zzznew.com', 99n]]);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('upload-domains'), 'no output');
  assert.match(
    r.stderr,
    /^upload-domains: p\.db: partner_domain gives zzznew\.com to Yacobot 99, which does not exist \(written with foreign keys off\?\); give it to an existing Yacobot with: partner-db --db p\.db assign zzznew\.com YACOBOT$/m,
  );
  assert.ok(!/disable 99/.test(r.stderr), 'no advice that cannot work');
  // The advice works.
  pdb(work, 'assign', 'zzznew.com', 'a');
  assert.equal(runBin('upload-domains', ['--db', 'p.db'], filtered(['known.com', 'zzznew.com']), work).status, 0);
  // Past 2^53: named by the value the row holds, not the one it rounds to; several rows are counted.
  const big = run([
    ['zzznew.com', 9007199254740993n],
    ['other.com', 9007199254740993n],
    ['odd.com', 'one'],
  ]).r;
  assert.equal(big.status, 1, big.stderr);
  assert.equal(big.stdout, failedOutput('upload-domains'));
  assert.match(
    big.stderr,
    /^upload-domains: p\.db: partner_domain gives other\.com to Yacobot 9007199254740993, which does not exist \(3 domains name 2 such ids: 9007199254740993, 'one'\) .*assign other\.com YACOBOT \(or all at once: partner-db --db p\.db import FILE\.csv\)$/m,
  );
});

test('a row naming a Yacobot that does not exist, written (foreign keys off) after the start-up check, is an error when its domain is looked up', async () => {
  const work = newDb([['a', 1]]);
  pdb(work, 'assign', 'known.com', 'a');
  fs.writeFileSync(path.join(work, 'map'), 'known.com\t1\n');
  const child = spawn(path.join(BIN, 'upload-domains'), ['--db', 'p.db', '--map', 'map'], { cwd: work, env: testEnv() });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (b) => (stderr += b));
  const done = new Promise<number | null>((resolve) => child.on('close', resolve));
  // Records of a domain --map knows, more than the 64 KiB the stage gathers before it writes:
  // once some are out, the start-up check is behind it, and it has asked the database nothing.
  const started = new Promise<void>((resolve) =>
    child.stdout.on('data', (b) => {
      stdout += b;
      resolve();
    }),
  );
  child.stdin.write(filtered(Array(1500).fill('known.com')));
  await started;
  const db = new Database(path.join(work, 'p.db'));
  db.pragma('foreign_keys = OFF');
  db.prepare("INSERT INTO partner_domain VALUES ('zzznew.com', 99, 'x')").run();
  db.close();
  child.stdin.end(filtered(['zzznew.com']));
  assert.equal(await done, 1, stderr);
  assert.match(
    stderr,
    /^upload-domains: p\.db: partner_domain gives zzznew\.com to Yacobot 99, which does not exist \(written with foreign keys off\?\); give it to an existing Yacobot with: partner-db --db p\.db assign zzznew\.com YACOBOT$/m,
  );
  assert.ok(stdout.startsWith('1\t'), "the known domain's records went out first");
  // The last record written lacks its LF (held back until a clean end), and the cut mark follows.
  assert.match(stdout, new RegExp(`\thttp://known\\.com/0${failedOutput('upload-domains')}$`), 'the output ends in the cut mark');
  assert.doesNotMatch(stdout, /(^|\n)99\t/, 'no record routed to the missing Yacobot');
});

/**
 * Runs upload-domains on `work`'s p.db with `first` as its input, then, once it has
 * looked that up (and spooled it), writes a row naming Yacobot 99, which does not
 * exist (foreign keys off), for `ghost`, and ends the input with `tail`.
 */
async function ghostMidRun(work: string, first: string[], ghost: string, tail: string[]) {
  let go!: () => void;
  const release = new Promise<void>((r) => (go = r));
  const p = startUpload(work, ['--db', 'p.db'], filtered(first), release, tail.length > 0 ? filtered(tail) : '');
  const deadline = Date.now() + 60_000;
  while (!waitsWithAllLookedUp(p.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const db = new Database(path.join(work, 'p.db'));
  db.pragma('foreign_keys = OFF');
  db.prepare("INSERT INTO partner_domain VALUES (?, 99, 'x')").run(ghost);
  db.close();
  go();
  return p.done;
}

// A lookup that fails once records are being spooled fails the run at its record, as
// before the spool: the record does not go out with no Yacobot.
test('a missing owner found after the spool began fails the run', async () => {
  const r = await ghostMidRun(newDb([['a', 1]]), ['fresh.com'], 'zzznew.com', ['zzznew.com']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^upload-domains: p\.db: partner_domain gives zzznew\.com to Yacobot 99, which does not exist/m);
  assert.equal(r.stdout, failedOutput('upload-domains'), 'nothing routed');
});

// A new domain another writer took first is read back at the commit: one naming a
// Yacobot that does not exist (foreign keys off) fails the run, as a looked-up one does.
test('a read-back owner that does not exist fails the run', async () => {
  const r = await ghostMidRun(newDb([['a', 1]]), ['ghost.com'], 'ghost.com', []);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^upload-domains: p\.db: partner_domain gives ghost\.com to Yacobot 99, which does not exist/m);
  assert.doesNotMatch(r.stdout, /(^|\n)99\t/, 'no record routed to the missing Yacobot');
});

test('a --map line naming a Yacobot that does not exist is ignored: the database answers, and the map is rewritten with its answer', () => {
  const work = newDb([['a', 1]]);
  pdb(work, 'assign', 'known.com', 'a');
  fs.writeFileSync(path.join(work, 'map'), 'known.com\t99\nzzznew.com\t99\n');
  const r = runBin('upload-domains', ['--db', 'p.db', '--map', 'map'], filtered(['zzznew.com', 'known.com']), work);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(
    r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t')[0]),
    ['1', '1'],
  );
  assert.equal(fs.readFileSync(path.join(work, 'map'), 'utf8'), 'known.com\t1\nzzznew.com\t1\n');
});

test('writeDomainMap merges the map read with the domains learned, bytewise, the learned Yacobot winning for a domain in both', () => {
  const work = scratch();
  const file = path.join(work, 'map');
  fs.writeFileSync(file, 'b.com\t1\nd.com\t2\nf.com\t3\nff.com\t3\n');
  const map = loadDomainMap(file);
  assert.equal(map.domains.size, 4);
  // Before, between, equal to and after the map's domains; a prefix of one ("f.co") and one it is a prefix of ("ff.com.x").
  const learned = new Map([
    ['g.com', 1],
    ['a.com', 2],
    ['d.com', 9],
    ['e.com', 3],
    ['f.co', 4],
    ['ff.com.x', 5],
  ]);
  writeDomainMap(file, map, learned);
  assert.equal(fs.readFileSync(file, 'utf8'), 'a.com\t2\nb.com\t1\nd.com\t9\ne.com\t3\nf.co\t4\nf.com\t3\nff.com\t3\nff.com.x\t5\ng.com\t1\n');
  // An empty map, and nothing learned.
  writeDomainMap(file, loadDomainMap(path.join(work, 'missing')), new Map([['x.org', 7]]));
  assert.equal(fs.readFileSync(file, 'utf8'), 'x.org\t7\n');
  writeDomainMap(file, loadDomainMap(file), new Map());
  assert.equal(fs.readFileSync(file, 'utf8'), 'x.org\t7\n');
});

test('--map is rewritten after the last record has been written, not before the spool is replayed', {
  skip: spawnSync('strace', ['-qq', '-e', 'trace=none', 'true']).status !== 0 && 'no working strace here',
}, () => {
  const work = fs.realpathSync(scratch());
  pdb(work, 'init');
  pdb(work, 'add', 'a');
  fs.writeFileSync(path.join(work, 'map'), 'known.com\t1\n');
  // A new domain first: every record after it is spooled and written out after the commit.
  const input = filtered(['new.com', 'known.com'], 2000);
  const log = path.join(work, 'strace');
  const r = spawnSync(
    'strace',
    [
      '-f',
      '-y',
      '-qq',
      '-e',
      'trace=write,rename,renameat,renameat2',
      '-o',
      log,
      path.join(BIN, 'upload-domains'),
      '--db',
      'p.db',
      '--map',
      'map',
      '--now',
      '20110728070000',
    ],
    {
      cwd: work,
      input,
      env: testEnv(),
      maxBuffer: 1 << 26,
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.split('\n').length - 1, 4000);
  assert.equal(fs.readFileSync(path.join(work, 'map'), 'utf8'), 'known.com\t1\nnew.com\t1\n');
  const calls = fs.readFileSync(log, 'utf8').split('\n');
  // (Bytes written: out.end() ends with an empty write.)
  const lastOut = calls.map((l) => /^\d+\s+write\(1<.*\)\s+= [1-9]/.test(l)).lastIndexOf(true);
  const mapRename = calls.findIndex((l) => /^\d+\s+rename\w*\(.*"map"\)\s+= 0$/.test(l) || /^\d+\s+rename\w*\(.*"map", \w+\)\s+= 0$/.test(l));
  assert.ok(lastOut >= 0, 'records written to stdout');
  assert.ok(mapRename >= 0, `the map renamed into place:\n${calls.filter((l) => l.includes('rename')).join('\n')}`);
  assert.ok(lastOut < mapRename, 'every record was out before the map was replaced');
});

test('the warning about inactive Yacobots names each of them and the command for each; past 5, the first 5 and how many more', () => {
  const work = newDb([['a', 1]]);
  // Yacobots 2..9, inactive (set so by hand), each owning one domain.
  const db = new Database(path.join(work, 'p.db'));
  for (let id = 2; id <= 9; id++) {
    db.prepare('INSERT INTO yacobot (id, name, weight, active) VALUES (?, ?, 1, 0)').run(id, `y${id}`);
    db.prepare("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES (?, ?, '20110101000000')").run(`d${id}.com`, id);
  }
  db.close();
  const warning = (domains: string[]) => {
    const r = runBin('upload-domains', ['--db', 'p.db', '--now', '20110727210000'], filtered(domains), work);
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stderr.split('\n').find((l) => l.includes('inactive Yacobot'))!) as { msg: string; yacobots: number[]; inactive_yacobots: number };
  };
  // Before: "... Yacobot(s) 2, 3 ...: partner-db --db p.db disable 2", the command for the first only (and every id listed, however many).
  const two = warning(['d3.com', 'd2.com', 'd3.com']);
  assert.equal(
    two.msg,
    '2 domain(s) belong to inactive Yacobot(s) 2, 3 and were routed to them; to move them to active ones: partner-db --db p.db disable 2; partner-db --db p.db disable 3',
  );
  const all = warning(['d9.com', 'd8.com', 'd7.com', 'd6.com', 'd5.com', 'd4.com', 'd3.com', 'd2.com']);
  assert.equal(
    all.msg,
    '8 domain(s) belong to inactive Yacobot(s) 2, 3, 4, 5, 6 and 3 more (8 in all) and were routed to them; to move them to active ones: partner-db --db p.db disable ID for each of them (partner-db --db p.db list shows which are inactive)',
  );
  assert.deepEqual([all.yacobots, all.inactive_yacobots], [[2, 3, 4, 5, 6], 8]);
});

for (const be of BACKENDS) {
  test(`a Yacobot disabled while the input is read: its domains stay with it for this run (one owner per run), with a warning and a count, not silently [${be.name}]`, async () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
    ]);
    pdb(work, 'assign', 'old.com', 'b');
    pdb(work, 'assign', 'mapped.com', 'b');
    fs.writeFileSync(path.join(work, 'map'), 'mapped.com\t2\n');
    const input = filtered(['old.com', 'mapped.com', 'new.com', 'old.com']);
    let go!: () => void;
    const release = new Promise<void>((r) => (go = r));
    const p = startUpload(work, ['--db', dbOf(work), '--map', 'map', '--now', '20110728070000'], input, release);
    // Every domain looked up (new.com's record spooled), then the disable commits, then the input ends.
    const deadline = Date.now() + 60_000;
    while (!waitsWithAllLookedUp(p.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.match(pdb(work, 'disable', 'b'), /^disabled Yacobot 2 \(b\); moved 2 domain\(s\): 2 to 1 \(a\)/);
    go();
    const r = await p.done;
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(
      r.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t')[0]),
      ['2', '2', '1', '2'],
      'one owner per domain in a run: the one it had when looked up',
    );
    const s = summaryOf(r.stderr);
    assert.equal(s.domains_of_disabled_during_run, 2);
    assert.equal(s.domains_of_inactive, 0);
    const w = r.stderr.split('\n').find((l) => l.includes('during the run'));
    assert.ok(w, r.stderr);
    const j = JSON.parse(w) as { level: number; msg: string; yacobots: number[]; records_to_disabled: number };
    assert.equal(j.level, 40);
    assert.deepEqual([j.yacobots, j.records_to_disabled], [[2], 3]);
    assert.match(
      j.msg,
      /^Yacobot\(s\) 2 stopped being active during the run \(partner-db disable\?\): the 2 domain\(s\) they owned when looked up were routed to them all the same \(3 record\(s\)\)/,
    );
  });
}

for (const be of BACKENDS) {
  for (const how of ['assign', 'import'] as const) {
    test(`a domain moved by ${how} while the input is read: it stays with its owner for this run, with a warning, as disable's [${be.name}]`, async () => {
      const work = newDbOn(be, [
        ['a', 1],
        ['b', 1],
      ]);
      pdb(work, 'assign', 'old.com', 'b');
      pdb(work, 'assign', 'stay.com', 'b');
      const input = filtered(['old.com', 'stay.com', 'new.com', 'old.com']);
      let go!: () => void;
      const release = new Promise<void>((r) => (go = r));
      const p = startUpload(work, ['--db', dbOf(work), '--now', '20110728070000'], input, release);
      const deadline = Date.now() + 60_000;
      while (!waitsWithAllLookedUp(p.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      if (how === 'assign') assert.match(pdb(work, 'assign', 'old.com', 'a'), /^moved old\.com from Yacobot 2 to 1 \(a\)/);
      else {
        fs.writeFileSync(path.join(work, 'm.csv'), 'old.com,a\nstay.com,b\n');
        assert.match(pdb(work, 'import', 'm.csv'), /1 moved, 1 unchanged/);
      }
      go();
      const r = await p.done;
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(
        r.stdout
          .trimEnd()
          .split('\n')
          .map((l) => l.split('\t')[0]),
        ['2', '2', '1', '2'],
        'one owner per domain in a run: the one it had when looked up',
      );
      const w = r.stderr.split('\n').find((l) => l.includes('during the run'));
      assert.ok(w, r.stderr);
      const j = JSON.parse(w) as { level: number; msg: string; domains_moved_during_run: number; records_to_former_owner: number };
      assert.deepEqual([j.level, j.domains_moved_during_run, j.records_to_former_owner], [40, 1, 2]);
      assert.match(
        j.msg,
        /^1 domain\(s\) were given to another Yacobot during the run \(partner-db assign or import\?\): their 2 record\(s\) of this run went to the Yacobot that owned them when looked up/,
      );
    });
  }
}

for (const be of BACKENDS) {
  test(`after a new domain (records spooled from then on), a domain only the database knows still goes to its owner, in input order [${be.name}]`, () => {
    const work = newDbOn(be, [
      ['a', 1],
      ['b', 1],
    ]);
    pdb(work, 'assign', 'known.com', 'b');
    pdb(work, 'assign', 'later.com', 'b');
    // new.com first opens the spool; known.com and later.com are looked up afterwards, in batches.
    const input = filtered(['new.com', 'known.com', ...domainsN(3000, 'n'), 'later.com'], 2);
    const r = runBin('upload-domains', ['--db', dbOf(work), '--now', '20110728070000'], input, work);
    assert.equal(r.status, 0, r.stderr);
    const routed = routing(r.stdout, input);
    assert.deepEqual([...routed.get('known.com')!], [2]);
    assert.deepEqual([...routed.get('later.com')!], [2]);
    const own = owners(work);
    for (const [d, ids] of routed) assert.deepEqual([...ids], [own.get(d)], `${d} routed to its owner`);
    const s = summaryOf(r.stderr);
    assert.deepEqual([s.domains_from_db, s.domains_new], [2, 3001]);
  });
}
