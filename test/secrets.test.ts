// No password shows anywhere: not in a message, a record, a file or a `ps` listing,
// whether the URI is valid, mistyped or broken, on the command line or in the config
// file. A URI-like --db that is no PostgreSQL URI is an error, never a SQLite path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, ROOT, partnerDb, runBin, scratch, testEnv } from './lib/run.js';
import { FAST_SUITE, PASSWORD_USER, PgCluster, TEST_PASSWORD, pgTest } from './lib/pg.js';
import { redactOutput, redactSecrets, rememberSecretsIn, secretsIn } from '../src/core/secrets.js';
import { dbNameProblem, looksLikeConninfo, looksLikeUri, pgUriProblem, uriFormOf } from '../src/core/db-uri.js';

/** The password of every case here (its URI-encoded spelling is the same). */
const PW = 'Zq9SecretPw';

test('redactSecrets masks URI passwords and password-like parameters without parsing the URI', () => {
  const cases: [string, string][] = [
    [`postgres://u:${PW}@h:5432/db`, 'postgres://u:***@h:5432/db'],
    [`postgresql:/u:${PW}@h/db`, 'postgresql:/u:***@h/db'],
    [`postgres://u:a#${PW}@h/db`, 'postgres://u:***@h/db'],
    [`postgres://u:a?${PW}@h/db`, 'postgres://u:***@h/db'],
    [`postgres://u:a/${PW}@h/db`, 'postgres://u:***@h/db'],
    [`postgres://u:a@${PW}@h/db`, 'postgres://u:***@h/db'],
    [`db: 'postgres://u:${PW}@h/db': no`, "db: 'postgres://u:***@h/db': no"],
    [`postgres://u@h/db?pass%77ord=${PW}&x=1`, 'postgres://u@h/db?pass%77ord=***&x=1'],
    [`postgres://u@h/db?sslpassword=${PW}`, 'postgres://u@h/db?sslpassword=***'],
    [`host=h password=${PW} dbname=d`, 'host=h password=*** dbname=d'],
    [`at ?password=${PW}: refused`, 'at ?password=***: refused'],
    ['postgres://h:5432/db and a@b.c', 'postgres://h:5432/db and a@b.c'],
    ['/var/state/partner.db', '/var/state/partner.db'],
  ];
  for (const [text, want] of cases) assert.equal(redactSecrets(text), want, text);
  // A JSON record stays one valid record, masked value by value.
  const line = JSON.stringify({ db: `postgres://u:a"${PW}@h/db`, other: 'x@y', n: 1 });
  assert.deepEqual(JSON.parse(redactOutput(line)), { db: 'postgres://u:***@h/db', other: 'x@y', n: 1 });
  // A secret once seen is masked wherever it appears, in each spelling.
  assert.deepEqual(secretsIn(`postgres://u:p%2Fw${PW}@h/d`), [`p%2Fw${PW}`]);
  rememberSecretsIn(`postgres://u:p%2Fw${PW}@h/d`);
  assert.equal(redactSecrets(`failed for p/w${PW} and p%2Fw${PW}`), 'failed for *** and ***');
});

test('a URI-like --db that is no PostgreSQL URI is named as such; a file name is a file name', () => {
  for (const db of [
    `postgresql:/u:${PW}@h/db`,
    `postgres:u@h`,
    `postgre://u:${PW}@h/db`,
    `postgres://u:a#b${PW}@h/db`,
    `postgres://u:a/b${PW}@h/db`,
    `postgres://u:a?b${PW}@h/db`,
    `postgres://u:%zz${PW}@h/db`,
  ]) {
    assert.ok(looksLikeUri(db), db);
    const p = pgUriProblem(db);
    assert.ok(p !== null && !p.includes(PW) && !p.includes('a#b') && !p.includes('%zz'), `${db}: ${p}`);
  }
  for (const db of ['partner.db', 'postgres.db', './postgres://x', 'state/pg:1.db']) assert.ok(!looksLikeUri(db), db);
  assert.equal(pgUriProblem(`postgresql://u:${PW}@h:5432/db?sslmode=require`), null);
});

test('a libpq key=value string, or a name that holds a password, is no --db: refused with the URI it names; a file name with = is a file name', () => {
  const cases: [string, string][] = [
    [`host=127.0.0.1 password=${PW} dbname=master`, 'postgresql://USER@127.0.0.1/master'],
    [`  user=ms port=5433 host=db.example dbname='my db' sslmode=require password='a b'`, 'postgresql://ms@db.example:5433/my%20db'],
    [`dbname=master`, 'postgresql://USER@HOST/DBNAME'.replace('DBNAME', 'master')],
    [`host=/var/run/postgresql`, 'postgresql://USER@%2Fvar%2Frun%2Fpostgresql/DBNAME'],
    [`state/partner.db password=${PW}`, 'postgresql://USER@HOST/DBNAME'],
    [`./partner.db?password=${PW}`, 'postgresql://USER@HOST/DBNAME'],
  ];
  for (const [db, uri] of cases) {
    assert.ok(looksLikeConninfo(db), db);
    assert.equal(uriFormOf(db), uri, db);
    const p = dbNameProblem(db)!;
    assert.ok(p.includes('postgresql://USER@HOST:PORT/DBNAME') && p.includes(`(here ${uri})`), p);
    assert.ok(!p.includes(PW) && !p.includes("'a b'"), p);
  }
  for (const db of ['partner.db', './a=b.db', 'state/x=1.db', '/srv/state/partner.db', 'postgres.db', `postgresql://u:${PW}@h/db?password=x`]) {
    assert.ok(!looksLikeConninfo(db), db);
    assert.equal(dbNameProblem(db), null, db);
  }
  assert.match(dbNameProblem('postgresql:/h/db')!, /^not a PostgreSQL URI: /);
});

/** The --db of the conninfo cases end to end: libpq's keywords, with the password. */
const CONNINFO = `host=127.0.0.1 password=${PW} dbname=master`;
const CONNINFO_REFUSED =
  /neither a SQLite file path nor a PostgreSQL URI .*postgresql:\/\/USER@HOST:PORT\/DBNAME \(here postgresql:\/\/USER@127\.0\.0\.1\/master\)/;

test('a libpq key=value --db is refused by every entry point, creating nothing: stages and partner-db exit 1, the runner 2', () => {
  const dir = runnerDir();
  const before = (fs.readdirSync(dir, { recursive: true }) as string[]).sort();
  const texts: Record<string, string> = {};
  const record = '0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n';
  const one = (what: string, r: { status: number | null; stderr: string; stdout: string }, status: number, prefix: string) => {
    assert.equal(r.status, status, `${what}: ${r.stderr}`);
    assert.ok(r.stderr.startsWith(prefix), `${what}: ${r.stderr}`);
    assert.match(r.stderr, CONNINFO_REFUSED, what);
    texts[what] = r.stderr + r.stdout;
  };
  for (const sub of [['init'], ['list'], ['add', 'yb1'], ['stats']]) {
    one(`partner-db ${sub[0]}`, runBin('partner-db', ['--db', CONNINFO, ...sub], '', dir), 1, `partner-db: host=127.0.0.1 password=*** dbname=master: neither`);
    one(`partner-db ${sub[0]} (env)`, runBin('partner-db', sub, '', dir, { MASTER_SERVER_DB: CONNINFO }), 1, 'partner-db: ');
  }
  one('partner-db owner', runBin('partner-db', ['--db', CONNINFO, 'owner', 'a.com'], '', dir), 1, 'partner-db: ');
  one('partner-db copy', runBin('partner-db', ['copy', 'var/state/none.db', CONNINFO], '', dir), 1, 'partner-db: ');
  one('upload-domains', runBin('upload-domains', ['--db', CONNINFO, '--now', '20110728070000'], record, dir), 1, 'upload-domains: ');
  one('upload-domains (env)', runBin('upload-domains', ['--now', '20110728070000'], record, dir, { MASTER_SERVER_DB: CONNINFO }), 1, 'upload-domains: ');
  one('domains-from-db', runBin('domains-from-db', ['--db', CONNINFO], '', dir), 1, 'domains-from-db: ');
  const conf = path.join(scratch('ms-conf-'), 'runner.conf'); // outside dir, whose every file is searched
  fs.writeFileSync(conf, `db = ${CONNINFO}\n`, { mode: 0o600 });
  for (const [how, args] of [
    ['flag', ['--db', CONNINFO]],
    ['config', ['--config', conf]],
  ] as const) {
    const r = spawnSync(RUNNER, [...args], { cwd: dir, env: testEnv({ MASTER_SERVER_DB: CONNINFO }), encoding: 'utf8' });
    one(`runner ${how}`, r, 2, how === 'flag' ? 'reflog-to-yacobot-queue: db is neither' : 'reflog-to-yacobot-queue: ');
    texts[`status ${how}`] = statusJson(dir, [...args]);
  }
  assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072806.reflog')), 'nothing ran');
  const after = (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => f !== path.join('var/state/last-invocation.json')).sort();
  assert.deepEqual(after, before, 'no file was created');
  assertNoPassword(PW, dir, texts);
});

/** A runner directory with the first fixture reflog in its inbox. */
function runnerDir(): string {
  const dir = scratch('ms-secrets-');
  for (const d of ['var/inbox', 'var/state', 'var/queue']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'fixtures/reflogs/2011072806.reflog'), path.join(dir, 'var/inbox/2011072806.reflog'));
  return dir;
}

/** The text of every file under `dir`. */
function everyFile(dir: string): { file: string; text: string }[] {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => ({ file: path.join(e.parentPath, e.name), text: fs.readFileSync(path.join(e.parentPath, e.name), 'latin1') }));
}

/** Asserts that no text of `texts` holds the password `pw` (in any spelling) and that no file or directory under `dir` is named after it. */
function assertNoPassword(pw: string, dir: string, texts: Record<string, string>): void {
  const spellings = [pw, encodeURIComponent(pw)];
  const all = { ...texts, ...Object.fromEntries(everyFile(dir).map((f) => [f.file, f.text])) };
  for (const [where, text] of Object.entries(all)) for (const s of spellings) assert.ok(!text.includes(s), `the password in ${where}: ${text.slice(0, 600)}`);
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[])
    assert.ok(!spellings.some((s) => name.includes(s)), `a file named after the password: ${name}`);
}

/** The runner's `status --json` in `dir` (the same options as the run). */
function statusJson(dir: string, args: string[]): string {
  const r = spawnSync(RUNNER, ['status', '--json', ...args], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  return r.stdout + r.stderr;
}

// Each broken URI: the runner (flag and config file) exits 2 naming the problem; partner-db exits 1; nothing shows the password.
const BROKEN: [string, RegExp][] = [
  [`postgresql:/ms:${PW}@127.0.0.1/db`, /'postgresql:' is followed by 1 slash\(es\), not two/],
  [`postgres://ms:a#${PW}@127.0.0.1/db`, /a '#' in the URI: one in the password must be written %23/],
  [`postgres://ms:a?${PW}@127.0.0.1/db`, /an '@' after the host part: a '\/' or '\?' in the user name or password must be percent-encoded/],
  [`postgres://ms:a/${PW}@127.0.0.1/db`, /an '@' after the host part/],
  [`postgres://ms:%zz${PW}@127.0.0.1/db`, /a '%' not followed by two hex digits/],
];

// pgUriProblem names each problem above (a test of its own); the fast suite runs one of them
// through every entry point, npm run test:all each.
for (const [i, [uri, problem]] of BROKEN.entries()) {
  const skip = FAST_SUITE && i !== 1 && "the same path as the '#' one (npm run test:all)";
  test(`a broken URI is refused, its password nowhere: ${uri.replace(PW, 'PW')}`, { skip }, () => {
    const dir = runnerDir();
    const conf = path.join(scratch('ms-conf-'), 'runner.conf'); // outside dir, whose every file is searched
    fs.writeFileSync(conf, `db = ${uri}\n`, { mode: 0o600 });
    const texts: Record<string, string> = {};
    for (const [how, args] of [
      ['flag', ['--db', uri]],
      ['config', ['--config', conf]],
    ] as const) {
      const r = spawnSync(RUNNER, [...args], { cwd: dir, env: testEnv(), encoding: 'utf8' });
      assert.equal(r.status, 2, r.stderr);
      assert.match(
        r.stderr,
        how === 'flag' ? /^reflog-to-yacobot-queue: db is not a PostgreSQL URI: / : /^reflog-to-yacobot-queue: \S+runner\.conf:1: db is not a PostgreSQL URI: /,
      );
      assert.match(r.stderr, problem);
      texts[`runner ${how} stderr`] = r.stderr + r.stdout;
      texts[`status ${how}`] = statusJson(dir, [...args]);
      assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/last-invocation.json'), 'utf8')).result, 'config error');
    }
    const pdb = runBin('partner-db', ['--db', uri, 'init'], '', dir);
    assert.equal(pdb.status, 1, pdb.stderr);
    assert.match(pdb.stderr, /^partner-db: \S+: not a PostgreSQL URI: /);
    assert.match(pdb.stderr, problem);
    texts['partner-db stderr'] = pdb.stderr + pdb.stdout;
    assert.ok(fs.existsSync(path.join(dir, 'var/inbox/2011072806.reflog')), 'nothing ran');
    assertNoPassword(PW, dir, texts);
  });
}

test('an unclosed quote in the config file is an error naming its line, the value not shown', () => {
  const dir = runnerDir();
  const conf = path.join(scratch('ms-conf-'), 'runner.conf'); // outside dir, whose every file is searched
  fs.writeFileSync(conf, `state = var/state\ndb = "postgres://ms:${PW}@127.0.0.1/db\n`, { mode: 0o600 });
  const r = spawnSync(RUNNER, ['--config', conf], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /^reflog-to-yacobot-queue: \S+runner\.conf:2: db: the " that opens the value is never closed\n/);
  assertNoPassword(PW, dir, { stderr: r.stderr, status: statusJson(dir, ['--config', conf]) });
});

// A password-like parameter of a valid URI, to a server that is not there: the invocation fails before its chain, nothing shows the password.
// redactSecrets masks each (a test of its own); the fast suite runs the percent-encoded one through a run, npm run test:all each.
for (const param of ['pass%77ord', 'sslpassword', 'password']) {
  const skip = FAST_SUITE && param !== 'pass%77ord' && 'the same path as ?pass%77ord= (npm run test:all)';
  test(`?${param}= of a URI is masked in every message, record and file`, { skip }, () => {
    const dir = runnerDir();
    const uri = `postgresql://ms@127.0.0.1:1/db?${param}=${PW}`;
    const conf = path.join(scratch('ms-conf-'), 'runner.conf'); // outside dir, whose every file is searched
    fs.writeFileSync(conf, `db = ${uri}\nconnect-timeout = 2\n`, { mode: 0o600 });
    const r = spawnSync(RUNNER, ['--config', conf], { cwd: dir, env: testEnv(), encoding: 'utf8' });
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`^reflog-to-yacobot-queue: postgresql://ms@127\\.0\\.0\\.1:1/db\\?${param}=\\*\\*\\*: database error: cannot reach PostgreSQL`, 'm'),
    );
    const pdb = runBin('partner-db', ['--db', uri, '--connect-timeout', '2', 'stats'], '', dir);
    assert.equal(pdb.status, 1);
    assertNoPassword(PW, dir, { runner: r.stderr + r.stdout, status: statusJson(dir, ['--config', conf]), 'partner-db': pdb.stderr + pdb.stdout });
  });
}

/** Every process's command line, as `ps` shows it (whole, not cut to the terminal). */
function psListing(): string {
  return spawnSync('ps', ['-eww', '-o', 'pid=,args='], { encoding: 'utf8' }).stdout;
}

pgTest('a URI from the config file never shows in ps, nor in any output, record or file of a run that commits and of one whose password is wrong', async () => {
  const c = await PgCluster.start();
  try {
    const dir = runnerDir();
    const name = PgCluster.dbName(c.newDatabase());
    const good = c.uri(name, true);
    partnerDb(dir, c.uri(name), 'init');
    partnerDb(dir, c.uri(name), 'add', 'alpha');
    const conf = path.join(scratch('ms-conf-'), 'runner.conf'); // outside dir, whose every file is searched
    fs.writeFileSync(conf, `db = ${good}\n`, { mode: 0o600 });
    const listings: string[] = [];
    const child = spawn(RUNNER, ['--config', conf], { cwd: dir, env: testEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (out += d));
    const poll = setInterval(() => listings.push(psListing()), 10);
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearInterval(poll);
    assert.equal(status, 0, out);
    assert.ok(
      listings.some((l) => l.includes(path.join('bin', 'upload-domains'))),
      'a listing was taken while upload-domains ran',
    );
    // A wrong password: the invocation fails on its database before the chain, and says so without any password.
    const wrong = good.replace(encodeURIComponent(TEST_PASSWORD), PW);
    fs.writeFileSync(conf, `db = ${wrong}\n`, { mode: 0o600 });
    fs.copyFileSync(path.join(ROOT, 'fixtures/reflogs/2011072807.reflog'), path.join(dir, 'var/inbox/2011072807.reflog'));
    const bad = spawnSync(RUNNER, ['--config', conf], { cwd: dir, env: testEnv(), encoding: 'utf8' });
    assert.equal(bad.status, 1, bad.stderr);
    assert.match(
      bad.stderr,
      new RegExp(
        `^reflog-to-yacobot-queue: postgresql://${PASSWORD_USER}:\\*\\*\\*@127\\.0\\.0\\.1:\\d+/${name}: database error: 28P01: password authentication failed`,
        'm',
      ),
    );
    const texts = { run: out, listings: listings.join('\n'), bad: bad.stderr + bad.stdout, status: statusJson(dir, ['--config', conf]) };
    assertNoPassword(TEST_PASSWORD, dir, texts);
    assertNoPassword(PW, dir, texts);
  } finally {
    c.remove();
  }
});
