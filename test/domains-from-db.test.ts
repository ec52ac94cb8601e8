// domains-from-db: the domain_map it writes (bytewise order, as upload-domains
// requires), and that it only reads the database. Golden cases:
// fixtures/domains-from-db/; missing and wrong databases: partner-db.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { BIN, canRunAsNobody, madeDb, partnerDb, runAsNobody, runBin, scratch, testEnv, failedOutput } from './lib/run.js';
import { dbError } from '../src/core/store/sqlite-db.js';
import { DataError, shellQuote } from '../src/core/errors.js';
import { backends, type Backend } from './lib/backends.js';

const BACKENDS = backends();

const escapeRe = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A scratch directory and a database on `be` that init and then partner-db with each of `commands` made. */
function madeOn(be: Backend, commands: string[][]): { work: string; db: string } {
  const work = scratch();
  if (be.name === 'sqlite') {
    madeDb(work, 'p.db', commands);
    return { work, db: 'p.db' };
  }
  const db = be.newDb(work);
  for (const args of [['init'], ...commands]) partnerDb(work, db, ...args);
  return { work, db };
}

test('domains-from-db leaves the database byte for byte as it was, journal mode included', () => {
  const dir = scratch();
  const db = path.join(dir, 'p.db');
  madeDb(dir, db, [
    ['add', 'alpha'],
    ['assign', 'x.com', 'alpha'],
  ]);
  const h = new Database(db);
  h.pragma('journal_mode = DELETE');
  h.close();
  const before = fs.readFileSync(db);
  const r = runBin('domains-from-db', ['--db', 'p.db'], '', dir);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'x.com\t1\n');
  assert.ok(fs.readFileSync(db).equals(before), 'the database file is unchanged');
});

for (const be of BACKENDS) {
  test(`domains-from-db: bytewise order over many rows, and a closed stdout ends it quietly [${be.name}]`, () => {
    const { work, db } = madeOn(be, [
      ['add', 'a'],
      ['add', 'b'],
    ]);
    const all: string[] = [];
    const values: string[] = [];
    for (let i = 0; i < 20000; i++) {
      const d = `${(i * 7919) % 20000}-${i % 3 ? 'x' : 'X'}.${['com', 'co.uk', 'org', 'ru'][i % 4]}`.toLowerCase();
      all.push(`${d}\t${(i % 2) + 1}`);
      values.push(`('${d}', ${(i % 2) + 1}, '20110101000000')`);
    }
    be.exec(work, db, `BEGIN; INSERT INTO partner_domain VALUES ${values.join(', ')}; COMMIT;`);
    const r = runBin('domains-from-db', ['--db', db], '', work);
    assert.equal(r.status, 0, r.stderr);
    const want = all.sort((x, y) => Buffer.compare(Buffer.from(x.split('\t')[0]!), Buffer.from(y.split('\t')[0]!)));
    assert.equal(r.stdout, want.join('\n') + '\n');
    const head = spawnSync('bash', ['-c', `set -o pipefail; ${path.join(BIN, 'domains-from-db')} --db ${shellQuote(db)} | head -1`], {
      cwd: work,
      env: testEnv(),
      encoding: 'utf8',
    });
    assert.equal(head.status, 0, head.stderr);
    assert.equal(head.stdout, want[0] + '\n');
  });

  test(`a Yacobot id set by hand past 2^53 - 1 is refused as every command and stage refuses it, even when it owns no domain [${be.name}]`, () => {
    const { work, db } = madeOn(be, [
      ['add', 'a'],
      ['assign', 'ok.com', 'a'],
    ]);
    be.exec(work, db, "INSERT INTO yacobot (id, name) VALUES (123456789012345678, 'big')");
    const r = runBin('domains-from-db', ['--db', db], '', work);
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `^domains-from-db: ${escapeRe(db)}: Yacobot 'big' has id 123456789012345678, outside the ids this program handles \\(1 to 9007199254740991\\); give it another$`,
        'm',
      ),
    );
    assert.equal(r.stdout, failedOutput('domains-from-db'), 'no map');
    // The same for partner-db, as docs/formats-and-rules.md says.
    assert.equal(runBin('partner-db', ['--db', db, 'list'], '', work).status, 1);
  });
}

test('a row no domain_map line can carry (edited outside partner-db) is an error naming it, not a broken map line', () => {
  const work = scratch();
  madeDb(work, 'p.db', [
    ['add', 'a'],
    ['assign', 'ok.com', 'a'],
  ]);
  const cases: [string, RegExp][] = [
    ["(NULL, 1, 'x')", /domain NULL/],
    ["('tab' || char(9) || 'x.com', 1, 'x')", /bad domain 'tab\\tx\.com'/],
    ["('nl' || char(10) || 'x.com', 1, 'x')", /bad domain 'nl\\nx\.com'/],
    ["('UP.com', 1, 'x')", /bad domain 'UP\.com'/],
    ["('z.com', 'one', 'x')", /domain z\.com has yacobot_id 'one', not a positive integer/],
    ["('z.com', 0, 'x')", /yacobot_id '0'/],
    ["('z.com', -1, 'x')", /yacobot_id '-1'/],
    ["('z.com', 1.5, 'x')", /yacobot_id '1\.5'/],
    // Past 2^53 - 1: named by the value the row holds, not by the double it would round to (…992).
    ["('z.com', 9007199254740993, 'x')", /domain z\.com has yacobot_id 9007199254740993, outside the ids this program handles \(1 to 9007199254740991\)/],
    ["('z.com', 9007199254740992, 'x')", /yacobot_id 9007199254740992, outside/],
  ];
  for (const [values, want] of cases) {
    fs.copyFileSync(path.join(work, 'p.db'), path.join(work, 't.db'));
    const db = new Database(path.join(work, 't.db'));
    db.pragma('foreign_keys = OFF');
    db.exec(`INSERT INTO partner_domain VALUES ${values}`);
    db.close();
    const r = runBin('domains-from-db', ['--db', 't.db'], '', work);
    assert.equal(r.status, 1, values);
    assert.match(r.stderr, new RegExp(`^domains-from-db: t\\.db: partner_domain has a row no domain_map line can carry: .*${want.source}`, 'm'), values);
    assert.equal(r.stdout, failedOutput('domains-from-db'), `${values}: no partial map`);
  }
});

test('a row naming a Yacobot that does not exist (written with foreign keys off) is an error naming it and the fix, with no map', () => {
  const work = scratch();
  madeDb(work, 'p.db', [
    ['add', 'a'],
    ['assign', 'ok.com', 'a'],
  ]);
  const db = new Database(path.join(work, 'p.db'));
  db.pragma('foreign_keys = OFF');
  db.exec("INSERT INTO partner_domain VALUES ('zzznew.com', 99, 'x')");
  db.close();
  const r = runBin('domains-from-db', ['--db', 'p.db'], '', work);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('domains-from-db'), 'no map');
  assert.match(
    r.stderr,
    /^domains-from-db: p\.db: partner_domain gives zzznew\.com to Yacobot 99, which does not exist .*partner-db --db p\.db assign zzznew\.com YACOBOT$/m,
  );
});

test('a bad row after many good ones still leaves no output, not a map cut off before it', () => {
  const work = scratch();
  madeDb(work, 'p.db', [['add', 'a']]);
  const db = new Database(path.join(work, 'p.db'));
  const ins = db.prepare("INSERT INTO partner_domain VALUES (?, 1, '20110101000000')");
  db.transaction(() => {
    for (let i = 0; i < 20000; i++) ins.run(`d${i}.com`);
    ins.run('zzz.COM'); // sorts last: 20000 good rows (over 64 KiB of map) before it
  })();
  db.close();
  const r = runBin('domains-from-db', ['--db', 'p.db'], '', work);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^domains-from-db: p\.db: partner_domain has a row no domain_map line can carry: bad domain 'zzz\.COM'/m);
  assert.equal(r.stdout, failedOutput('domains-from-db'), 'no partial map');
});

test('a database in a directory this user cannot write is an error that says why (SQLite makes -wal/-shm files beside it, even to read)', () => {
  const hint =
    /database error: SQLITE_READONLY_DIRECTORY: .*\(the database's directory must be writable by this user, even to read it: SQLite keeps the -wal and -shm files there\)/;
  const e = dbError(Object.assign(new Error('attempt to write a readonly database'), { code: 'SQLITE_READONLY_DIRECTORY' }), 'p.db');
  assert.ok(e instanceof DataError && e.place?.file === 'p.db');
  assert.match(e.message, hint);
  // The real thing, where the test can become another user (root) who can still run
  // the project (not from a clone in a private directory).
  if (!canRunAsNobody(path.join(BIN, 'domains-from-db'))) return;
  const work = scratch();
  madeDb(work, 'p.db', [['add', 'a']]);
  fs.chmodSync(work, 0o755);
  fs.chmodSync(path.join(work, 'p.db'), 0o644);
  const r = runAsNobody(work, path.join(BIN, 'domains-from-db'), ['--db', 'p.db']);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('domains-from-db'));
  assert.match(r.stderr, new RegExp(`^domains-from-db: p\\.db: ${hint.source}`));
});

test('a database whose killed writer left a -wal, in a directory this user cannot write: the same hint, not a bare SQLITE_CANTOPEN', () => {
  if (!canRunAsNobody(path.join(BIN, 'domains-from-db'))) return;
  const work = scratch();
  madeDb(work, 'p.db', [['add', 'a']]);
  // A writer that has committed but not checkpointed, as when it is SIGKILLed: copy
  // the database and its -wal (no -shm) while it is still open.
  const w = new Database(path.join(work, 'p.db'));
  w.pragma('wal_autocheckpoint = 0');
  w.exec("INSERT INTO partner_domain VALUES ('x.com', 1, '20110101000000')");
  const ro = path.join(work, 'ro');
  fs.mkdirSync(ro);
  fs.copyFileSync(path.join(work, 'p.db'), path.join(ro, 'p.db'));
  fs.copyFileSync(path.join(work, 'p.db-wal'), path.join(ro, 'p.db-wal'));
  w.close();
  fs.chmodSync(work, 0o755);
  fs.chmodSync(ro, 0o755);
  for (const f of ['p.db', 'p.db-wal']) fs.chmodSync(path.join(ro, f), 0o644);
  const r = runAsNobody(work, path.join(BIN, 'domains-from-db'), ['--db', 'ro/p.db']);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('domains-from-db'));
  assert.match(
    r.stderr,
    /^domains-from-db: ro\/p\.db: database error: SQLITE_CANTOPEN: .*\(the database's directory must be writable by this user, even to read it/,
  );
});
