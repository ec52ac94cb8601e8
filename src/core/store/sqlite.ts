// The partner store on a SQLite file (better-sqlite3): the embedded default.
import type BetterSqlite3 from 'better-sqlite3';
import { shellQuote } from '../errors.js';
import { assignInTx, type Chooser, type NewDomains } from './assign.js';
import { recordCommit } from './domain-commits.js';
import type { MigrateResult } from './schema.js';
import { checkYacobotIds, dbError, initDb, migrateDb, missingOwners, openDb, yacobotLoads, type Db } from './sqlite-db.js';
import { findYacobotIn, type CommitResult, type DomainRow, type OpenOptions, type OwnerLookup, type PartnerStore, type Row, type Sql } from './store.js';
import { missingOwnerError, newIdTooBig, noActive } from './yacobots.js';

type Statement = BetterSqlite3.Statement;

/** New domains per batch of assignNew: its lookups and rows held at once. */
const ASSIGN_BATCH = 10_000;

/**
 * Rows per statement where many are written: a statement per row that fires a
 * trigger writes its pages to a statement journal each time, and 1M rows took
 * several times as long.
 */
const ROWS_PER_STATEMENT = 500;

/** A SQLite partner store over one open connection. */
export class SqliteStore implements PartnerStore {
  readonly kind = 'sqlite';
  private readonly cache = new Map<string, Statement>();
  private readonly sql: Sql;
  private wal: boolean | null = null;
  private ownerLookup: Statement | null = null;

  constructor(
    readonly db: Db,
    readonly name: string,
  ) {
    const st = (s: string) => this.prepared(s);
    this.sql = {
      all: async (s, p = []) => st(s).all(...p) as Row[],
      get: async (s, p = []) => st(s).get(...p) as Row | undefined,
      run: async (s, p = []) => st(s).run(...p).changes,
    };
  }

  private prepared(sql: string): Statement {
    let s = this.cache.get(sql);
    if (!s) this.cache.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  /** Runs `fn`, a database error named after the file. */
  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw dbError(err, this.name);
    }
  }

  async close(): Promise<void> {
    this.db.close();
  }

  async yacobotLoads() {
    return this.guard(() => yacobotLoads(this.db));
  }

  async missingOwners() {
    return this.guard(() => missingOwners(this.db));
  }

  async findYacobot(ref: string) {
    try {
      return await findYacobotIn(this.sql, ref);
    } catch (err) {
      throw dbError(err, this.name);
    }
  }

  async activeIds(): Promise<Set<number>> {
    return this.guard(() => new Set(this.db.prepare('SELECT id FROM yacobot WHERE active = 1').pluck().all() as number[]));
  }

  async yacobotExists(id: bigint): Promise<boolean> {
    return this.guard(() => this.db.prepare('SELECT 1 FROM yacobot WHERE id = ?').get(id) !== undefined);
  }

  async ownersOf(domains: readonly string[]): Promise<OwnerLookup> {
    // safeIntegers: an id past 2^53 - 1 would be read as another one.
    const lookup = (this.ownerLookup ??= this.db.prepare('SELECT yacobot_id FROM partner_domain WHERE domain = ?').pluck().safeIntegers(true));
    const found = new Map<string, unknown>();
    try {
      // The lookups share one read transaction (WAL: writers go on; its snapshot may miss a
      // domain assigned since, which the commit re-reads anyway): alone, each lookup began
      // and ended its own, 2.5 us against 0.3 us. Not with a rollback journal (a WAL the
      // file system refused): there a reader's lock would hold every writer off until
      // the end of the input.
      this.wal ??= this.db.pragma('journal_mode', { simple: true }) === 'wal';
      if (this.wal && !this.db.inTransaction) this.db.exec('BEGIN');
      for (const d of domains) {
        const v = lookup.get(d);
        if (v !== undefined) found.set(d, v);
      }
    } catch (err) {
      return { found, error: dbError(err, this.name) };
    }
    return { found, error: null };
  }

  async addedAtOf(domain: string): Promise<string | undefined> {
    return this.guard(() => this.db.prepare('SELECT added_at FROM partner_domain WHERE domain = ?').pluck().get(domain) as string | undefined);
  }

  async dumpSorted(check: (domain: unknown, id: unknown) => void, emit: (row: DomainRow) => void | Promise<void>): Promise<void> {
    const db = this.db;
    try {
      // SQLite orders TEXT with the BINARY collation: memcmp of the UTF-8 bytes, i.e. bytewise.
      // safeIntegers: an id past 2^53 - 1 read as a number would be named by another value.
      const select = db.prepare('SELECT domain, yacobot_id FROM partner_domain ORDER BY domain').raw().safeIntegers(true);
      const rows = () => select.iterate() as IterableIterator<[unknown, unknown]>;
      db.exec('BEGIN');
      // As every command and stage does: an id past 2^53 - 1 is refused even with no domain.
      checkYacobotIds(db);
      for (const [domain, id] of rows()) check(domain, id);
      this.checkOwners();
      for (const [domain, id] of rows()) {
        const p = emit([domain as string, Number(id as bigint)]);
        if (p) await p;
      }
      db.exec('COMMIT');
    } catch (err) {
      throw dbError(err, this.name);
    }
  }

  /** Throws the missing-owner error when a row names no Yacobot. */
  private checkOwners(): void {
    const missing = missingOwners(this.db);
    if (missing.length > 0) throw missingOwnerError(this.name, missing);
  }

  async assignNew(
    fresh: NewDomains,
    choose: Chooser,
    addedAt: string,
    beforeCommit?: (inserted: number, witness: string | null) => void,
    token?: string,
  ): Promise<CommitResult> {
    const db = this.db;
    // The lookups' read transaction ends before the write transaction (nested, it would be a savepoint).
    this.guard(() => db.inTransaction && db.exec('COMMIT'));
    const io = {
      lookup: (ds: readonly string[]) => this.ownersIn(ds),
      insert: async (rows: [string, number][]) => {
        this.runRows('INSERT INTO partner_domain (domain, yacobot_id, added_at)', 'ON CONFLICT(domain) DO NOTHING', rows, ([d, id]) => [d, id, addedAt]);
      },
    };
    return this.write(async (q) => {
      const r = await assignInTx(yacobotLoads(db), fresh, choose, io, ASSIGN_BATCH);
      if (r.noActive) throw noActive(this.name, 'at commit time (disabled during the run?)', shellQuote(this.name));
      if (token !== undefined && r.assignedByUs > 0) await recordCommit(q, token, r.assignedByUs);
      beforeCommit?.(r.assignedByUs, r.witness);
      return { assignedByUs: r.assignedByUs, lostRace: r.lostRace };
    });
  }

  async ownersIn(domains: readonly string[]): Promise<Map<string, number>> {
    const lookup = this.prepared('SELECT yacobot_id FROM partner_domain WHERE domain = ?').pluck();
    const m = new Map<string, number>();
    for (const d of domains) {
      const v = lookup.get(d) as number | undefined;
      if (v !== undefined) m.set(d, v);
    }
    return m;
  }

  async setOwners(rows: readonly (readonly [string, number])[], addedAt: string): Promise<void> {
    const upsert = 'ON CONFLICT(domain) DO UPDATE SET yacobot_id = excluded.yacobot_id';
    this.runRows('INSERT INTO partner_domain (domain, yacobot_id, added_at)', upsert, rows, ([d, id]) => [d, id, addedAt]);
  }

  async migrate(): Promise<MigrateResult> {
    return this.guard(() => migrateDb(this.db, this.name));
  }

  async addYacobot(name: string, weight: number): Promise<bigint> {
    return this.write(async () => {
      const r = this.db.prepare('INSERT INTO yacobot (name, weight, active) VALUES (?, ?, 1)').safeIntegers(true).run(name, weight);
      const id = BigInt(r.lastInsertRowid);
      const bad = newIdTooBig(id, this.name);
      if (bad) throw bad;
      return id;
    });
  }

  async write<T>(fn: (q: Sql) => Promise<T>): Promise<T> {
    return this.tx('BEGIN IMMEDIATE', fn);
  }

  async read<T>(fn: (q: Sql) => Promise<T>): Promise<T> {
    // A snapshot of its own: the lookups' read transaction ends first (nested, BEGIN would fail).
    this.guard(() => this.db.inTransaction && this.db.exec('COMMIT'));
    return this.tx('BEGIN', fn);
  }

  /** Runs `fn` between `begin` and COMMIT on this connection (ROLLBACK when it throws); database errors named after the file. */
  private async tx<T>(begin: string, fn: (q: Sql) => Promise<T>): Promise<T> {
    const db = this.db;
    this.guard(() => db.exec(begin));
    try {
      const v = await fn(this.sql);
      this.guard(() => db.exec('COMMIT'));
      return v;
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw dbError(err, this.name);
    }
  }

  async insertMany(_q: Sql, table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    this.runRows(`INSERT INTO ${table} (${columns.join(', ')})`, '', rows, (r) => r);
  }

  /** Runs `head VALUES (?, ...), ... tail` over the `cells` of each of `rows` (all of one length), ROWS_PER_STATEMENT rows per statement. */
  private runRows<T>(head: string, tail: string, rows: readonly T[], cells: (row: T) => readonly unknown[]): void {
    for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
      const part = rows.slice(i, i + ROWS_PER_STATEMENT).map(cells);
      const sql = `${head} VALUES ${Array(part.length)
        .fill(`(${part[0]!.map(() => '?').join(', ')})`)
        .join(', ')} ${tail}`;
      // Only full batches are kept prepared: the last one's length varies from call to call.
      (part.length === ROWS_PER_STATEMENT ? this.prepared(sql) : this.db.prepare(sql)).run(...part.flat());
    }
  }
}

/** Opens an existing SQLite partner database (see sqlite-db.ts's openDb). */
export function openSqliteStore(file: string, opts: OpenOptions = {}): PartnerStore {
  return new SqliteStore(openDb(file, { readonly: opts.readonly, anyVersion: opts.anyVersion }), file);
}

/** Creates or completes a SQLite partner database (see sqlite-db.ts's initDb). */
export function initSqliteStore(file: string): { store: PartnerStore; created: boolean } {
  const { db, created } = initDb(file);
  return { store: new SqliteStore(db, file), created };
}
