// What an operator reads when PostgreSQL says no: no password anywhere, a password
// file (read without node-postgres' deprecation warning), a server shut down under a
// command, and copy from a source whose domains name no Yacobot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { BIN, partnerDb, runBin, scratch, testEnv } from './lib/run.js';
import { PASSWORD_USER, PgCluster, TEST_PASSWORD, pgTest } from './lib/pg.js';
import { pgpassFields, pgpassLookup } from '../src/core/store/pgpass.js';
import { pgError } from '../src/core/store/pg.js';

test('the password file: fields with \\: and \\\\, * for anything, the first matching line wins, comments skipped', () => {
  assert.deepEqual(pgpassFields('h:5432:db:u:p\\:w\\\\x:y'), ['h', '5432', 'db', 'u', 'p:w\\x:y']);
  assert.equal(pgpassFields('# h:5432:db:u:pw'), null);
  assert.equal(pgpassFields('h:5432:db:pw'), null);
  const text = '# comment\nother:5432:*:u:no\n*:5433:*:u:first\n*:*:*:*:second\n';
  assert.equal(pgpassLookup(text, { host: 'db.example', port: 5433, database: 'p', user: 'u' }), 'first');
  assert.equal(pgpassLookup(text, { host: 'db.example', port: 5432, database: 'p', user: 'v' }), 'second');
  assert.equal(pgpassLookup('h:1:d:u:x\n', { host: 'h', port: 2, database: 'd', user: 'u' }), undefined);
});

test('a server shut down under a command (57P01) says the run is not lost', () => {
  const e = pgError({ code: '57P01', message: 'terminating connection due to administrator command' }, 'postgresql://ms@db/p', 'db:5432') as Error;
  assert.equal(
    e.message,
    "database error: 57P01: terminating connection due to administrator command (the server is shutting down or restarting: run again once it is back; a runner's run is not lost, the next invocation redoes it)",
  );
});

test('copy from a source whose domains name no Yacobot says so, not a raw foreign-key error; nothing copied', () => {
  const work = scratch('ms-copy-');
  partnerDb(work, 'a.db', 'init');
  partnerDb(work, 'a.db', 'add', 'alpha');
  const db = new Database(path.join(work, 'a.db'));
  db.pragma('foreign_keys = OFF');
  db.exec("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('ghost.com', 9, 'x')");
  db.close();
  const r = runBin('partner-db', ['--db', 'a.db', 'copy', 'a.db', 'b.db'], '', work);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^partner-db: a\.db: the source holds domains owned by an id that names no Yacobot \(partner-db stats counts them\): nothing copied/);
  assert.doesNotMatch(r.stderr, /FOREIGN KEY|constraint/i);
  assert.match(partnerDb(work, 'b.db', 'stats'), /total: 0 domain\(s\), 0 of 0 Yacobot/);
});

pgTest(
  'no password anywhere is said as such; a password file is read without a deprecation warning; a server stopped under a waiting command says the run is not lost',
  async () => {
    const c = await PgCluster.start();
    try {
      const work = scratch('ms-pgmsg-');
      const name = PgCluster.dbName(c.newDatabase());
      partnerDb(work, c.uri(name), 'init');
      const bare = `postgresql://${PASSWORD_USER}@127.0.0.1:${c.port}/${name}`;
      const empty = scratch('ms-home-');
      const none = runBin('partner-db', ['--db', bare, 'stats'], '', work, { HOME: empty });
      assert.equal(none.status, 1, none.stderr);
      assert.equal(
        none.stderr,
        `partner-db: ${bare}: database error: the server asks for a password for user "${PASSWORD_USER}" and none was given: put it in ${empty}/.pgpass (mode 0600, a line "127.0.0.1:${c.port}:${name}:${PASSWORD_USER}:PASSWORD"), in PGPASSWORD, or in the URI (percent-encoded)\n`,
      );
      const home = scratch('ms-home-');
      fs.writeFileSync(path.join(home, '.pgpass'), `127.0.0.1:${c.port}:*:${PASSWORD_USER}:${TEST_PASSWORD}\n`, { mode: 0o600 });
      const viaFile = runBin('partner-db', ['--db', bare, 'stats'], '', work, { HOME: home });
      assert.equal(viaFile.status, 0, viaFile.stderr);
      assert.equal(viaFile.stderr, '', 'no warning');
      // A file others may read is not used, as libpq does, and the warning says why.
      fs.chmodSync(path.join(home, '.pgpass'), 0o644);
      const open = runBin('partner-db', ['--db', bare, 'stats'], '', work, { HOME: home });
      assert.equal(open.status, 1);
      assert.match(
        open.stderr,
        /^partner-db: warning: password file ".*\/\.pgpass" has group or world access; permissions should be u=rw \(0600\) or less: not used\n/,
      );
      assert.ok(!open.stderr.includes(TEST_PASSWORD));

      // add waits for the write lock another session holds; the server is stopped meanwhile.
      const holder = c.holdWriteLock(name, 60);
      try {
        await new Promise((r) => setTimeout(r, 1500));
        const add = spawn(path.join(BIN, 'partner-db'), ['--db', c.uri(name), 'add', 'beta'], {
          cwd: work,
          env: testEnv(),
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let err = '';
        add.stderr!.on('data', (d: Buffer) => (err += d));
        const done = new Promise<number | null>((resolve) => add.on('close', resolve));
        await new Promise((r) => setTimeout(r, 2500));
        // A fast shutdown, as systemctl stop does: each session is told 57P01 before it ends.
        const stop = [path.join(c.bin, 'pg_ctl'), '-D', c.data, '-m', 'fast', '-w', 'stop'];
        const r = process.getuid?.() === 0 ? spawnSync('runuser', ['-u', 'postgres', '--', ...stop]) : spawnSync(stop[0]!, stop.slice(1));
        assert.equal(r.status, 0, String(r.stderr));
        assert.equal(await done, 1, err);
        assert.match(
          err,
          /database error: 57P0[123]: .*\(the server is shutting down or restarting: run again once it is back; a runner's run is not lost, the next invocation redoes it\)/,
        );
      } finally {
        holder.kill('SIGKILL');
        c.startServer();
      }
    } finally {
      c.remove();
    }
  },
);
