// The partner store on PostgreSQL (node-postgres): one database that several Master
// Servers share. Every write transaction first takes one advisory lock, so writers
// (upload-domains of any master, partner-db) run one at a time, as on SQLite.
import { createRequire } from 'node:module';
import type * as Pg from 'pg';
import { DataError, shellQuote } from '../errors.js';
import { assignInTx, type Chooser, type NewDomains } from './assign.js';
import { recordCommit } from './domain-commits.js';
import {
  OUR_TABLES,
  RECOUNT_SQL,
  checkShapes,
  checkVersion,
  claimUpgradeSql,
  foreignTables,
  schemaStanding,
  type MigrateResult,
  type SchemaFacts,
  type TableShape,
} from './schema.js';
import {
  DEFAULT_TIMEOUTS,
  findYacobotIn,
  redactDb,
  type CommitResult,
  type DomainRow,
  type OpenOptions,
  type OwnerLookup,
  type PartnerStore,
  type Row,
  type Sql,
  type Timeouts,
} from './store.js';
import { checkedLoad, missingOwnerError, newIdTooBig, noActive, type MissingOwner, type YacobotLoad } from './yacobots.js';
import { clientBounds, closeBounded, isConnectTimeout, isNoAnswer, noAnswerError, noConnectionError, seconds, takeLockByTries } from './pg-waits.js';
import { passwordFromFile } from './pgpass.js';
import { BASE_SQL, CLAIM_SQL, LOAD_SQL, LOAD_TRIGGERS } from './pg-schema.js';

const require = createRequire(import.meta.url);
const pg = require('pg') as typeof Pg;

/** The advisory lock key every write transaction takes (any constant; 'MSpd' in ASCII). */
const WRITE_LOCK = 0x4d537064;
/** Domains per statement in lookups and inserts. */
const BATCH = 5000;

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
    private readonly timeouts: Timeouts = DEFAULT_TIMEOUTS,
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
      // The connection's statement is still out there: it is good for nothing more.
      if (isNoAnswer(err)) throw (this.broken = noAnswerError(this.name, this.where, this.timeouts));
      throw pgError(err, this.name, this.where);
    }
  }

  async close(): Promise<void> {
    await closeBounded(this.client);
  }

  async yacobotLoads(): Promise<YacobotLoad[]> {
    const { rows } = await this.query(
      `SELECT y.id::text AS id, y.name, y.weight, y.active, COALESCE(l.domains, 0)::text AS domains
         FROM yacobot y LEFT JOIN partner_load l ON l.yacobot_id = y.id ORDER BY y.id`,
    );
    return rows.map((r) =>
      checkedLoad(
        { id: BigInt(r.id as string), name: r.name as string, weight: r.weight as number, active: r.active as number, domains: BigInt(r.domains as string) },
        this.name,
      ),
    );
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
      for (const [d, id] of await this.ownersIn(domains)) found.set(d, BigInt(id));
    } catch (err) {
      return { found, error: err };
    }
    return { found, error: null };
  }

  /** The owners of those of `domains` that have one, BATCH domains per statement. */
  async ownersIn(domains: readonly string[]): Promise<Map<string, number>> {
    const m = new Map<string, number>();
    for (let i = 0; i < domains.length; i += BATCH) {
      const { rows } = await this.query('SELECT domain, yacobot_id FROM partner_domain WHERE domain = ANY($1::text[])', [domains.slice(i, i + BATCH)]);
      for (const r of rows) m.set(r.domain as string, Number(r.yacobot_id));
    }
    return m;
  }

  /**
   * Read under the write lock: a write transaction whose client died while its COMMIT was
   * on its way still holds it, and the server decides it (commits or rolls back) first.
   */
  async addedAtOf(domain: string): Promise<string | undefined> {
    return this.tx('BEGIN', async (q) => (await q.get('SELECT added_at FROM partner_domain WHERE domain = ?', [domain]))?.added_at as string | undefined, true);
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

  async assignNew(
    fresh: NewDomains,
    choose: Chooser,
    addedAt: string,
    beforeCommit?: (inserted: number, witness: string | null) => void,
    token?: string,
  ): Promise<CommitResult> {
    const io = {
      lookup: (ds: readonly string[]) => this.ownersIn(ds),
      insert: async (rows: [string, number][]) => {
        await this.query(
          `INSERT INTO partner_domain (domain, yacobot_id, added_at)
           SELECT d, y, $3 FROM unnest($1::text[], $2::bigint[]) AS t(d, y) ON CONFLICT (domain) DO NOTHING`,
          [rows.map((r) => r[0]), rows.map((r) => r[1]), addedAt],
        );
      },
    };
    return this.write(async (q) => {
      const r = await assignInTx(await this.yacobotLoads(), fresh, choose, io, BATCH);
      if (r.noActive) throw noActive(this.name, 'at commit time (disabled during the run?)', shellQuote(this.name));
      if (token !== undefined && r.assignedByUs > 0) await recordCommit(q, token, r.assignedByUs);
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

  async setOwners(rows: readonly (readonly [string, number])[], addedAt: string): Promise<void> {
    for (let i = 0; i < rows.length; i += BATCH) {
      const part = rows.slice(i, i + BATCH);
      await this.query(
        `INSERT INTO partner_domain (domain, yacobot_id, added_at)
         SELECT d, y, $3 FROM unnest($1::text[], $2::bigint[]) AS t(d, y)
         ON CONFLICT (domain) DO UPDATE SET yacobot_id = EXCLUDED.yacobot_id`,
        [part.map((r) => r[0]), part.map((r) => r[1]), addedAt],
      );
    }
  }

  async migrate(): Promise<MigrateResult> {
    return this.write(async () => {
      const facts = await this.facts();
      checkShapes(facts.shapes, this.name);
      const found = schemaStanding(facts, LOAD_TRIGGERS, this.name).standing;
      if (found !== 'current') {
        // Disabled ones too: facts names only those that fire.
        const { rows } = await this.query("SELECT tgname FROM pg_trigger WHERE tgrelid = 'partner_domain'::regclass AND tgname = ANY($1::text[])", [
          LOAD_TRIGGERS,
        ]);
        for (const r of rows) await this.query(`DROP TRIGGER ${quoteIdent(r.tgname as string)} ON partner_domain`);
        await this.query(`DROP TABLE IF EXISTS partner_load; ${LOAD_SQL} ${CLAIM_SQL} ${claimUpgradeSql(facts)} ${RECOUNT_SQL}`);
        checkVersion(await this.facts(), LOAD_TRIGGERS, this.name);
      }
      const r = (await this.query('SELECT COALESCE(SUM(domains), 0)::text AS domains, COUNT(*)::int AS owners FROM partner_load WHERE domains <> 0')).rows[0]!;
      return { found, domains: Number(r.domains), owners: r.owners as number };
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
      if (writer) await this.takeWriteLock();
      const v = await fn(this.sql);
      await this.query('COMMIT');
      return v;
    } catch (err) {
      // Not on a connection whose statement got no answer: it would wait as long again.
      if (!this.broken) await this.client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /**
   * Takes the write lock for this transaction, by tries of one short round trip each, for
   * at most --lock-timeout (then DB_BUSY, as a lock wait past lock_timeout is).
   */
  private async takeWriteLock(): Promise<void> {
    const once = async () => (await this.query('SELECT pg_try_advisory_xact_lock($1) AS ok', [WRITE_LOCK])).rows[0]!.ok === true;
    await takeLockByTries(
      once,
      this.timeouts.lockMs,
      () =>
        new DataError(
          'DB_BUSY',
          `database error: the write lock was not free within ${seconds(this.timeouts.lockMs)} (another process held the lock longer than --lock-timeout)`,
          { file: this.name },
        ),
    );
  }

  async insertMany(q: Sql, table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    const per = Math.max(1, Math.floor(30000 / columns.length));
    for (let i = 0; i < rows.length; i += per) {
      const part = rows.slice(i, i + per);
      const values = part.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ');
      await q.run(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values}`, part.flat());
    }
  }

  /** What the connection's schema holds, for the schema checks. */
  async facts(): Promise<SchemaFacts> {
    const tables = (
      await this.query("SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")
    ).rows.map((r) => r.t as string);
    const cols = await this.query(
      'SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ANY($1::text[])',
      [OUR_TABLES],
    );
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
    const meta = shapes.get('partner_meta');
    const version =
      meta?.columns.has('key') && meta.columns.has('value')
        ? (await this.query("SELECT value FROM partner_meta WHERE key = 'schema_version'")).rows[0]?.value
        : undefined;
    // 'O' and 'A' fire in a session of any replication role; 'D' is disabled, 'R' fires only on a replica.
    const triggers = shapes.has('partner_domain')
      ? (await this.query("SELECT tgname FROM pg_trigger WHERE tgrelid = 'partner_domain'::regclass AND tgenabled IN ('O', 'A')")).rows.map(
          (r) => r.tgname as string,
        )
      : [];
    return { tables: new Set(tables), shapes, version: version === undefined || version === null ? null : String(version), triggers: new Set(triggers) };
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
        : /^57P0[123]$/.test(code)
          ? `${code}: ${text} (the server is shutting down or restarting: run again once it is back; a runner's run is not lost, the next invocation redoes it)`
          : net && !/^[0-9A-Z]{5}$/.test(code)
            ? `cannot reach PostgreSQL at ${where}: ${text}${code && !text.includes(code) ? ` (${code})` : ''}`
            : `${code ? `${code}: ` : ''}${text}`;
  return new DataError(code === '55P03' ? 'DB_BUSY' : 'DB', `database error: ${what}`, { file: name });
}

/** Connects to `uri` with the time-outs; PG* variables (node-postgres reads them) and the password file fill in what it leaves out. */
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
  givePasswordFile(client, name);
  client.on('error', () => undefined); // until the store listens
  try {
    await client.connect();
  } catch (err) {
    // Nothing to say goodbye to: a server that never finished the connection would not answer one.
    client.connection.stream.destroy();
    throw isConnectTimeout(err) ? noConnectionError(name, where, t) : pgError(err, name, where);
  }
  return new PgStore(client, name, where, t);
}

/** When neither the URI nor PGPASSWORD gives a password: the password file's, read by pgpass.ts (a missing one said as such). */
function givePasswordFile(client: Pg.Client, name: string): void {
  const c = client as unknown as { password: unknown; host: string; port: number; database: string; user: string };
  if (c.password !== null && c.password !== undefined && c.password !== '') return;
  const host = c.host.startsWith('/') ? 'localhost' : c.host; // a Unix socket, as libpq matches it
  c.password = passwordFromFile({ host, port: c.port, database: c.database, user: c.user }, name);
}

/** A client for `uri` with the time-outs (read-only transactions for a reader), its int8 values as numbers when exact. */
function newClient(uri: string, t: Timeouts, readonly: boolean): Pg.Client {
  return new pg.Client({
    options: readonly ? '-c default_transaction_read_only=on' : undefined,
    connectionString: uri,
    connectionTimeoutMillis: t.connectMs,
    ...clientBounds(t),
    application_name: 'master-server',
    types: {
      getTypeParser: ((oid: number, format?: string) => (oid === 20 ? int8 : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
    },
  });
}

/** Opens an existing PostgreSQL partner database, schema checked as SQLite's is (its version too, unless `anyVersion`). */
export async function openPgStore(uri: string, opts: OpenOptions = {}): Promise<PartnerStore> {
  const store = await connect(uri, opts);
  try {
    const facts = await store.facts();
    checkShapes(facts.shapes, store.name);
    if (!opts.anyVersion) checkVersion(facts, LOAD_TRIGGERS, store.name);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/**
 * Creates the tables of this schema version where missing (in one transaction, under the
 * write lock); refuses a schema holding other tables, and one of an older version (migrate's work).
 */
export async function initPgStore(uri: string, opts: OpenOptions = {}): Promise<{ store: PartnerStore; created: boolean }> {
  const store = await connect(uri, opts);
  try {
    const created = await store.write(async () => {
      const facts = await store.facts();
      const foreign = foreignTables(facts.tables, store.name);
      if (foreign) throw foreign;
      checkShapes(facts.shapes, store.name, { missingTables: true });
      const fresh = !facts.shapes.has('partner_domain');
      if (!fresh) checkVersion(facts, LOAD_TRIGGERS, store.name);
      await store.query(fresh ? BASE_SQL + LOAD_SQL + CLAIM_SQL + RECOUNT_SQL : BASE_SQL);
      const after = await store.facts();
      checkShapes(after.shapes, store.name);
      checkVersion(after, LOAD_TRIGGERS, store.name);
      return !(facts.shapes.has('yacobot') && facts.shapes.has('partner_domain'));
    });
    return { store, created };
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** `name` as a PostgreSQL identifier, quoted. */
function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
