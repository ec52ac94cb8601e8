// The partner store on PostgreSQL (node-postgres): one database that several Master
// Servers share. Every write transaction first takes one advisory lock, so writers
// (upload-domains of any master, partner-db) run one at a time, as on SQLite.
import { createRequire } from 'node:module';
import type * as Pg from 'pg';
import { DataError, shellQuote } from './errors.js';
import { checkShapes, checkedLoad, foreignTables, type MissingOwner, type TableShape, type YacobotLoad } from './db.js';
import { missingOwnerError } from './db.js';
import {
  DEFAULT_TIMEOUTS,
  assignInTx,
  findYacobotIn,
  newIdTooBig,
  noActive,
  redactDb,
  type Chooser,
  type CommitResult,
  type NewDomains,
  type DomainRow,
  type OpenOptions,
  type OwnerLookup,
  type PartnerStore,
  type Row,
  type Sql,
  type Timeouts,
} from './store.js';

const require = createRequire(import.meta.url);
const pg = require('pg') as typeof Pg;

/** The advisory lock key every write transaction takes (any constant; 'MSpd' in ASCII). */
const WRITE_LOCK = 0x4d537064;
/** Domains per statement in lookups and inserts. */
const BATCH = 5000;

/** The SQL of the contract's schema for PostgreSQL; domains compare bytewise (collation "C"), as on SQLite. */
const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS yacobot (
  id BIGINT PRIMARY KEY,
  name TEXT UNIQUE NOT NULL,
  weight DOUBLE PRECISION NOT NULL DEFAULT 1 CHECK (weight > 0),
  active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS partner_domain (
  domain TEXT COLLATE "C" PRIMARY KEY,
  yacobot_id BIGINT NOT NULL REFERENCES yacobot(id),
  added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS partner_domain_yacobot ON partner_domain(yacobot_id);
`;

/** An int8 as a number when it is one exactly, else a bigint. */
function int8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

/** `?` placeholders as PostgreSQL's $1, $2, ... (the portable SQL holds no '?' elsewhere). */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** A PostgreSQL partner store over one connection. */
export class PgStore implements PartnerStore {
  readonly kind = 'postgresql';
  private broken: unknown = null;
  private readonly sql: Sql;

  constructor(
    private readonly client: Pg.Client,
    readonly name: string,
    private readonly where: string,
  ) {
    // A connection that drops while idle is an 'error' event: the next query fails with it.
    client.on('error', (err) => (this.broken ??= err));
    this.sql = {
      all: async (s, p = []) => (await this.query(numbered(s), p)).rows,
      get: async (s, p = []) => (await this.query(numbered(s), p)).rows[0],
      run: async (s, p = []) => (await this.query(numbered(s), p)).rowCount ?? 0,
    };
  }

  /** Runs one statement; an error names the database, never its password. */
  async query(text: string, params: readonly unknown[] = []): Promise<Pg.QueryResult<Row>> {
    if (this.broken) throw pgError(this.broken, this.name, this.where);
    try {
      return await this.client.query<Row>(text, params as unknown[]);
    } catch (err) {
      throw pgError(err, this.name, this.where);
    }
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }

  async yacobotLoads(): Promise<YacobotLoad[]> {
    const { rows } = await this.query(
      `SELECT y.id::text AS id, y.name, y.weight, y.active,
              (SELECT COUNT(*) FROM partner_domain d WHERE d.yacobot_id = y.id)::text AS domains
         FROM yacobot y ORDER BY y.id`,
    );
    return rows.map((r) => checkedLoad({ id: BigInt(r.id as string), name: r.name as string, weight: r.weight as number, active: r.active as number, domains: BigInt(r.domains as string) }, this.name));
  }

  async missingOwners(): Promise<MissingOwner[]> {
    // The distinct owner ids by a walk of the yacobot_id index (one seek per id, as on
    // SQLite), not a scan of every domain; then the rows of those that name no Yacobot.
    const { rows } = await this.query(
      `WITH RECURSIVE ids(v) AS (
         SELECT MIN(yacobot_id) FROM partner_domain
         UNION ALL
         SELECT (SELECT MIN(yacobot_id) FROM partner_domain WHERE yacobot_id > v) FROM ids WHERE v IS NOT NULL)
       SELECT v::text AS id,
              (SELECT COUNT(*) FROM partner_domain WHERE yacobot_id = v)::int AS domains,
              (SELECT MIN(domain) FROM partner_domain WHERE yacobot_id = v) AS first
         FROM ids WHERE v IS NOT NULL AND NOT EXISTS (SELECT 1 FROM yacobot WHERE id = v) ORDER BY v`,
    );
    return rows.map((r) => ({ id: r.id as string, domains: r.domains as number, first: r.first as string }));
  }

  async findYacobot(ref: string) {
    return findYacobotIn(this.sql, ref);
  }

  async activeIds(): Promise<Set<number>> {
    return new Set((await this.query('SELECT id FROM yacobot WHERE active = 1')).rows.map((r) => Number(r.id)));
  }

  async yacobotExists(id: bigint): Promise<boolean> {
    return (await this.query('SELECT 1 FROM yacobot WHERE id = $1', [String(id)])).rowCount! > 0;
  }

  async ownersOf(domains: readonly string[]): Promise<OwnerLookup> {
    const found = new Map<string, unknown>();
    try {
      for (const [d, id] of await this.lookup(domains)) found.set(d, BigInt(id));
    } catch (err) {
      return { found, error: err };
    }
    return { found, error: null };
  }

  /** The owners of those of `domains` that have one, BATCH domains per statement. */
  private async lookup(domains: readonly string[]): Promise<Map<string, number>> {
    const m = new Map<string, number>();
    for (let i = 0; i < domains.length; i += BATCH) {
      const { rows } = await this.query('SELECT domain, yacobot_id FROM partner_domain WHERE domain = ANY($1::text[])', [domains.slice(i, i + BATCH)]);
      for (const r of rows) m.set(r.domain as string, Number(r.yacobot_id));
    }
    return m;
  }

  async addedAtOf(domain: string): Promise<string | undefined> {
    return (await this.query('SELECT added_at FROM partner_domain WHERE domain = $1', [domain])).rows[0]?.added_at as string | undefined;
  }

  async dumpSorted(check: (domain: unknown, id: unknown) => void, emit: (row: DomainRow) => void | Promise<void>): Promise<void> {
    await this.read(async () => {
      const big = await this.query('SELECT id::text AS id, name FROM yacobot WHERE id < 1 OR id > $1 ORDER BY id LIMIT 1', [Number.MAX_SAFE_INTEGER]);
      if (big.rows[0]) throw checkedLoadError(big.rows[0], this.name);
      await this.eachRow(async (d, id) => check(d, id));
      const missing = await this.missingOwners();
      if (missing.length > 0) throw missingOwnerError(this.name, missing);
      await this.eachRow(async (d, id) => {
        const p = emit([d as string, Number(id)]);
        if (p) await p;
      });
    });
  }

  /** Gives every (domain, yacobot_id) row to `fn` in bytewise domain order, through a cursor (bounded memory). */
  private async eachRow(fn: (domain: unknown, id: bigint) => Promise<void>): Promise<void> {
    await this.query('DECLARE dump NO SCROLL CURSOR FOR SELECT domain, yacobot_id::text AS id FROM partner_domain ORDER BY domain COLLATE "C"');
    for (;;) {
      const { rows } = await this.query(`FETCH ${BATCH} FROM dump`);
      for (const r of rows) await fn(r.domain, BigInt(r.id as string));
      if (rows.length < BATCH) break;
    }
    await this.query('CLOSE dump');
  }

  async assignNew(fresh: NewDomains, choose: Chooser, addedAt: string, beforeCommit?: (inserted: number, witness: string | null) => void): Promise<CommitResult> {
    const io = {
      lookup: (ds: readonly string[]) => this.lookup(ds),
      insert: async (rows: [string, number][]) => {
        await this.query(
          `INSERT INTO partner_domain (domain, yacobot_id, added_at)
           SELECT d, y, $3 FROM unnest($1::text[], $2::bigint[]) AS t(d, y) ON CONFLICT (domain) DO NOTHING`,
          [rows.map((r) => r[0]), rows.map((r) => r[1]), addedAt],
        );
      },
    };
    return this.write(async () => {
      const r = await assignInTx(await this.yacobotLoads(), fresh, choose, io, BATCH);
      if (r.noActive) throw noActive(this.name, 'at commit time (disabled during the run?)', shellQuote(this.name));
      beforeCommit?.(r.assignedByUs, r.witness);
      return { assignedByUs: r.assignedByUs, lostRace: r.lostRace };
    });
  }

  async addYacobot(name: string, weight: number): Promise<bigint> {
    return this.write(async () => {
      const top = await this.query('SELECT (COALESCE(MAX(id), 0) + 1)::text AS id FROM yacobot');
      const id = BigInt(top.rows[0]!.id as string);
      const bad = newIdTooBig(id, this.name);
      if (bad) throw bad;
      await this.query('INSERT INTO yacobot (id, name, weight, active) VALUES ($1, $2, $3, 1)', [String(id), name, weight]);
      return id;
    });
  }

  async write<T>(fn: (q: Sql) => Promise<T>): Promise<T> {
    return this.tx('BEGIN', fn, true);
  }

  async read<T>(fn: (q: Sql) => Promise<T>): Promise<T> {
    return this.tx('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', fn, false);
  }

  /** Runs `fn` between `begin` and COMMIT (ROLLBACK when it throws); a writer first waits for the write lock. */
  private async tx<T>(begin: string, fn: (q: Sql) => Promise<T>, writer: boolean): Promise<T> {
    await this.query(begin);
    try {
      if (writer) await this.query('SELECT pg_advisory_xact_lock($1)', [WRITE_LOCK]);
      const v = await fn(this.sql);
      await this.query('COMMIT');
      return v;
    } catch (err) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  async insertMany(q: Sql, table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    const per = Math.max(1, Math.floor(30000 / columns.length));
    for (let i = 0; i < rows.length; i += per) {
      const part = rows.slice(i, i + per);
      const values = part.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ');
      await q.run(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values}`, part.flat());
    }
  }

  /** The tables of the connection's schema, with the shapes of ours. */
  async shapes(): Promise<{ tables: string[]; shapes: Map<string, TableShape> }> {
    const tables = (await this.query("SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")).rows.map((r) => r.t as string);
    const cols = await this.query("SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND table_name IN ('yacobot', 'partner_domain')");
    const pks = await this.query(
      `SELECT tc.table_name AS t, k.column_name AS c FROM information_schema.table_constraints tc
         JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema
        WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = current_schema()`,
    );
    const shapes = new Map<string, TableShape>();
    for (const r of cols.rows) {
      const t = r.t as string;
      if (!shapes.has(t)) shapes.set(t, { columns: new Set(), pk: [] });
      shapes.get(t)!.columns.add(r.c as string);
    }
    for (const r of pks.rows) shapes.get(r.t as string)?.pk.push(r.c as string);
    return { tables, shapes };
  }
}

/** checkedLoad's error for a Yacobot row whose id is out of range. */
function checkedLoadError(r: Row, file: string): unknown {
  try {
    checkedLoad({ id: BigInt(r.id as string), name: r.name as string, weight: 1, active: 1, domains: 0n }, file);
  } catch (err) {
    return err;
  }
  return new Error('unreachable');
}

/** "host:port" of a connection's configuration, as messages name the server. */
function whereOf(c: Pg.Client): string {
  const host = c.host || 'localhost';
  return `${host.startsWith('/') ? `socket ${host}` : host}:${c.port}`;
}

/**
 * An error of node-postgres as a DataError naming the database (its URI without the
 * password) and the server: DB_BUSY for a lock wait past --lock-timeout, DB for the rest.
 */
export function pgError(err: unknown, name: string, where: string): unknown {
  if (err instanceof DataError) return err;
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  const text = String(e?.message ?? err);
  const net = /^E[A-Z]+$/.test(code) || /connect|terminat|timeout|closed|ended/i.test(text);
  const what =
    code === '55P03'
      ? `${text} (another process held the lock longer than --lock-timeout)`
      : code === '57014'
        ? `${text} (past --statement-timeout?)`
        : net && !/^[0-9A-Z]{5}$/.test(code)
          ? `cannot reach PostgreSQL at ${where}: ${text}${code && !text.includes(code) ? ` (${code})` : ''}`
          : `${code ? `${code}: ` : ''}${text}`;
  return new DataError(code === '55P03' ? 'DB_BUSY' : 'DB', `database error: ${what}`, { file: name });
}

/** Connects to `uri` with the time-outs; PG* variables and ~/.pgpass fill in what it leaves out (node-postgres does). */
async function connect(uri: string, opts: OpenOptions): Promise<PgStore> {
  const t = opts.timeouts ?? DEFAULT_TIMEOUTS;
  const name = redactDb(uri);
  let client: Pg.Client;
  try {
    client = newClient(uri, t, opts.readonly ?? false);
  } catch (err) {
    // The driver's own parser: its message never quotes the URI.
    throw new DataError('BAD_DB_URI', `not a PostgreSQL URI node-postgres can read: ${String((err as Error)?.message ?? err)}`, { file: name });
  }
  const where = whereOf(client);
  client.on('error', () => undefined); // until the store listens
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw pgError(err, name, where);
  }
  return new PgStore(client, name, where);
}

/** A client for `uri` with the time-outs (read-only transactions for a reader), its int8 values as numbers when exact. */
function newClient(uri: string, t: Timeouts, readonly: boolean): Pg.Client {
  return new pg.Client({
    options: readonly ? '-c default_transaction_read_only=on' : undefined,
    connectionString: uri,
    connectionTimeoutMillis: t.connectMs,
    statement_timeout: t.statementMs,
    lock_timeout: t.lockMs,
    application_name: 'master-server',
    types: { getTypeParser: ((oid: number, format?: string) => (oid === 20 ? int8 : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser },
  });
}

/** Opens an existing PostgreSQL partner database, schema checked as SQLite's is. */
export async function openPgStore(uri: string, opts: OpenOptions = {}): Promise<PartnerStore> {
  const store = await connect(uri, opts);
  try {
    checkShapes((await store.shapes()).shapes, store.name);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** Creates the tables where missing (in one transaction, under the write lock); refuses a schema holding other tables. */
export async function initPgStore(uri: string, opts: OpenOptions = {}): Promise<{ store: PartnerStore; created: boolean }> {
  const store = await connect(uri, opts);
  try {
    const created = await store.write(async (q) => {
      const { tables, shapes } = await store.shapes();
      const foreign = foreignTables(tables, store.name);
      if (foreign) throw foreign;
      checkShapes(shapes, store.name, { missingTables: true });
      for (const stmt of SCHEMA_SQL.split(';').filter((x) => x.trim())) await q.run(stmt);
      checkShapes((await store.shapes()).shapes, store.name);
      return !(shapes.has('yacobot') && shapes.has('partner_domain'));
    });
    return { store, created };
  } catch (err) {
    await store.close();
    throw err;
  }
}
