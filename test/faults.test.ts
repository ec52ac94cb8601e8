// Ordinary faults, one test each: a locked or wrong partner database, a full or
// read-only file system under the queue/state/temp directories, a full stdout, a
// cut-off or unsorted current_log, a reflog that is still being written. Each must
// end in exit status 1, a one-line error naming the place, no stack trace, and no
// change to published state (queue files, current_log, domain_map, database).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { dbError } from '../src/core/store/sqlite-db.js';
import { DataError } from '../src/core/errors.js';
import { HOST_TAG } from '../src/core/temps.js';
import { BIN, hasStackTrace, listFiles, lockHolder, madeDb, runBin, runRunner, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';

const TS = '20110727200841';
const id16 = (n: number) => n.toString(16).padStart(16, '0');
const urlRec = (id: string, domain: string, url: string, ts = TS, tag = '', hits = '1') => `${id}\t${ts}\t${tag}\t${hits}\t${domain}\t${url}`;

function assertFailedCleanly(r: { status: number | null; stderr: string }, stage: string, ...fragments: string[]): void {
  assert.equal(r.status, 1, `exit status; stderr:\n${r.stderr}`);
  assert.ok(!hasStackTrace(r.stderr), `stack trace:\n${r.stderr}`);
  assert.ok(!/internal error/.test(r.stderr), `an ordinary fault reported as an internal error:\n${r.stderr}`);
  const first = r.stderr.split('\n').find((l) => l.startsWith(`${stage}: `));
  assert.ok(first, `no "${stage}: ..." error line:\n${r.stderr}`);
  for (const f of fragments) assert.ok(r.stderr.includes(f), `stderr lacks ${JSON.stringify(f)}:\n${r.stderr}`);
  assert.equal(summaryOf(r.stderr).status, 'failed');
}

// --- mounts: a tiny tmpfs gives a real ENOSPC, a read-only remount a real EROFS -----

let mountable: boolean | null = null;
/** Whether this process may mount a tmpfs (root outside a restrictive sandbox). */
function canMount(): boolean {
  if (mountable === null) {
    const probe = scratch('ms-mnt-probe-');
    mountable = mount(probe, 'size=64k');
    if (mountable) umount(probe);
  }
  return mountable;
}
function mount(dir: string, opts: string): boolean {
  fs.mkdirSync(dir, { recursive: true });
  return spawnSync('mount', ['-t', 'tmpfs', '-o', opts, 'tmpfs', dir], { stdio: 'ignore' }).status === 0;
}
function remountReadOnly(dir: string): void {
  const r = spawnSync('mount', ['-o', 'remount,ro', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `remount ro: ${r.stderr}`);
}
function umount(dir: string): void {
  spawnSync('umount', [dir], { stdio: 'ignore' });
}
const NO_MOUNT = 'cannot mount a tmpfs here (not root, or the sandbox refuses mount); the /dev/full variant still runs';

/** `n` routed records for Yacobots 1 and 2, about 120 bytes each. */
function routed(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) {
    const y = (i % 2) + 1;
    s += `${y}\t${urlRec(id16(i + 1), `d${y}.com`, `http://d${y}.com/page/${i}/${'x'.repeat(60)}`)}\n`;
  }
  return s;
}

// --- logsaver: a queue directory that cannot take the files ------------------------

test('logsaver: queue file system full (tmpfs of 64 KiB, real ENOSPC) fails and publishes nothing', (t) => {
  if (!canMount()) return t.skip(NO_MOUNT);
  const work = scratch('ms-fault-');
  const q = path.join(work, 'queues');
  assert.ok(mount(q, 'size=64k'));
  try {
    // The previous run's queue file must survive untouched.
    fs.mkdirSync(path.join(q, '1'));
    fs.writeFileSync(path.join(q, '1', '2011072806.tsv'), 'previous run\n');
    const r = runBin('logsaver', ['--queue-dir', 'queues', '--name', '2011072806'], routed(2000), work);
    assertFailedCleanly(r, 'logsaver', 'ENOSPC', 'queues/');
    assert.deepEqual(listFiles(q), ['1/2011072806.tsv'], 'no temporary or new queue file left');
    assert.equal(fs.readFileSync(path.join(q, '1', '2011072806.tsv'), 'utf8'), 'previous run\n');
  } finally {
    umount(q);
  }
});

test('logsaver: a write that fails with ENOSPC (temporary file on /dev/full) fails and publishes nothing', () => {
  // Works everywhere: logsaver writes DIR/<id>/.<NAME>.tsv.tmp-<pid>-<tag>; bash creates that
  // name as a symlink to /dev/full and execs logsaver under the same pid.
  const work = scratch('ms-fault-');
  const q = path.join(work, 'queues');
  for (const y of ['1', '2']) fs.mkdirSync(path.join(q, y), { recursive: true });
  fs.writeFileSync(path.join(q, '1', '2011072806.tsv'), 'previous run\n');
  const r = spawnSync('bash', ['-c', `ln -s /dev/full "queues/2/.2011072806.tsv.tmp-$$-${HOST_TAG}" && exec logsaver --queue-dir queues --name 2011072806`], {
    cwd: work,
    env: testEnv(),
    input: routed(200),
    encoding: 'utf8',
  });
  assertFailedCleanly({ status: r.status, stderr: r.stderr }, 'logsaver', 'ENOSPC', 'queues/2/.2011072806.tsv.tmp-');
  assert.deepEqual(listFiles(q), ['1/2011072806.tsv'], 'nothing published, temporary files (and the symlink) removed');
  assert.equal(fs.readFileSync(path.join(q, '1', '2011072806.tsv'), 'utf8'), 'previous run\n');
  assert.ok(fs.existsSync('/dev/full'), '/dev/full itself is untouched');
});

test('logsaver: a write that fails mid-input still counts so that records_in is the sum of per_yacobot (the failing record is in neither)', () => {
  const work = scratch('ms-fault-');
  fs.mkdirSync(path.join(work, 'queues', '2'), { recursive: true });
  // Yacobot 2's records pass its 256 KiB write buffer: a flush inside the input fails, not the one at the end.
  const r = spawnSync('bash', ['-c', `ln -s /dev/full "queues/2/.2011072806.tsv.tmp-$$-${HOST_TAG}" && exec logsaver --queue-dir queues --name 2011072806`], {
    cwd: work,
    env: testEnv(),
    input: routed(10_000),
    encoding: 'utf8',
  });
  assertFailedCleanly({ status: r.status, stderr: r.stderr }, 'logsaver', 'ENOSPC');
  const s = summaryOf(r.stderr);
  const per = s.per_yacobot as Record<string, number>;
  assert.ok((s.records_in as number) > 0 && (s.records_in as number) < 10_000, JSON.stringify(s));
  assert.equal(s.records_in, (per['1'] ?? 0) + (per['2'] ?? 0), JSON.stringify(s));
});

test('logsaver: read-only queue file system (EROFS) fails and publishes nothing', (t) => {
  const work = scratch('ms-fault-');
  const q = path.join(work, 'queues');
  let mounted = false;
  if (canMount()) {
    assert.ok(mount(q, 'size=1m'));
    mounted = true;
  } else if (process.getuid?.() !== 0) {
    fs.mkdirSync(q); // chmod stops everyone but root
  } else {
    return t.skip('root without mount: a read-only directory cannot be made (chmod does not stop root)');
  }
  try {
    fs.mkdirSync(path.join(q, '1'));
    fs.writeFileSync(path.join(q, '1', '2011072806.tsv'), 'previous run\n');
    if (mounted) remountReadOnly(q);
    else for (const d of [q, path.join(q, '1')]) fs.chmodSync(d, 0o555);
    const r = runBin('logsaver', ['--queue-dir', 'queues', '--name', '2011072806'], routed(10), work);
    assertFailedCleanly(r, 'logsaver', mounted ? 'EROFS' : 'EACCES');
    assert.deepEqual(listFiles(q), ['1/2011072806.tsv']);
    assert.equal(fs.readFileSync(path.join(q, '1', '2011072806.tsv'), 'utf8'), 'previous run\n');
  } finally {
    if (mounted) umount(q);
    else for (const d of [q, path.join(q, '1')]) fs.chmodSync(d, 0o755);
  }
});

test('logsaver: a queue directory path that is a file (ENOTDIR/EEXIST) fails and publishes nothing', () => {
  const work = scratch('ms-fault-');
  fs.writeFileSync(path.join(work, 'queues'), 'not a directory');
  const r = runBin('logsaver', ['--queue-dir', 'queues', '--name', 'n1'], routed(4), work);
  assertFailedCleanly(r, 'logsaver', 'cannot create the queue directory');
  assert.deepEqual(fs.readdirSync(work), ['queues']);
});

// --- the other writers on a full file system ---------------------------------------

test('filter-url: --current-out on a full file system fails and leaves current_log as it was', (t) => {
  if (!canMount()) return t.skip(NO_MOUNT);
  const work = scratch('ms-fault-');
  const st = path.join(work, 'state');
  assert.ok(mount(st, 'size=64k'));
  try {
    fs.writeFileSync(path.join(st, 'current_log'), `${urlRec(id16(1), 'a.com', 'http://a.com/')}\n`);
    let joined = '';
    for (let i = 0; i < 2000; i++) {
      joined += `${id16(i + 2)}\tb.com\thttp://b.com/${i}/${'y'.repeat(60)}\t-\t${TS}\t\t\t-\t1\n`;
    }
    const r = runBin('filter-url', ['--now', TS, '--current-out', 'state/current_log'], joined, work);
    assertFailedCleanly(r, 'filter-url', 'ENOSPC', 'state/current_log.tmp-');
    assert.deepEqual(listFiles(st), ['current_log']);
    assert.equal(fs.readFileSync(path.join(st, 'current_log'), 'utf8'), `${urlRec(id16(1), 'a.com', 'http://a.com/')}\n`);
  } finally {
    umount(st);
  }
});

test('analyze-dump: sort spill to a full --tmp fails with no output and removes its spill files', (t) => {
  if (!canMount()) return t.skip(NO_MOUNT);
  const work = scratch('ms-fault-');
  const tmp = path.join(work, 'tmp');
  assert.ok(mount(tmp, 'size=64k'));
  try {
    let reflog = '';
    for (let i = 0; i < 30000; i++) reflog += `b\t1\t${TS}\t1\thttp://site${i % 97}.com/p/${i}/${'z'.repeat(40)}\t1\t\n`;
    fs.writeFileSync(path.join(work, 'hour.reflog'), reflog); // a file: the stage stops reading early
    // Without worker threads, and with two: then the spill fails while a worker's batch is applied.
    for (const threads of ['0', '2']) {
      // Workers under a budget that spills at once: their cost (40 MiB each) left out of the check.
      const r = runBin('analyze-dump', ['--memory', '1M', '--threads', threads, '--tmp', 'tmp', 'hour.reflog'], '', work, { MASTER_SERVER_WORKER_BYTES: '0' });
      assertFailedCleanly(r, 'analyze-dump', 'ENOSPC', 'tmp/');
      assert.equal(r.stdout, failedOutput('analyze-dump'), `no output after a failed spill (--threads ${threads})`);
      assert.deepEqual(listFiles(tmp), [], `spill files removed (--threads ${threads})`);
      // The counts of a failed run (runs.jsonl keeps them) still add up: once, records of
      // the batch whose spill failed were counted, its lines not (lines_in 0, records_out 21957).
      const s = summaryOf(r.stderr) as Record<string, number>;
      assert.equal(s.lines_in, s.records_out! + s.rejected! + s.skipped!, `counts add up (--threads ${threads}): ${JSON.stringify(s)}`);
    }
  } finally {
    umount(tmp);
  }
});

test('any stage: stdout on a full device (/dev/full) is an I/O error naming stdout, not an internal error', () => {
  const fd = fs.openSync('/dev/full', 'w');
  try {
    const r = spawnSync(path.join(BIN, 'analyze-dump'), [], {
      input: `b\t1\t${TS}\t1\thttp://a.com/\t1\t\n`,
      env: testEnv(),
      stdio: ['pipe', fd, 'pipe'],
      encoding: 'utf8',
    });
    assertFailedCleanly({ status: r.status, stderr: r.stderr }, 'analyze-dump', 'analyze-dump: stdout: ', 'ENOSPC');
  } finally {
    fs.closeSync(fd);
  }
});

test('upload-domains: a --tmp that cannot be created is an I/O error naming it, not an internal error', () => {
  const work = scratch('ms-fault-');
  twoYacobotDb(work);
  fs.writeFileSync(path.join(work, 'afile'), '');
  const r = runBin('upload-domains', ['--db', 'p.db', '--tmp', 'afile/spool', '--now', TS], FILTERED, work);
  assertFailedCleanly(r, 'upload-domains', 'upload-domains: afile/spool: ', 'ENOTDIR');
  assert.deepEqual(domains(path.join(work, 'p.db')), ['known.com'], 'nothing assigned');
});

test('upload-domains: a line that fails (its spool cannot be made, its lookup hits a corrupt page) is in none of the counts', () => {
  const work = scratch('ms-fault-');
  twoYacobotDb(work);
  fs.writeFileSync(path.join(work, 'afile'), '');
  // Line 2's domain is new: its spool in --tmp cannot be made.
  const t = runBin('upload-domains', ['--db', 'p.db', '--tmp', 'afile/spool', '--now', TS], FILTERED, work);
  assertFailedCleanly(t, 'upload-domains', 'ENOTDIR');
  const st = summaryOf(t.stderr);
  assert.deepEqual([st.records_in, st.records_out, st.spooled], [1, 1, 0], JSON.stringify(st));

  // The index leaf that holds the last domains is made unreadable: known.com is found, zz.com fails.
  const dbFile = path.join(work, 'p.db');
  const d = new Database(dbFile);
  const add = d.prepare("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES (?, 1, '20110101000000')");
  d.transaction(() => {
    for (let i = 0; i < 2000; i++) add.run(`m${String(i).padStart(5, '0')}.com`);
  })();
  d.pragma('wal_checkpoint(TRUNCATE)');
  const leaves = d
    .prepare("SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_partner_domain_1' AND pagetype = 'leaf' ORDER BY path")
    .pluck()
    .all() as number[];
  const pageSize = d.pragma('page_size', { simple: true }) as number;
  d.close();
  assert.ok(leaves.length > 1, 'the index has several leaves');
  const fd = fs.openSync(dbFile, 'r+');
  fs.writeSync(fd, Buffer.alloc(pageSize, 0xff), 0, pageSize, (leaves[leaves.length - 1]! - 1) * pageSize);
  fs.closeSync(fd);
  const input = `${urlRec(id16(1), 'known.com', 'http://known.com/')}\n${urlRec(id16(2), 'zz.com', 'http://zz.com/')}\n`;
  const c = runBin('upload-domains', ['--db', 'p.db', '--now', TS], input, work);
  assertFailedCleanly(c, 'upload-domains', 'SQLITE_CORRUPT');
  const sc = summaryOf(c.stderr);
  // Before: records_in 2 and domains_known 2, zz.com counted as known though never found.
  assert.deepEqual([sc.records_in, sc.records_out, sc.domains_known, sc.domains_from_db, sc.domains_new], [1, 1, 1, 1, 0], JSON.stringify(sc));
});

test('upload-domains: a full --tmp (tmpfs of 64 KiB, real ENOSPC) fails before any domain is assigned or --map changes', (t) => {
  if (!canMount()) return t.skip(NO_MOUNT);
  const work = scratch('ms-fault-');
  const db = twoYacobotDb(work);
  const mapBefore = fs.readFileSync(path.join(work, 'domain_map'), 'utf8');
  const tmp = path.join(work, 'tmp');
  assert.ok(mount(tmp, 'size=64k'));
  try {
    // About 120 KiB of records from the first new domain on: less than the spool's write buffer.
    let input = FILTERED;
    for (let i = 0; i < 1000; i++) input += `${urlRec(id16(i + 3), `n${i % 7}.com`, `http://n${i % 7}.com/${i}/${'x'.repeat(60)}`)}\n`;
    const r = runBin('upload-domains', ['--db', 'p.db', '--map', 'domain_map', '--tmp', 'tmp', '--now', TS], input, work);
    assertFailedCleanly(r, 'upload-domains', 'upload-domains: tmp/', 'ENOSPC');
    assert.equal(r.stdout, failedOutput('upload-domains'));
    assert.deepEqual(domains(db), ['known.com'], 'nothing assigned');
    assert.equal(fs.readFileSync(path.join(work, 'domain_map'), 'utf8'), mapBefore, 'domain_map unchanged');
    assert.deepEqual(listFiles(tmp), [], 'spool removed');
  } finally {
    umount(tmp);
  }
});

// --- the partner database ----------------------------------------------------------

/** p.db in `work` with Yacobots yb-a and yb-b, known.com assigned to yb-a, and its domain_map. */
function twoYacobotDb(work: string): string {
  madeDb(work, 'p.db', [
    ['add', 'yb-a'],
    ['add', 'yb-b'],
    ['assign', 'known.com', 'yb-a'],
  ]);
  const m = runBin('domains-from-db', ['--db', 'p.db'], '', work);
  assert.equal(m.status, 0, m.stderr);
  fs.writeFileSync(path.join(work, 'domain_map'), m.stdout);
  return path.join(work, 'p.db');
}

function domains(db: string): string[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare('SELECT domain FROM partner_domain ORDER BY domain').pluck().all() as string[];
  } finally {
    d.close();
  }
}

test('the extended SQLITE_BUSY codes are DB_BUSY too (the runner says to run again); SQLITE_LOCKED, a conflict inside the process, is not', () => {
  const asData = (e: unknown) => {
    assert.ok(e instanceof DataError, String(e));
    return { code: e.code, message: e.message };
  };
  const fake = (code: string) => asData(dbError(Object.assign(new Error('database is locked'), { code }), 'p.db'));
  const saved = process.env.MASTER_SERVER_BUSY_TIMEOUT_MS;
  process.env.MASTER_SERVER_BUSY_TIMEOUT_MS = '300';
  try {
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_RECOVERY', 'SQLITE_BUSY_TIMEOUT']) {
      assert.deepEqual(fake(code), {
        code: 'DB_BUSY',
        message: `database error: ${code}: database is locked (another process held the database longer than 300 ms)`,
      });
    }
    for (const code of ['SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE']) {
      assert.deepEqual(fake(code), { code: 'DB', message: `database error: ${code}: database is locked` });
    }
  } finally {
    if (saved === undefined) delete process.env.MASTER_SERVER_BUSY_TIMEOUT_MS;
    else process.env.MASTER_SERVER_BUSY_TIMEOUT_MS = saved;
  }
  // SQLITE_BUSY_SNAPSHOT for real: a WAL transaction that read, then another connection
  // wrote, then it writes. SQLite returns it at once, without the busy timeout.
  const db = path.join(scratch('ms-fault-'), 's.db');
  const a = new Database(db);
  const b = new Database(db);
  try {
    a.pragma('journal_mode = WAL');
    a.exec('CREATE TABLE t (x)');
    a.exec('BEGIN');
    a.prepare('SELECT * FROM t').all();
    b.exec('INSERT INTO t VALUES (1)');
    let caught: unknown;
    try {
      a.exec('INSERT INTO t VALUES (2)');
    } catch (err) {
      caught = err;
    }
    assert.deepEqual(asData(dbError(caught, 'p.db')), {
      code: 'DB_BUSY',
      message: 'database error: SQLITE_BUSY_SNAPSHOT: database is locked (another process wrote to the database meanwhile)',
    });
  } finally {
    a.close();
    b.close();
  }
});

const FILTERED = `${urlRec(id16(1), 'known.com', 'http://known.com/')}\n${urlRec(id16(2), 'new.com', 'http://new.com/')}\n`;

test('upload-domains: database locked by another writer: waits the busy timeout, then a clear error; nothing assigned', async () => {
  const work = scratch('ms-fault-');
  const db = twoYacobotDb(work);
  const mapBefore = fs.readFileSync(path.join(work, 'domain_map'), 'utf8');
  const holder = await lockHolder(work, db, 0);
  let r: ReturnType<typeof runBin>;
  try {
    fs.mkdirSync(path.join(work, 'tmp'));
    r = runBin('upload-domains', ['--db', 'p.db', '--map', 'domain_map', '--tmp', 'tmp', '--now', TS], FILTERED, work, {
      MASTER_SERVER_BUSY_TIMEOUT_MS: '300',
    });
  } finally {
    holder.kill();
    await holder.done;
  }
  assertFailedCleanly(r, 'upload-domains', 'upload-domains: p.db: database error: SQLITE_BUSY', 'longer than 300 ms');
  assert.equal(summaryOf(r.stderr).error_code, 'DB_BUSY', 'its own code: the runner tells the operator to run again');
  assert.ok(!r.stdout.includes('new.com'), 'a new domain was routed without a stored assignment');
  assert.equal(fs.readFileSync(path.join(work, 'domain_map'), 'utf8'), mapBefore, 'domain_map unchanged');
  assert.deepEqual(domains(db), ['known.com'], 'the killed holder rolled back; upload-domains wrote nothing');
  assert.deepEqual(fs.readdirSync(path.join(work, 'tmp')), [], 'spool file removed');
});

test('MASTER_SERVER_BUSY_TIMEOUT_MS that is not a number of milliseconds is an error naming it, not 5 s in silence', () => {
  const work = scratch('ms-fault-');
  twoYacobotDb(work);
  for (const v of ['0x10', ' 10', '1e3', '99999999999']) {
    for (const [bin, args] of [
      ['domains-from-db', ['--db', 'p.db']],
      ['upload-domains', ['--db', 'p.db', '--now', TS]],
      ['partner-db', ['--db', 'p.db', 'list']],
    ] as const) {
      const r = runBin(bin, [...args], bin === 'upload-domains' ? FILTERED : '', work, { MASTER_SERVER_BUSY_TIMEOUT_MS: v });
      assert.equal(r.status, 1, `${bin} with '${v}': ${r.stderr}`);
      assert.ok(r.stderr.startsWith(`${bin}: MASTER_SERVER_BUSY_TIMEOUT_MS wants a whole number of milliseconds from 0 to 2147483647, got '${v}'\n`), r.stderr);
      assert.equal(r.stdout, bin === 'partner-db' ? '' : failedOutput(bin), 'nothing written');
    }
  }
  // Empty is unset; digits are taken.
  for (const v of ['', '250']) assert.equal(runBin('domains-from-db', ['--db', 'p.db'], '', work, { MASTER_SERVER_BUSY_TIMEOUT_MS: v }).status, 0, `'${v}'`);
});

test('upload-domains: a writer that lets go within the busy timeout is waited for, and its answer wins', async () => {
  const work = scratch('ms-fault-');
  const db = twoYacobotDb(work);
  const holder = await lockHolder(work, db, 400);
  let r: ReturnType<typeof runBin>;
  try {
    r = runBin('upload-domains', ['--db', 'p.db', '--map', 'domain_map', '--now', TS], FILTERED, work);
  } finally {
    await holder.done;
  }
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.split('\n').filter((l) => l).length, 2, 'both records routed');
  assert.deepEqual(domains(db), ['held.com', 'known.com', 'new.com']);
  assert.match(fs.readFileSync(path.join(work, 'domain_map'), 'utf8'), /^new\.com\t[12]$/m);
});

function schemaDb(work: string, sql: string): void {
  const d = new Database(path.join(work, 'p.db'));
  d.exec(sql);
  d.close();
}

for (const [what, setup, fragment] of [
  [
    'a database without table partner_domain',
    (w: string) => schemaDb(w, 'CREATE TABLE yacobot (id INTEGER PRIMARY KEY, name TEXT, weight REAL, active INTEGER)'),
    "missing table 'partner_domain'",
  ],
  [
    'a partner_domain table without column added_at',
    (w: string) =>
      schemaDb(
        w,
        'CREATE TABLE yacobot (id INTEGER PRIMARY KEY, name TEXT, weight REAL, active INTEGER); CREATE TABLE partner_domain (domain TEXT PRIMARY KEY, yacobot_id INTEGER)',
      ),
    "table 'partner_domain' has no column 'added_at'",
  ],
  ['an empty file', (w: string) => fs.writeFileSync(path.join(w, 'p.db'), ''), "missing table 'yacobot'"],
  ['a file that is not a database', (w: string) => fs.writeFileSync(path.join(w, 'p.db'), 'domain,yacobot\n'.repeat(500)), 'not an SQLite database?'],
] as [string, (w: string) => void, string][]) {
  for (const stage of ['domains-from-db', 'upload-domains']) {
    test(`${stage}: ${what} is a clear error naming it`, () => {
      const work = scratch('ms-fault-');
      setup(work);
      const before = fs.readFileSync(path.join(work, 'p.db'));
      const r = runBin(stage, ['--db', 'p.db'], stage === 'upload-domains' ? FILTERED : '', work);
      assertFailedCleanly(r, stage, `${stage}: p.db: `, fragment);
      assert.equal(r.stdout, failedOutput(stage));
      assert.ok(fs.readFileSync(path.join(work, 'p.db')).equals(before), 'the file was not changed');
    });
  }
}

// --- current_log: cut off, unsorted, duplicate ---------------------------------------

/** A current_log of `n` records, larger than the 1 MiB read block when n is large. */
function currentLog(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += `${urlRec(id16(2 * i + 2), 'c.com', `http://c.com/${i}/${'q'.repeat(40)}`)}\n`;
  return s;
}

for (const [where, incoming] of [
  ['with no incoming', ''],
  ['interleaved with incoming', `${urlRec(id16(3), 'i.com', 'http://i.com/')}\n${urlRec(id16(90001), 'i.com', 'http://i.com/x')}\n`],
] as const) {
  test(`join-current: a current_log cut in its last line, past the first 1 MiB block, ${where}, is an error naming the line`, () => {
    const work = scratch('ms-fault-');
    const full = currentLog(25000);
    assert.ok(full.length > 1 << 20);
    const cut = full.slice(0, full.length - 30); // inside the last line's url
    fs.writeFileSync(path.join(work, 'current_log'), cut);
    const r = runBin('join-current', ['--current', 'current_log'], incoming, work);
    assertFailedCleanly(r, 'join-current', 'join-current: current_log:25000: last line has no newline');
    assert.equal(fs.readFileSync(path.join(work, 'current_log'), 'utf8'), cut, 'current_log not touched');
  });
}

test('join-current: a current_log cut right after a TAB (a record that would look shorter) is an error naming the line', () => {
  const work = scratch('ms-fault-');
  const full = currentLog(3);
  const cut = full.slice(0, full.lastIndexOf('\t') + 1);
  fs.writeFileSync(path.join(work, 'current_log'), cut);
  const r = runBin('join-current', ['--current', 'current_log'], '', work);
  assertFailedCleanly(r, 'join-current', 'current_log:3: last line has no newline');
});

for (const [what, mutate, line, fragment] of [
  ['unsorted ids, after the incoming input has ended', (ls: string[]) => ([ls[4], ls[5]] = [ls[5]!, ls[4]!]), 6, 'out of order'],
  ['a duplicate id, after the incoming input has ended', (ls: string[]) => (ls[5] = ls[4]!.replace('/4/', '/4bis/')), 6, 'duplicate id'],
  ['unsorted ids, while merging with incoming', (ls: string[]) => ([ls[0], ls[1]] = [ls[1]!, ls[0]!]), 2, 'out of order'],
  ['a duplicate id, while merging with incoming', (ls: string[]) => (ls[1] = ls[0]!), 2, 'duplicate id'],
] as [string, (ls: string[]) => void, number, string][]) {
  test(`join-current: current_log with ${what} is an error naming the line`, () => {
    const work = scratch('ms-fault-');
    const ls = currentLog(8).split('\n').slice(0, 8);
    mutate(ls);
    fs.writeFileSync(path.join(work, 'current_log'), ls.join('\n') + '\n');
    const r = runBin('join-current', ['--current', 'current_log'], `${urlRec(id16(7), 'i.com', 'http://i.com/')}\n`, work);
    assertFailedCleanly(r, 'join-current', `join-current: current_log:${line}: `, fragment);
  });
}

// --- a reflog that is still being written ------------------------------------------

test('analyze-dump: a reflog whose last line has no LF (still being written) is processed line by line and counted', () => {
  const work = scratch('ms-fault-');
  const done = `b\t1\t${TS}\t1\thttp://a.com/one\t1\t\n`;
  // Cut in the middle of the timestamp: rejected with its line number, never a crash.
  const r1 = runBin('analyze-dump', ['--max-reject-ratio', '1', '--rejects', 'rej'], `${done}b\t1\t2011072`, work);
  assert.equal(r1.status, 0, r1.stderr);
  const s1 = summaryOf(r1.stderr);
  assert.deepEqual([s1.lines_in, s1.records_out, s1.rejected], [2, 1, 1]);
  assert.match(fs.readFileSync(path.join(work, 'rej'), 'utf8'), /^2\tbad field count: 3 fields/);
  // Under the default --max-reject-ratio the cut line fails the run: nothing is output.
  const r2 = runBin('analyze-dump', [], `${done}b\t1\t2011072`, work);
  assertFailedCleanly(r2, 'analyze-dump', 'more than --max-reject-ratio');
  assert.equal(r2.stdout, failedOutput('analyze-dump'));
  // A complete record without its LF (the writer stopped after the last field) is a record.
  const r3 = runBin('analyze-dump', [], done + done.replace('one', 'two').slice(0, -1), work);
  assert.equal(r3.status, 0, r3.stderr);
  assert.equal(summaryOf(r3.stderr).records_out, 2);
});

/** A scratch directory laid out as the runner's defaults want it (var/inbox, var/state) with one Yacobot. */
function runnerWork(): { work: string; inbox: string } {
  const work = scratch('ms-fault-');
  const inbox = path.join(work, 'var', 'inbox');
  fs.mkdirSync(inbox, { recursive: true });
  fs.mkdirSync(path.join(work, 'var', 'state'), { recursive: true });
  madeDb(work, 'var/state/partner.db', [['add', 'yb-a']]);
  return { work, inbox };
}

test('runner: only complete *.reflog names are taken; a reflog being written under another name waits for the next run', () => {
  const { work, inbox } = runnerWork();
  const line = (u: string) => `b\t1\t20110728063000\tp\thttp://${u}/\t1\t`;
  // The producer's protocol: write under a name the runner ignores, rename to *.reflog when done.
  fs.writeFileSync(path.join(inbox, '2011072806.reflog'), `${line('a.com')}\n${line('b.com')}`); // complete, no final LF
  fs.writeFileSync(path.join(inbox, '2011072807.reflog.part'), `${line('c.com')}\nb\t1\t2011`);
  fs.writeFileSync(path.join(inbox, '.2011072808.reflog'), `${line('d.com')}\nb\t1\t2011`);
  assert.equal(runRunner(work).status, 1, 'a last line without LF fails its run by default');
  const r = runRunner(work, ['--allow-unterminated']);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(!hasStackTrace(r.stderr));
  assert.deepEqual(fs.readdirSync(inbox).sort(), ['.2011072808.reflog', '2011072807.reflog.part'], 'unfinished names left for the next run');
  const q = fs.readFileSync(path.join(work, 'var', 'queue', '1', '2011072806.tsv'), 'utf8');
  assert.match(q, /\thttp:\/\/a\.com\/\n/);
  assert.match(q, /\thttp:\/\/b\.com\/\n/, 'a complete last line without LF is a record');
});

test('runner: a *.reflog cut in its last line fails the run under the default reject ratio; nothing published, it stays for the next run', () => {
  const { work, inbox } = runnerWork();
  const full = `b\t1\t20110728063000\tp\thttp://a.com/\t1\t\nb\t1\t20110728063001\tp\thttp://b.com/\t1\t\n`;
  fs.writeFileSync(path.join(inbox, '2011072806.reflog'), full.slice(0, -20)); // the writer is mid-line
  const r = runRunner(work);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr));
  assert.match(r.stderr, /max-reject-ratio/);
  assert.deepEqual(fs.readdirSync(inbox), ['2011072806.reflog']);
  assert.deepEqual(listFiles(path.join(work, 'var', 'queue')), [], 'no queue file published');
  assert.ok(!fs.existsSync(path.join(work, 'var', 'state', 'current_log')), 'no current_log committed');
  // The writer finishes; the next run takes it whole.
  fs.writeFileSync(path.join(inbox, '2011072806.reflog'), full);
  const r2 = runRunner(work);
  assert.equal(r2.status, 0, r2.stderr);
  assert.equal(fs.readFileSync(path.join(work, 'var', 'queue', '1', '2011072806.tsv'), 'utf8').split('\n').length - 1, 2);
});
