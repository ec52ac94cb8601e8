// The partner database on a SQLite file (better-sqlite3), connection level: opening,
// creating and migrating the file, its errors, and the reads the SQLite store makes
// of it. Stages open an existing database and check its schema; only `partner-db
// init` creates tables. The rules both backends share are in schema.ts and yacobots.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { DataError, clipText, ioError, shellQuote } from '../errors.js';
import { parseCount } from '../numbers.js';
import { loadBetterSqlite3 } from '../cjs.js';
import {
  OUR_TABLES,
  RECOUNT_SQL,
  checkShapes,
  claimTableSql,
  claimUpgradeSql,
  checkVersion,
  foreignTables,
  initHint,
  schemaStanding,
  type MigrateResult,
  type SchemaFacts,
  type TableShape,
} from './schema.js';
import { badYacobotId, checkedLoad, type MissingOwner, type YacobotLoad } from './yacobots.js';

const Database = loadBetterSqlite3();

export type Db = BetterSqlite3.Database;

/**
 * How long a connection waits for another process's write lock before failing:
 * 5000 ms, or MASTER_SERVER_BUSY_TIMEOUT_MS (digits) when set and not empty. Any
 * other value is an error, not 5000 ms in silence: an operator who set it meant something.
 */
export function busyTimeoutMs(): number {
  const v = process.env.MASTER_SERVER_BUSY_TIMEOUT_MS;
  if (v === undefined || v === '') return 5000; // set empty: unset, as shells often leave it
  const n = parseCount(v);
  // better-sqlite3 takes at most 2^31 - 1 (about 24 days).
  if (n === null || n > 0x7fffffff)
    throw new DataError('BAD_ENV', `MASTER_SERVER_BUSY_TIMEOUT_MS wants a whole number of milliseconds from 0 to 2147483647, got '${clipText(v)}'`);
  return n;
}

/** The contract's tables (all of schema version 1), plus an index for moves and missingOwners. */
const BASE_SQL = `
CREATE TABLE IF NOT EXISTS yacobot (
  id INTEGER PRIMARY KEY,
  name TEXT UNIQUE NOT NULL,
  weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0),
  active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS partner_domain (
  domain TEXT PRIMARY KEY,
  yacobot_id INTEGER NOT NULL REFERENCES yacobot(id),
  added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS partner_domain_yacobot ON partner_domain(yacobot_id);
`;

/** The triggers that keep partner_load, by name (each is created by LOAD_SQL). */
const LOAD_TRIGGERS = ['partner_load_insert', 'partner_load_delete', 'partner_load_update'];

/**
 * What version 2 adds: partner_load, each yacobot_id value's number of partner_domain
 * rows, kept by row triggers on every insert, delete and change of owner, whoever
 * writes; and partner_meta, which holds the schema version. partner_load's key has
 * partner_domain.yacobot_id's affinity and no foreign key, so a value written by hand
 * with foreign keys off (an id of no Yacobot, even text) is counted under itself; a
 * WITHOUT ROWID table, as an INTEGER PRIMARY KEY would refuse text.
 */
const LOAD_SQL = `
CREATE TABLE IF NOT EXISTS partner_load (
  yacobot_id INTEGER PRIMARY KEY,
  domains INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS partner_load_insert AFTER INSERT ON partner_domain BEGIN
  INSERT INTO partner_load (yacobot_id, domains) VALUES (NEW.yacobot_id, 1)
    ON CONFLICT (yacobot_id) DO UPDATE SET domains = domains + 1;
END;
CREATE TRIGGER IF NOT EXISTS partner_load_delete AFTER DELETE ON partner_domain BEGIN
  UPDATE partner_load SET domains = domains - 1 WHERE yacobot_id = OLD.yacobot_id;
END;
CREATE TRIGGER IF NOT EXISTS partner_load_update AFTER UPDATE OF yacobot_id ON partner_domain
  WHEN OLD.yacobot_id IS NOT NEW.yacobot_id BEGIN
  UPDATE partner_load SET domains = domains - 1 WHERE yacobot_id = OLD.yacobot_id;
  INSERT INTO partner_load (yacobot_id, domains) VALUES (NEW.yacobot_id, 1)
    ON CONFLICT (yacobot_id) DO UPDATE SET domains = domains + 1;
END;
CREATE TABLE IF NOT EXISTS partner_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

/** The tables of versions 3 and 4: hour_claim (run names compare bytewise: SQLite's BINARY collation), master_state, domain_commit. */
const CLAIM_SQL = claimTableSql('');

/**
 * Turns an error thrown by better-sqlite3 into a DataError naming the database
 * file (code DB_BUSY for SQLITE_BUSY and its extended codes, see isBusy; else DB);
 * returns anything else unchanged (so callers can `throw dbError(err, file)`).
 */
export function dbError(err: unknown, file: string): unknown {
  if (err instanceof DataError) return err;
  const e = err as { code?: unknown; message?: unknown; name?: unknown };
  if (e && typeof e.code === 'string' && e.code.startsWith('SQLITE_')) {
    const hint =
      e.code === 'SQLITE_BUSY_SNAPSHOT'
        ? // Returned at once, without the busy timeout: the snapshot this transaction read is stale.
          ' (another process wrote to the database meanwhile)'
        : isBusy(e.code)
          ? ` (another process held the database longer than ${busyTimeoutMs()} ms)`
          : e.code === 'SQLITE_NOTADB'
            ? ' (not an SQLite database?)'
            : e.code === 'SQLITE_READONLY_DIRECTORY' || (e.code === 'SQLITE_CANTOPEN' && dirNotWritable(file))
              ? // Even a reader of a WAL database makes its -shm file beside it (after a
                // writer was killed, the -wal it left makes that SQLITE_CANTOPEN).
                " (the database's directory must be writable by this user, even to read it: SQLite keeps the -wal and -shm files there)"
              : e.code.startsWith('SQLITE_READONLY')
                ? readOnlyBecause(file)
                : '';
    // Its own code: a busy database is no fault of the run, and the runner says so (retry later).
    return new DataError(isBusy(e.code) ? 'DB_BUSY' : 'DB', `database error: ${e.code}: ${String(e.message)}${hint}`, { file });
  }
  return err;
}

/**
 * Whether an SQLite error code says another process holds the database, so the same
 * work succeeds later: SQLITE_BUSY and its extended codes (_RECOVERY: another process
 * is recovering the WAL; _SNAPSHOT: another wrote since this transaction read; _TIMEOUT:
 * a blocking lock timed out). Not SQLITE_LOCKED*: a conflict inside this process (the
 * same connection, or a shared cache, which this project does not use), which waiting
 * does not end.
 */
function isBusy(code: string): boolean {
  return code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_');
}

/**
 * Why SQLite opened `file` read-only for this user, as a hint: the file itself is not
 * writable, or its -wal or -shm file is not (left by another user's reader, which could
 * not remove them: until they are writable, every write here fails). '' when neither.
 */
function readOnlyBecause(file: string): string {
  if (fs.existsSync(file) && !writable(file)) return ' (this user may not write the database file)';
  for (const f of [`${file}-shm`, `${file}-wal`]) {
    let uid: number;
    try {
      uid = fs.statSync(f).uid;
    } catch {
      continue;
    }
    if (writable(f)) continue;
    const me = process.getuid?.();
    const twins = `${shellQuote(`${file}-wal`)} ${shellQuote(`${file}-shm`)}`;
    // This user's own files, of a mode that forbids writing (a killed reader's 444): chmod, not chown.
    const mend = uid === me ? `chmod u+w ${twins}` : `e.g. as root: chown ${me ?? 'THIS-USER'} ${twins}`;
    return ` (${f} belongs to uid ${uid} and this user may not write it, so SQLite opened the database read-only; make it and its twin writable by this user: ${mend})`;
  }
  return '';
}

/** Whether the directory of an existing `file` that this user may read cannot be written by this user. */
function dirNotWritable(file: string): boolean {
  try {
    if (!fs.statSync(file).isFile()) return false;
    fs.accessSync(file, fs.constants.R_OK); // else that is the trouble, not the directory
  } catch {
    return false;
  }
  try {
    fs.accessSync(path.dirname(path.resolve(file)), fs.constants.W_OK);
    return false;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EROFS';
  }
}

/** Whether this user may write `file` (access(2): its real uid, as a file it opens). */
function writable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Whether this user may write `file` and its directory (where SQLite makes and removes the -wal and -shm files). */
function mayWrite(file: string): boolean {
  return writable(file) && writable(path.dirname(path.resolve(file)));
}

/**
 * Opens an existing partner database for a stage: WAL mode, busy timeout, foreign
 * keys on, schema checked. Never creates the file; a missing file or a wrong schema
 * is a DataError that says what to do. With `readonly` the caller only reads: the
 * journal mode is left as it is, and the connection is read-write only where this
 * user may write the file and its directory (see mayWrite). With `anyVersion` a
 * database of schema version 1 opens too (for migrate, and copy's source).
 */
export function openDb(file: string, opts: { readonly?: boolean; anyVersion?: boolean } = {}): Db {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
    // SQLite says only "unable to open database file" for a file this user may not read.
    if (st.isFile()) fs.accessSync(file, fs.constants.R_OK);
  } catch (err) {
    // Only a file that is not there is one to create: a directory this user may not
    // search (EACCES) hides a database that exists.
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new DataError('NO_DB', `database does not exist; ${initHint(file)}`, { file });
    throw ioError(err, file, 'open');
  }
  if (!st.isFile()) throw new DataError('NO_DB', 'database is not a regular file', { file });
  let db: Db | null = null;
  try {
    // A read-only connection may not checkpoint, so its close leaves the -wal and -shm
    // files it made beside a WAL database (partner-db list left two after every run):
    // where this user could write, a reader opens read-write, which only reads, and
    // its close removes them as a writer's does.
    const readonly = (opts.readonly ?? false) && !mayWrite(file);
    db = new Database(file, { fileMustExist: true, timeout: busyTimeoutMs(), readonly });
    // Schema first: a file that is not a partner database is left exactly as it was
    // (switching it to WAL would rewrite its header and add -wal/-shm files).
    checkSchema(db, file, { anyVersion: opts.anyVersion });
    configure(db, !opts.readonly);
    return db;
  } catch (err) {
    db?.close();
    throw dbError(err, file);
  }
}

/**
 * Creates the database file if needed and the tables of this schema version if missing
 * (idempotent). A file that is not a partner database, or only half of one, is refused
 * before anything in it changes: tables of another application, a table of ours with
 * the wrong columns, or a database of version 1 (which migrate upgrades) fail with the
 * file exactly as it was (not switched to WAL). Returns whether the tables were created now.
 */
export function initDb(file: string): { db: Db; created: boolean } {
  const dir = path.dirname(path.resolve(file));
  if (!fs.existsSync(dir)) {
    throw new DataError('NO_DIR', `directory ${dir} does not exist (create it first: mkdir -p ${shellQuote(dir)})`, { file });
  }
  // SQLite would open a FIFO or a device and report "disk I/O error", a directory as
  // "unable to open database file".
  let st: fs.Stats | null = null;
  try {
    st = fs.statSync(file);
  } catch {
    /* absent: created below */
  }
  if (st && !st.isFile()) throw new DataError('NO_DB', 'database is not a regular file', { file });
  if (!st) {
    try {
      fs.accessSync(dir, fs.constants.W_OK);
    } catch (err) {
      throw ioError(err, file, 'create');
    }
  }
  let db: Db | null = null;
  try {
    db = new Database(file, { timeout: busyTimeoutMs() });
    const facts = schemaFacts(db);
    const foreign = foreignTables(facts.tables, file);
    if (foreign) throw foreign;
    checkShapes(facts.shapes, file, { missingTables: true });
    // Domains already there: their counts are migrate's work, which the operator asks for.
    const fresh = !facts.shapes.has('partner_domain');
    if (!fresh) checkVersion(facts, LOAD_TRIGGERS, file);
    configure(db, true);
    // One transaction: a crash leaves every table or none.
    const d = db;
    d.transaction(() => d.exec(fresh ? BASE_SQL + LOAD_SQL + CLAIM_SQL + RECOUNT_SQL : BASE_SQL))();
    checkSchema(db, file);
    return { db, created: !(facts.shapes.has('yacobot') && facts.shapes.has('partner_domain')) };
  } catch (err) {
    db?.close();
    throw dbError(err, file);
  }
}

/**
 * Brings a database opened with `anyVersion` to this schema version in one write
 * transaction: partner_load and its triggers (re)made, counted with one GROUP BY,
 * hour_claim, master_state and domain_commit made where missing (hour_claim given its
 * state_id column), the version recorded. A database already at this
 * version, whole, is left as it is.
 */
export function migrateDb(db: Db, file: string): MigrateResult {
  return db
    .transaction((): MigrateResult => {
      const facts = schemaFacts(db);
      checkShapes(facts.shapes, file);
      const found = schemaStanding(facts, LOAD_TRIGGERS, file).standing;
      if (found !== 'current') {
        for (const t of LOAD_TRIGGERS) db.exec(`DROP TRIGGER IF EXISTS ${t}`);
        db.exec(`DROP TABLE IF EXISTS partner_load; ${LOAD_SQL} ${CLAIM_SQL} ${claimUpgradeSql(facts)} ${RECOUNT_SQL}`);
        checkSchema(db, file);
      }
      const r = db.prepare('SELECT COALESCE(SUM(domains), 0) AS domains, COUNT(*) AS owners FROM partner_load WHERE domains <> 0').get() as {
        domains: number;
        owners: number;
      };
      return { found, domains: r.domains, owners: r.owners };
    })
    .immediate();
}

function configure(db: Db, writable: boolean): void {
  // WAL lets readers (domains-from-db, lookups) run while a writer commits.
  if (writable) db.pragma('journal_mode = WAL');
  // FULL: a transaction is on disk when COMMIT returns (WAL's default here, NORMAL, may
  // lose the last ones on power loss). The runner publishes queue files that rely on
  // upload-domains' assignments being durable; an fsync per transaction costs nothing here.
  if (writable) db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  // A row that INSERT OR REPLACE deletes fires the delete trigger only with this on:
  // without it, partner_load would keep counting the replaced row.
  db.pragma('recursive_triggers = ON');
}

function tableNames(db: Db): Set<string> {
  return new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
}

/** The SchemaFacts of a SQLite database. */
function schemaFacts(db: Db): SchemaFacts {
  const tables = tableNames(db);
  const shapes = new Map<string, TableShape>();
  for (const table of OUR_TABLES) {
    if (!tables.has(table)) continue;
    const info = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string; pk: number }[];
    shapes.set(table, { columns: new Set(info.map((c) => c.name)), pk: info.filter((c) => c.pk > 0).map((c) => c.name) });
  }
  const meta = shapes.get('partner_meta');
  const version =
    meta?.columns.has('key') && meta.columns.has('value')
      ? (db.prepare("SELECT value FROM partner_meta WHERE key = 'schema_version'").pluck().get() as unknown)
      : undefined;
  const triggers = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'partner_domain'").pluck().all() as string[]);
  return { tables, shapes, version: version === undefined || version === null ? null : String(version), triggers };
}

/**
 * Throws a DataError naming the first missing table or column of the contract's schema,
 * or a schema version other than this program's (see checkVersion); with
 * `missingTables`, only the tables that exist are checked (for init, which creates the
 * rest), and no version; with `anyVersion`, no version.
 */
export function checkSchema(db: Db, file: string, opts: { missingTables?: boolean; anyVersion?: boolean } = {}): void {
  const facts = schemaFacts(db);
  checkShapes(facts.shapes, file, opts);
  if (!opts.missingTables && !opts.anyVersion) checkVersion(facts, LOAD_TRIGGERS, file);
}

/** Throws badYacobotId's error for the first Yacobot whose id is out of range (for readers that need no loads). */
export function checkYacobotIds(db: Db): void {
  const r = db.prepare('SELECT id, name FROM yacobot WHERE id < 1 OR id > ? ORDER BY id LIMIT 1').safeIntegers(true).get(BigInt(Number.MAX_SAFE_INTEGER)) as
    | { id: bigint; name: string }
    | undefined;
  if (r) throw badYacobotId(db.name, r);
}

/**
 * Every Yacobot with its domain count (from partner_load: one row per Yacobot, not a
 * count of the domains), by id. An id set by hand that no stream can
 * carry is a DataError: one above 2^53 - 1 read as a number became another id (its
 * domains were routed to a Yacobot that does not exist), 0 meant "new domain"; so
 * is a weight outside (0, MAX_WEIGHT].
 */
export function yacobotLoads(db: Db): YacobotLoad[] {
  const rows = db
    .prepare(
      `SELECT y.id, y.name, y.weight, y.active, COALESCE(l.domains, 0) AS domains
         FROM yacobot y LEFT JOIN partner_load l ON l.yacobot_id = y.id ORDER BY y.id`,
    )
    .safeIntegers(true)
    .all() as { id: bigint; name: string; weight: number | bigint; active: number | bigint; domains: bigint }[];
  return rows.map((r) => checkedLoad(r, db.name));
}

/**
 * The yacobot_id values of partner_domain that name no row of yacobot (written with
 * foreign keys off), by value. One index seek per distinct value, not a scan of the
 * domains.
 */
export function missingOwners(db: Db): MissingOwner[] {
  const ids = new Set((db.prepare('SELECT id FROM yacobot').pluck().safeIntegers(true).all() as unknown[]).map(String));
  const first = db.prepare('SELECT yacobot_id FROM partner_domain ORDER BY yacobot_id LIMIT 1').pluck().safeIntegers(true);
  const next = db.prepare('SELECT yacobot_id FROM partner_domain WHERE yacobot_id > ? ORDER BY yacobot_id LIMIT 1').pluck().safeIntegers(true);
  const count = db.prepare('SELECT COUNT(*) FROM partner_domain WHERE yacobot_id = ?').pluck();
  const firstDomain = db.prepare('SELECT domain FROM partner_domain WHERE yacobot_id = ? ORDER BY domain LIMIT 1').pluck();
  const out: MissingOwner[] = [];
  for (let v = first.get() as unknown; v !== undefined && v !== null; v = next.get(v) as unknown) {
    if (typeof v === 'bigint' && ids.has(String(v))) continue;
    out.push({ id: typeof v === 'string' ? `'${clipText(v)}'` : String(v), domains: count.get(v) as number, first: String(firstDomain.get(v)) });
  }
  return out;
}

/** The active Yacobots with their domain counts, by id. */
export function activeLoads(db: Db): YacobotLoad[] {
  return yacobotLoads(db).filter((y) => y.active);
}
