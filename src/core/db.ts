// The partner database (SQLite through better-sqlite3): who the Yacobots are and
// which domain belongs to which. Stages open an existing database and check its
// schema; only `partner-db init` creates tables.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { domainToASCII } from 'node:url';
import type BetterSqlite3 from 'better-sqlite3';
import { DataError, clipText, ioError, shellQuote } from './errors.js';
import { parseCount } from './numbers.js';
import { domainTooLong, withoutTrailingDot } from './host.js';
import { loadBetterSqlite3 } from './cjs.js';

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
  if (n === null || n > 0x7fffffff) throw new DataError('BAD_ENV', `MASTER_SERVER_BUSY_TIMEOUT_MS wants a whole number of milliseconds from 0 to 2147483647, got '${clipText(v)}'`);
  return n;
}

/** The schema version this program reads, and `partner-db init` creates. */
export const SCHEMA_VERSION = 2;

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

/** partner_load counted afresh from partner_domain (one GROUP BY), and the version recorded: the end of init and migrate. */
export const RECOUNT_SQL = `
DELETE FROM partner_load;
INSERT INTO partner_load (yacobot_id, domains) SELECT yacobot_id, COUNT(*) FROM partner_domain GROUP BY yacobot_id;
INSERT INTO partner_meta (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}')
  ON CONFLICT (key) DO UPDATE SET value = excluded.value;
`;

const REQUIRED_COLUMNS: Record<string, string[]> = {
  yacobot: ['id', 'name', 'weight', 'active'],
  partner_domain: ['domain', 'yacobot_id', 'added_at'],
};
/** The tables version 2 adds, with their columns. */
const DERIVED_COLUMNS: Record<string, string[]> = {
  partner_load: ['yacobot_id', 'domains'],
  partner_meta: ['key', 'value'],
};
/** Each table's PRIMARY KEY: a domain has one row (upload-domains' upsert relies on it). */
const PRIMARY_KEYS: Record<string, string> = { yacobot: 'id', partner_domain: 'domain', partner_load: 'yacobot_id', partner_meta: 'key' };

/** A Yacobot row. */
export interface Yacobot {
  id: number;
  name: string;
  weight: number;
  active: boolean;
}

/** A Yacobot with the number of domains it owns. */
export interface YacobotLoad extends Yacobot {
  domains: number;
}

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

/** The hint every "no database" message carries. */
export function initHint(file: string): string {
  return `create one with: partner-db --db ${shellQuote(file)} init`;
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
 * Creates the database file if needed and the tables of schema version 2 if missing
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
    d.transaction(() => d.exec(fresh ? BASE_SQL + LOAD_SQL + RECOUNT_SQL : BASE_SQL))();
    checkSchema(db, file);
    return { db, created: !(facts.shapes.has('yacobot') && facts.shapes.has('partner_domain')) };
  } catch (err) {
    db?.close();
    throw dbError(err, file);
  }
}

/** What a migration did: the schema it found, and what partner_load counts now. */
export interface MigrateResult {
  /** 'current': nothing to do; 'version1': upgraded; 'incomplete': version 2 with a part missing, restored. */
  found: SchemaStanding;
  /** The number of domains partner_load counts, and of yacobot_id values it counts them under. */
  domains: number;
  owners: number;
}

/**
 * Brings a database opened with `anyVersion` to schema version 2 in one write
 * transaction: partner_load and its triggers (re)made, counted with one GROUP BY,
 * the version recorded. A database already at version 2, whole, is left as it is.
 */
export function migrateDb(db: Db, file: string): MigrateResult {
  return db
    .transaction((): MigrateResult => {
      const facts = schemaFacts(db);
      checkShapes(facts.shapes, file);
      const found = schemaStanding(facts, LOAD_TRIGGERS, file).standing;
      if (found !== 'current') {
        for (const t of LOAD_TRIGGERS) db.exec(`DROP TRIGGER IF EXISTS ${t}`);
        db.exec(`DROP TABLE IF EXISTS partner_load; ${LOAD_SQL} ${RECOUNT_SQL}`);
        checkSchema(db, file);
      }
      const r = db.prepare('SELECT COALESCE(SUM(domains), 0) AS domains, COUNT(*) AS owners FROM partner_load WHERE domains <> 0').get() as { domains: number; owners: number };
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

/** What a backend tells of a table: its columns and its PRIMARY KEY's columns. */
export interface TableShape {
  columns: Set<string>;
  pk: string[];
}

/** What a database holds, as any backend reads it, for the schema checks. */
export interface SchemaFacts {
  /** Every table (another application's too). */
  tables: ReadonlySet<string>;
  /** The shapes of the tables of ours it holds, by name. */
  shapes: ReadonlyMap<string, TableShape>;
  /** partner_meta's schema_version; null without that table or row (version 1). */
  version: string | null;
  /** The names of partner_domain's triggers that fire. */
  triggers: ReadonlySet<string>;
}

/** The tables of ours, whatever the version. */
export const OUR_TABLES: readonly string[] = [...Object.keys(REQUIRED_COLUMNS), ...Object.keys(DERIVED_COLUMNS)];

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
  const version = meta?.columns.has('key') && meta.columns.has('value') ? (db.prepare("SELECT value FROM partner_meta WHERE key = 'schema_version'").pluck().get() as unknown) : undefined;
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

/** checkSchema's rule on the shapes of the contract's tables a database holds (by name), for any backend. */
export function checkShapes(shapes: ReadonlyMap<string, TableShape>, file: string, opts: { missingTables?: boolean } = {}): void {
  for (const [table, cols] of Object.entries(REQUIRED_COLUMNS)) {
    const shape = shapes.get(table);
    if (!shape) {
      if (opts.missingTables) continue;
      throw new DataError('BAD_SCHEMA', `not a partner database: missing table '${table}' (${initHint(file)})`, { file });
    }
    const wrong = shapeError(table, shape, cols);
    if (wrong) throw new DataError('BAD_SCHEMA', `wrong schema: ${wrong}`, { file });
  }
}

/** What is wrong with a table of ours (a missing column, another PRIMARY KEY), or null. */
function shapeError(table: string, shape: TableShape, cols: readonly string[]): string | null {
  const col = cols.find((c) => !shape.columns.has(c));
  if (col !== undefined) return `table '${table}' has no column '${col}'`;
  if (shape.pk.length !== 1 || shape.pk[0] !== PRIMARY_KEYS[table]) return `the PRIMARY KEY of '${table}' is not '${PRIMARY_KEYS[table]}' alone`;
  return null;
}

/** How a database with the contract's tables stands against this program's schema version. */
export type SchemaStanding = 'current' | 'version1' | 'incomplete';

/**
 * Where `facts` stand (with `what`, the first part of version 2 missing when
 * incomplete); a DataError for a version this program does not know.
 */
export function schemaStanding(facts: SchemaFacts, triggers: readonly string[], file: string): { standing: SchemaStanding; what?: string } {
  if (facts.version === null) return { standing: 'version1' };
  if (facts.version !== String(SCHEMA_VERSION)) {
    throw new DataError('BAD_SCHEMA', `schema version '${clipText(facts.version)}', which this program does not know (it reads version ${SCHEMA_VERSION}): made by a newer release?`, { file });
  }
  for (const [table, cols] of Object.entries(DERIVED_COLUMNS)) {
    const shape = facts.shapes.get(table);
    const wrong = shape ? shapeError(table, shape, cols) : `table '${table}' is missing`;
    if (wrong) return { standing: 'incomplete', what: wrong };
  }
  const trigger = triggers.find((t) => !facts.triggers.has(t));
  if (trigger !== undefined) return { standing: 'incomplete', what: `trigger '${trigger}' on partner_domain is missing or disabled` };
  return { standing: 'current' };
}

/** The command that upgrades `file` to this program's schema. */
export function migrateHint(file: string): string {
  return `partner-db --db ${shellQuote(file)} migrate`;
}

/**
 * Throws unless `facts` are of schema version 2, whole: version 1 and a version 2
 * with a part missing both name the command that mends them (never done behind the
 * operator's back, as migrate rewrites a table).
 */
export function checkVersion(facts: SchemaFacts, triggers: readonly string[], file: string): void {
  const { standing, what } = schemaStanding(facts, triggers, file);
  if (standing === 'version1') {
    throw new DataError('OLD_SCHEMA', `schema version 1: this program reads version ${SCHEMA_VERSION}, which keeps each Yacobot's domain count in partner_load; upgrade it (one transaction) with: ${migrateHint(file)}`, { file });
  }
  if (standing === 'incomplete') {
    throw new DataError('BAD_SCHEMA', `schema version ${SCHEMA_VERSION}, but ${what} (changed by hand?); restore it with: ${migrateHint(file)}`, { file });
  }
}

/** The error for a database that holds tables of another application (init refuses to add ours). */
export function foreignTables(tables: Iterable<string>, file: string): DataError | null {
  const foreign = [...tables].filter((t) => !OUR_TABLES.includes(t) && !t.startsWith('sqlite_'));
  if (foreign.length === 0) return null;
  return new DataError('BAD_SCHEMA', `not a partner database: it holds other tables (${foreign.sort().join(', ')}); init only creates one or completes its own`, { file });
}

/** The largest weight partner-db accepts; weights are relative, so this is no limit in practice. */
export const MAX_WEIGHT = 1_000_000;

/** A Yacobot id set by hand that a JavaScript number cannot hold (or not positive): read as one, it would become another id. */
export function badYacobotId(file: string, y: { id: bigint; name: string }): DataError {
  return new DataError('BAD_YACOBOT_ID', `Yacobot '${clipText(y.name)}' has id ${y.id}, outside the ids this program handles (1 to ${Number.MAX_SAFE_INTEGER}); give it another`, { file });
}

/** Throws badYacobotId's error for the first Yacobot whose id is out of range (for readers that need no loads). */
export function checkYacobotIds(db: Db): void {
  const r = db
    .prepare('SELECT id, name FROM yacobot WHERE id < 1 OR id > ? ORDER BY id LIMIT 1')
    .safeIntegers(true)
    .get(BigInt(Number.MAX_SAFE_INTEGER)) as { id: bigint; name: string } | undefined;
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
 * A Yacobot row with its domain count as a YacobotLoad, or a DataError for an id no
 * stream can carry or a weight outside (0, MAX_WEIGHT] (both set by hand).
 */
export function checkedLoad(r: { id: bigint; name: string; weight: number | bigint; active: number | bigint; domains: bigint }, file: string): YacobotLoad {
  if (r.id > BigInt(Number.MAX_SAFE_INTEGER) || r.id < 1n) throw badYacobotId(file, r);
  const weight = Number(r.weight);
  // The schema's CHECK (weight > 0) lets Infinity through (9e999 typed into SQLite),
  // and a load of n / Infinity made every such Yacobot tie at 0.
  if (!(weight > 0 && weight <= MAX_WEIGHT)) {
    throw new DataError('BAD_WEIGHT', `Yacobot '${clipText(r.name)}' has weight ${weight}, outside 0 to ${MAX_WEIGHT} (set by hand?); fix that row`, { file });
  }
  return { id: Number(r.id), name: r.name, weight, active: Number(r.active) !== 0, domains: Number(r.domains) };
}

/** A yacobot_id of partner_domain that names no Yacobot: its rows' count and first domain. */
export interface MissingOwner {
  /** The value as SQLite holds it (an integer, exactly, or whatever else was written). */
  id: string;
  domains: number;
  first: string;
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

/**
 * The error for partner_domain rows that name Yacobots that do not exist: the first
 * such domain and its id, how many there are, and the partner-db command that gives
 * a domain to a Yacobot that does.
 */
export function missingOwnerError(file: string, missing: readonly MissingOwner[]): DataError {
  const m = missing[0]!;
  const rows = missing.reduce((n, x) => n + x.domains, 0);
  const also = rows > 1 ? ` (${rows} domains name ${missing.length === 1 ? 'it' : `${missing.length} such ids: ${missing.slice(0, 5).map((x) => x.id).join(', ')}${missing.length > 5 ? ', ...' : ''}`})` : '';
  return new DataError(
    'NO_SUCH_YACOBOT',
    `partner_domain gives ${m.first} to Yacobot ${m.id}, which does not exist${also} (written with foreign keys off?); ` +
      `give ${rows > 1 ? 'each such domain' : 'it'} to an existing Yacobot with: partner-db --db ${shellQuote(file)} assign ${shellQuote(m.first)} YACOBOT` +
      (rows > 1 ? ` (or all at once: partner-db --db ${shellQuote(file)} import FILE.csv)` : ''),
    { file },
  );
}

/** The active Yacobots with their domain counts, by id. */
export function activeLoads(db: Db): YacobotLoad[] {
  return yacobotLoads(db).filter((y) => y.active);
}

/** `s` without the spaces and tabs at its ends (and nothing else: not String.prototype.trim's Unicode spaces). */
function trimBlanks(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s[a] === ' ' || s[a] === '\t')) a++;
  while (b > a && (s[b - 1] === ' ' || s[b - 1] === '\t')) b--;
  return s.slice(a, b);
}

/**
 * Normalizes a domain typed by a person (CSV import, assign) to the spelling URL
 * records carry: drops the spaces and tabs at its ends, then parses it as the URL
 * parser parses a host, and drops one trailing dot as canonicalize does. Every domain
 * a record can carry comes back unchanged. Returns the domain, or an error message
 * for something that is no host or is longer than MAX_DOMAIN_BYTES.
 */
export function normalizeDomain(text: string): { domain: string } | { error: string } {
  // Not trim(): it also drops a no-break space (or U+3000, ...), and '\u00a0.de', which
  // the parser refuses, was stored as the domain '.de'.
  const d = trimBlanks(text);
  if (d === '') return { error: 'empty domain' };
  // Checked before IDN conversion, which would silently drop tabs and newlines.
  if (/[\x00-\x20\x7f]/.test(d)) return { error: `bad domain '${clipText(d)}' (space or control character)` };
  // The host as the URL records carry it (WHATWG host parsing, as analyze-dump's URL
  // parser): lower case and IDN to punycode by its own mapping (not toLowerCase, which
  // makes capital sharp s a ß where the parser has "ss"), an IPv4 address in any form
  // (0xC0.0xA8.0.1, 3232235521) to dotted decimal, an IPv6 literal compressed. Another
  // spelling would be stored and reported as assigned, but never match a record. No
  // rule of its own beyond that: what the parser takes (`a*b.com`, a label of 64
  // characters, `-a-.com`, `a..b.com`) records carry, and upload-domains assigns.
  // (The parser would take 'a/b' or 'a?b' for the host 'a' with more after it;
  // domainToASCII refuses a port or userinfo.)
  const ascii = /[/?#\\]/.test(d) ? '' : domainToASCII(d);
  if (ascii === '') return { error: `bad domain '${clipText(d)}'` };
  // After the mapping: a trailing '。' is a trailing dot too.
  const domain = withoutTrailingDot(ascii);
  const long = domainTooLong(domain);
  return long === null ? { domain } : { error: `domain too long (${long}): '${clipText(domain)}'` };
}

/**
 * A weight as the exact decimal it was typed as: `m / 10^k`, from the shortest
 * decimal that reads back as the same double (0.3 is 3/10, not 0.2999...).
 */
function decimalOf(w: number): { m: bigint; k: number } {
  const [mant, exp] = String(w).split('e') as [string, string | undefined];
  const [int, frac = ''] = mant.split('.') as [string, string | undefined];
  let k = frac.length - Number(exp ?? 0);
  let m = BigInt(int + frac);
  for (; k < 0; k++) m *= 10n;
  return { m, k };
}

/**
 * Least-loaded choice over a fixed set of Yacobots: load = domains / weight, ties to
 * the smallest id; every pick counts, so a batch of picks spreads by weight. Loads
 * are compared exactly, with weights as the decimals the operator typed: in binary,
 * 3 x 0.1 is not 1 x 0.3, and the tie of 3 domains at 0.3 and 1 at 0.1 went to the
 * wrong Yacobot.
 */
export class LeastLoaded {
  /** Each weight as an integer: the weight times 10^k, one k for all (the most decimals any has). */
  private readonly ys: { id: number; domains: number; w: bigint }[];

  constructor(yacobots: readonly { id: number; weight: number; domains: number }[]) {
    const ds = yacobots.map((y) => decimalOf(y.weight));
    const k = Math.max(0, ...ds.map((d) => d.k));
    this.ys = yacobots
      .map((y, i) => ({ id: y.id, domains: y.domains, w: ds[i]!.m * 10n ** BigInt(k - ds[i]!.k) }))
      .sort((a, b) => a.id - b.id);
  }

  get size(): number {
    return this.ys.length;
  }

  /** The id of the least-loaded Yacobot, whose count then grows by one. Throws if there is none. */
  pick(): number {
    let best = this.ys[0];
    if (!best) throw new Error('LeastLoaded.pick with no Yacobots');
    for (let i = 1; i < this.ys.length; i++) {
      const y = this.ys[i]!;
      // y.domains / y.w < best.domains / best.w, cross-multiplied in integers; strict <
      // keeps the smaller id on ties.
      if (BigInt(y.domains) * best.w < BigInt(best.domains) * y.w) best = y;
    }
    best.domains++;
    return best.id;
  }
}

/** Weighted rendezvous choice: the same domain and Yacobot list give the same answer everywhere. */
export type RendezvousFn = (domain: string, yacobots: readonly { id: number; weight: number }[]) => number;

const TWO_53 = 2 ** 53;

/**
 * Loads the hash and returns the weighted rendezvous chooser: for each Yacobot,
 * score = -weight / ln(h), h = the top 53 bits of XXH64("domain TAB id") mapped into
 * (0,1); the highest score wins, ties to the smallest id.
 */
export async function loadRendezvous(): Promise<RendezvousFn> {
  // Loaded here: only --assign rendezvous hashes domains.
  const { h64 } = await (await import('xxhash-wasm')).default();
  return (domain, yacobots) => {
    let bestId = -1;
    let bestScore = -Infinity;
    for (const y of yacobots) {
      const h = (Number(h64(`${domain}\t${y.id}`) >> 11n) + 0.5) / TWO_53;
      const score = -y.weight / Math.log(h);
      if (score > bestScore || (score === bestScore && y.id < bestId)) {
        bestScore = score;
        bestId = y.id;
      }
    }
    if (bestId < 0) throw new Error('rendezvous with no Yacobots');
    return bestId;
  };
}
