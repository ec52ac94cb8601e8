// partner_load, each Yacobot's domain count kept by triggers (schema version 2), on
// both backends: right after every kind of write, made by migrate from a database of
// version 1, and a version-1 database refused with the command that upgrades it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { partnerDb, runBin, scratch } from './lib/run.js';
import { SQLITE, backends, type Backend } from './lib/backends.js';

const BACKENDS = backends();

/** The schema of version 1 (before partner_load), as init made it on each backend. */
const V1_SQL: Record<Backend['name'], string> = {
  sqlite: `
CREATE TABLE yacobot (
  id INTEGER PRIMARY KEY,
  name TEXT UNIQUE NOT NULL,
  weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0),
  active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE partner_domain (
  domain TEXT PRIMARY KEY,
  yacobot_id INTEGER NOT NULL REFERENCES yacobot(id),
  added_at TEXT NOT NULL
);
CREATE INDEX partner_domain_yacobot ON partner_domain(yacobot_id);
`,
  postgresql: `
CREATE TABLE yacobot (
  id BIGINT PRIMARY KEY,
  name TEXT UNIQUE NOT NULL,
  weight DOUBLE PRECISION NOT NULL DEFAULT 1 CHECK (weight > 0),
  active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE partner_domain (
  domain TEXT COLLATE "C" PRIMARY KEY,
  yacobot_id BIGINT NOT NULL REFERENCES yacobot(id),
  added_at TEXT NOT NULL
);
CREATE INDEX partner_domain_yacobot ON partner_domain(yacobot_id);
`,
};

/** A scratch directory and a new database on `be` (not initialized). */
function newOn(be: Backend): { work: string; db: string } {
  const work = scratch('ms-load-');
  return { work, db: be.newDb(work) };
}

/** A scratch directory and a database of version 2 on `be` with these Yacobots. */
function initOn(be: Backend, ...names: string[]): { work: string; db: string } {
  const { work, db } = newOn(be);
  partnerDb(work, db, 'init');
  for (const n of names) partnerDb(work, db, 'add', n);
  return { work, db };
}

/** Each owner's number of domains, counted in partner_domain, as "id:count" by id. */
function counted(be: Backend, work: string, db: string): string[] {
  return be.rows(work, db, 'SELECT yacobot_id, COUNT(*) FROM partner_domain GROUP BY yacobot_id ORDER BY yacobot_id').map(([id, n]) => `${id}:${n}`);
}

/** partner_load's counts that are not 0, as "id:count" by id. */
function kept(be: Backend, work: string, db: string): string[] {
  return be.rows(work, db, 'SELECT yacobot_id, domains FROM partner_load WHERE domains <> 0 ORDER BY yacobot_id').map(([id, n]) => `${id}:${n}`);
}

/** Each Yacobot's domains as `partner-db stats --json` tells them, as "id:count" (0 left out). */
function statsLoads(work: string, db: string): string[] {
  const s = JSON.parse(partnerDb(work, db, 'stats', '--json')) as { yacobots: { id: number; domains: number }[] };
  return s.yacobots.filter((y) => y.domains !== 0).map((y) => `${y.id}:${y.domains}`);
}

/** Asserts that partner_load and stats agree with a count of partner_domain, which is `want`. */
function assertLoads(be: Backend, work: string, db: string, want: string[], when: string): void {
  assert.deepEqual(counted(be, work, db), want, `${when}: the domains themselves`);
  assert.deepEqual(kept(be, work, db), want, `${when}: partner_load`);
  assert.deepEqual(statsLoads(work, db), want, `${when}: stats`);
}

/** A filtered_log with one record per domain. */
function filtered(domains: string[]): string {
  return domains.map((d, i) => `${(i + 1).toString(16).padStart(16, '0')}\t20110728060000\t\t1\t${d}\thttp://${d}/\n`).join('');
}

for (const be of BACKENDS) {
  test(`partner_load counts each Yacobot's domains after assign, import, disable, upload-domains and SQL written by hand [${be.name}]`, () => {
    const { work, db } = initOn(be, 'a', 'b', 'c');
    assertLoads(be, work, db, [], 'empty');
    partnerDb(work, db, 'assign', 'one.com', 'a');
    partnerDb(work, db, 'assign', 'two.com', 'a');
    assertLoads(be, work, db, ['1:2'], 'assign');
    partnerDb(work, db, 'assign', 'two.com', 'b'); // a move
    assertLoads(be, work, db, ['1:1', '2:1'], 'assign moving');
    const csv = ['two.com,b', 'one.com,c', ...Array.from({ length: 12_000 }, (_, i) => `i${i}.com,${['a', 'b', 'c'][i % 3]}`)];
    fs.writeFileSync(path.join(work, 'in.csv'), csv.join('\n') + '\n');
    assert.match(partnerDb(work, db, 'import', 'in.csv'), /: 12000 new, 1 moved, 1 unchanged$/m);
    assertLoads(be, work, db, ['1:4000', '2:4001', '3:4001'], 'import (batches of many domains)');
    partnerDb(work, db, 'disable', 'c');
    const moved = counted(be, work, db);
    assert.deepEqual(
      moved.map((x) => x.split(':')[0]),
      ['1', '2'],
      'c owns nothing after disable',
    );
    assertLoads(be, work, db, moved, 'disable');
    const r = runBin('upload-domains', ['--db', db, '--now', '20110728070000'], filtered(['n1.com', 'n2.com', 'n3.com', 'i0.com']), work);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(
      counted(be, work, db).reduce((s, x) => s + Number(x.split(':')[1]), 0),
      12_005,
      'three new domains',
    );
    assertLoads(be, work, db, counted(be, work, db), 'upload-domains');
    be.exec(work, db, "INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('h1.com', 3, 'x'), ('h2.com', 3, 'x')");
    be.exec(work, db, "UPDATE partner_domain SET yacobot_id = 3 WHERE domain IN ('i0.com', 'i1.com')");
    be.exec(work, db, "UPDATE partner_domain SET domain = 'h3.com' WHERE domain = 'h2.com'"); // not a move
    be.exec(work, db, "UPDATE partner_domain SET added_at = 'y' WHERE yacobot_id = 2");
    be.exec(work, db, "DELETE FROM partner_domain WHERE domain LIKE 'i1%'");
    const byHand = counted(be, work, db);
    assert.ok(byHand.includes('3:3'), `c owns h1, h3 and i0: ${byHand.join(' ')}`);
    assertLoads(be, work, db, byHand, 'SQL by hand');
    be.exec(work, db, 'DELETE FROM partner_domain');
    assertLoads(be, work, db, [], 'all deleted');
  });
}

for (const be of BACKENDS) {
  test(`copy makes a target of version 2 whose counts are right, also over a target that held domains (--force), and from a source of version 1 [${be.name}]`, () => {
    const from = initOn(be, 'a', 'b');
    fs.writeFileSync(path.join(from.work, 'in.csv'), 'x.com,a\ny.com,b\nz.com,b\n');
    partnerDb(from.work, from.db, 'import', 'in.csv');
    const to = initOn(SQLITE, 'q');
    partnerDb(to.work, to.db, 'assign', 'held.com', 'q');
    partnerDb(to.work, to.db, 'assign', 'held2.com', 'q');
    const target = path.join(to.work, to.db);
    partnerDb(from.work, from.db, 'copy', '--force', from.db, target);
    assertLoads(SQLITE, to.work, to.db, ['1:1', '2:2'], 'copy --force over two domains of Yacobot 1');
    // And back into a new database of the source's backend.
    const back = newOn(be);
    partnerDb(back.work, back.db, 'copy', target, back.db);
    assertLoads(be, back.work, back.db, ['1:1', '2:2'], 'copied back');
    // A source of version 1 is read as it is (copy changes nothing in it).
    const old = newOn(be);
    be.exec(old.work, old.db, `${V1_SQL[be.name]} INSERT INTO yacobot (id, name) VALUES (4, 'd'); INSERT INTO partner_domain VALUES ('v.com', 4, 'x');`);
    const fresh = newOn(SQLITE);
    partnerDb(fresh.work, fresh.db, 'copy', be.name === 'sqlite' ? path.join(old.work, old.db) : old.db, fresh.db);
    assertLoads(SQLITE, fresh.work, fresh.db, ['4:1'], 'copied from version 1');
    assert.deepEqual(be.rows(old.work, old.db, 'SELECT COUNT(*) FROM partner_domain'), [['1']]);
  });
}

for (const be of BACKENDS) {
  test(`a database of version 1 is refused by the stages and commands with the migrate command; migrate gives the loads a count gave, and again says there is nothing to do [${be.name}]`, () => {
    const { work, db } = newOn(be);
    be.exec(work, db, V1_SQL[be.name]);
    be.exec(work, db, "INSERT INTO yacobot (id, name, active) VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 0), (7, 'g', 1)");
    const values = Array.from({ length: 3000 }, (_, i) => `('d${i}.com', ${[1, 2, 2, 3][i % 4]}, 'x')`);
    be.exec(work, db, `INSERT INTO partner_domain VALUES ${values.join(', ')}`);
    if (be.name === 'sqlite') {
      // Written with foreign keys off: ids of no Yacobot, one of them text.
      be.exec(work, db, "PRAGMA foreign_keys = OFF; INSERT INTO partner_domain VALUES ('o1.com', 99, 'x'), ('o2.com', 99, 'x'), ('o3.com', 'zz', 'x')");
    }
    const before = counted(be, work, db);
    const bytes = be.name === 'sqlite' ? fs.readFileSync(path.join(work, db)) : null;
    const hint = `upgrade it (one transaction) with: partner-db --db ${db} migrate`;
    for (const [bin, args, input] of [
      ['upload-domains', ['--db', db], filtered(['d1.com', 'new.com'])],
      ['domains-from-db', ['--db', db], ''],
      ['partner-db', ['--db', db, 'stats'], ''],
      ['partner-db', ['--db', db, 'assign', 'new.com', 'a'], ''],
      ['partner-db', ['--db', db, 'init'], ''],
    ] as const) {
      const r = runBin(bin, [...args], input, work);
      assert.equal(r.status, 1, `${bin} ${args.join(' ')}: ${r.stderr}`);
      assert.ok(
        r.stderr.includes(
          `${bin}: ${db}: schema version 1: this program reads version 4, which keeps each Yacobot's domain count in partner_load and the masters' claims of hours in hour_claim, fenced by each state's identity; ${hint}\n`,
        ),
        r.stderr,
      );
    }
    if (bytes) assert.ok(fs.readFileSync(path.join(work, db)).equals(bytes), 'nothing changed the file');
    assert.deepEqual(counted(be, work, db), before, 'nothing assigned');
    const up = partnerDb(work, db, 'migrate');
    const total = be.name === 'sqlite' ? 3003 : 3000;
    const owners = be.name === 'sqlite' ? 5 : 3;
    assert.match(
      up,
      new RegExp(
        `^upgraded ${db.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} from schema version 1 to 4 in \\d+\\.\\d s: partner_load counts ${total} domain\\(s\\) under ${owners} Yacobot id\\(s\\)\n$`,
      ),
    );
    assert.deepEqual(kept(be, work, db), before, 'partner_load holds what a count gives');
    const stats = JSON.parse(partnerDb(work, db, 'stats', '--json')) as {
      domains: number;
      yacobots: { id: number; domains: number }[];
      missing_owners: { id: string; domains: number }[];
    };
    assert.deepEqual(
      stats.yacobots.map((y) => `${y.id}:${y.domains}`),
      ['1:750', '2:1500', '3:750', '7:0'],
    );
    assert.equal(stats.domains, total);
    assert.deepEqual(
      stats.missing_owners.map((m) => `${m.id}:${m.domains}`),
      be.name === 'sqlite' ? ['99:2', "'zz':1"] : [],
    );
    assert.equal(partnerDb(work, db, 'migrate'), `${db} is already at schema version 4\n`);
    assert.deepEqual(kept(be, work, db), before, 'the second migrate changed nothing');
    if (be.name === 'sqlite') be.exec(work, db, "DELETE FROM partner_domain WHERE domain LIKE 'o%'");
    const r = runBin('upload-domains', ['--db', db, '--now', '20110728070000'], filtered(['d1.com', 'new.com']), work);
    assert.equal(r.status, 0, r.stderr);
    assertLoads(be, work, db, ['1:750', '2:1500', '3:750', '7:1'], 'upload-domains after migrate gives new.com to g, the least loaded');
  });
}

for (const be of BACKENDS) {
  test(`a version 4 that lost a trigger or partner_load is refused with the command that restores it, which recounts; an unknown version is refused [${be.name}]`, () => {
    const { work, db } = initOn(be, 'a', 'b');
    partnerDb(work, db, 'assign', 'x.com', 'a');
    be.exec(work, db, be.name === 'sqlite' ? 'DROP TRIGGER partner_load_insert' : 'ALTER TABLE partner_domain DISABLE TRIGGER partner_load_insert');
    be.exec(work, db, "INSERT INTO partner_domain VALUES ('y.com', 2, 'x')"); // not counted
    const r = runBin('domains-from-db', ['--db', db], '', work);
    assert.equal(r.status, 1);
    assert.ok(
      r.stderr.includes(
        `domains-from-db: ${db}: schema version 4, but trigger 'partner_load_insert' on partner_domain is missing or disabled (changed by hand?); restore it with: partner-db --db ${db} migrate\n`,
      ),
      r.stderr,
    );
    assert.match(
      partnerDb(work, db, 'migrate'),
      /^restored partner_load, its triggers, hour_claim, master_state and domain_commit in .* partner_load counts 2 domain\(s\) under 2 Yacobot id\(s\)\n$/,
    );
    assertLoads(be, work, db, ['1:1', '2:1'], 'restored');
    be.exec(work, db, 'DROP TABLE partner_load');
    const gone = runBin('partner-db', ['--db', db, 'list'], '', work);
    assert.equal(gone.status, 1);
    assert.match(gone.stderr, /schema version 4, but table 'partner_load' is missing \(changed by hand\?\); restore it with: partner-db --db \S+ migrate\n/);
    partnerDb(work, db, 'migrate');
    assertLoads(be, work, db, ['1:1', '2:1'], 'restored again');
    be.exec(work, db, "UPDATE partner_meta SET value = '5' WHERE key = 'schema_version'");
    for (const args of [['list'], ['migrate']]) {
      const newer = runBin('partner-db', ['--db', db, ...args], '', work);
      assert.equal(newer.status, 1);
      assert.match(newer.stderr, /: schema version '5', which this program does not know \(it reads version 4\): made by a newer release\?\n$/);
    }
  });
}

test('SQLite: INSERT OR REPLACE written by hand keeps the counts when recursive triggers are on, as docs/operations.md says', () => {
  const { work, db } = initOn(SQLITE, 'a', 'b');
  partnerDb(work, db, 'assign', 'x.com', 'a');
  SQLITE.exec(work, db, "PRAGMA recursive_triggers = ON; INSERT OR REPLACE INTO partner_domain VALUES ('x.com', 2, 'x')");
  assertLoads(SQLITE, work, db, ['2:1'], 'replaced');
});

for (const be of BACKENDS.filter((b) => b.name === 'postgresql')) {
  test(`PostgreSQL: TRUNCATE of partner_domain empties partner_load; one statement of many rows counts them all [${be.name}]`, () => {
    const { work, db } = initOn(be, 'a', 'b');
    be.exec(work, db, "INSERT INTO partner_domain SELECT 'g' || i || '.com', 1 + i % 2, 'x' FROM generate_series(1, 5001) AS i");
    assertLoads(be, work, db, ['1:2500', '2:2501'], 'one INSERT of 5001 rows');
    be.exec(work, db, 'TRUNCATE partner_domain');
    assertLoads(be, work, db, [], 'truncated');
  });
}

for (const be of BACKENDS) {
  test(`a version 2 (before hour_claim) is refused with the command that upgrades it, which adds hour_claim and keeps every domain and count [${be.name}]`, () => {
    const { work, db } = initOn(be, 'a', 'b');
    partnerDb(work, db, 'assign', 'x.com', 'a');
    partnerDb(work, db, 'assign', 'y.com', 'b');
    be.exec(work, db, "DROP TABLE hour_claim; UPDATE partner_meta SET value = '2' WHERE key = 'schema_version'");
    for (const args of [['list'], ['init']]) {
      const r = runBin('partner-db', ['--db', db, ...args], '', work);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(
        r.stderr.includes(
          `partner-db: ${db}: schema version 2: this program reads version 4, which records the masters' claims of hours in hour_claim, fenced by each state's identity; upgrade it (one transaction) with: partner-db --db ${db} migrate\n`,
        ),
        r.stderr,
      );
    }
    assert.match(
      partnerDb(work, db, 'migrate'),
      /^upgraded .* from schema version 2 to 4 in \d+\.\d s: partner_load counts 2 domain\(s\) under 2 Yacobot id\(s\)\n$/,
    );
    assertLoads(be, work, db, ['1:1', '2:1'], 'counts kept');
    assert.equal(partnerDb(work, db, 'migrate'), `${db} is already at schema version 4\n`);
    be.exec(work, db, "INSERT INTO hour_claim VALUES ('2011072806', 'ab', 'A', 'r1', '2011-07-28T07:00:00.000Z', NULL, NULL)");
  });
}

for (const be of BACKENDS) {
  test(`a version 3 (claims by name only) is refused with the command that upgrades it, which keeps its claims (no state) and adds master_state and domain_commit [${be.name}]`, () => {
    const { work, db } = initOn(be, 'a');
    partnerDb(work, db, 'assign', 'x.com', 'a');
    be.exec(work, db, 'DROP TABLE master_state; DROP TABLE domain_commit; DROP TABLE hour_claim');
    be.exec(
      work,
      db,
      'CREATE TABLE hour_claim (run TEXT NOT NULL, digest TEXT NOT NULL, master TEXT NOT NULL, run_id TEXT NOT NULL, claimed_at TEXT NOT NULL, published_at TEXT, PRIMARY KEY (run, digest))',
    );
    be.exec(
      work,
      db,
      "INSERT INTO hour_claim VALUES ('2011072806', 'ab', 'A', 'r1', '2011-07-28T07:00:00.000Z', '2011-07-28T07:00:01.000Z'); UPDATE partner_meta SET value = '3' WHERE key = 'schema_version'",
    );
    for (const [bin, args, input] of [
      ['upload-domains', ['--db', db], filtered(['x.com'])],
      ['partner-db', ['--db', db, 'list'], ''],
    ] as const) {
      const r = runBin(bin, [...args], input, work);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(
        r.stderr.includes(
          `${bin}: ${db}: schema version 3: this program reads version 4, which fences the claims of hours by each state's identity (master_state) and records what each upload-domains commit added (domain_commit); upgrade it (one transaction) with: partner-db --db ${db} migrate\n`,
        ),
        r.stderr,
      );
    }
    assert.match(
      partnerDb(work, db, 'migrate'),
      /^upgraded .* from schema version 3 to 4 in \d+\.\d s: partner_load counts 1 domain\(s\) under 1 Yacobot id\(s\)\n$/,
    );
    assert.deepEqual(be.rows(work, db, 'SELECT run, master, run_id, published_at, state_id FROM hour_claim'), [
      ['2011072806', 'A', 'r1', '2011-07-28T07:00:01.000Z', ''],
    ]);
    assert.deepEqual(be.rows(work, db, 'SELECT COUNT(*) FROM master_state'), [['0']]);
    assert.deepEqual(be.rows(work, db, 'SELECT COUNT(*) FROM domain_commit'), [['0']]);
    assert.equal(partnerDb(work, db, 'migrate'), `${db} is already at schema version 4\n`);
  });
}
