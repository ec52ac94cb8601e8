// The partner store: the one interface through which stages and partner-db reach the
// partner database, whichever backend holds it (a SQLite file, or PostgreSQL for
// several masters). Backends: sqlite.ts and pg.ts, opened by open.ts.
import { DataError, UsageError, clipText } from '../errors.js';
import { parseCount, parseDecimal } from '../numbers.js';
import { redactSecrets } from '../secrets.js';
import type { Chooser, NewDomains } from './assign.js';
import type { MigrateResult } from './schema.js';
import type { MissingOwner, Yacobot, YacobotLoad } from './yacobots.js';

/** A row as a query returns it: integers as numbers, text as strings. */
export type Row = Record<string, unknown>;

/**
 * Portable SQL inside one transaction: `?` placeholders, the subset of SQL both
 * SQLite and PostgreSQL read the same way.
 */
export interface Sql {
  all(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  get(sql: string, params?: readonly unknown[]): Promise<Row | undefined>;
  /** Runs a statement; returns how many rows it changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
}

/** What one batched lookup found: each domain's owner as stored, and the error that stopped it (the domains after it unanswered). */
export interface OwnerLookup {
  found: Map<string, unknown>;
  error: unknown;
}

/** What the assignment of a run's new domains decided (each one's owner went to NewDomains.owner). */
export interface CommitResult {
  assignedByUs: number;
  lostRace: number;
}

/**
 * Time limits of a PostgreSQL connection, in milliseconds (0: none); SQLite waits by its
 * busy timeout. answerMs bounds each round trip (a server that stopped answering),
 * statementMs one statement on the server (a slow one), lockMs a wait for another writer.
 */
export interface Timeouts {
  connectMs: number;
  answerMs: number;
  statementMs: number;
  lockMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 5000, answerMs: 20_000, statementMs: 15_000, lockMs: 60_000 };

/** The time-out options of a PostgreSQL --db: name, Timeouts field, what it bounds, what 0 means (their help). */
export const TIMEOUT_OPTIONS = [
  ['connect-timeout', 'connectMs', 'seconds to wait for a connection', 'no limit'],
  [
    'answer-timeout',
    'answerMs',
    'seconds to wait for the answer to any one request before taking the server as stopped or cut off',
    '--statement-timeout and a margin',
  ],
  ['statement-timeout', 'statementMs', 'seconds one statement may run on the server (at most --answer-timeout less a margin)', 'no limit'],
  ['lock-timeout', 'lockMs', "seconds to wait for a lock, another writer's among them", 'no limit'],
] as const;

/** A time-out option's name as commander keys it (answer-timeout: answerTimeout). */
export function camelOf(flag: string): string {
  return flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

export interface OpenOptions {
  /** The caller only reads. */
  readonly?: boolean;
  /** A database of schema version 1 opens too (for migrate, and copy's source, which reads only the contract's tables). */
  anyVersion?: boolean;
  timeouts?: Timeouts;
}

/** A row of the domain table, as dumped: already checked to fit a domain_map line. */
export type DomainRow = [domain: string, yacobotId: number];

export interface PartnerStore {
  /** The database as messages name it: the file, or the URI without its password. */
  readonly name: string;
  readonly kind: 'sqlite' | 'postgresql';
  close(): Promise<void>;
  /** Every Yacobot with its domain count, by id (ids and weights checked, as sqlite-db.ts's yacobotLoads). */
  yacobotLoads(): Promise<YacobotLoad[]>;
  /** The owner ids of partner_domain that name no Yacobot. */
  missingOwners(): Promise<MissingOwner[]>;
  /** A Yacobot by id (all digits) or name; a DataError if there is none. */
  findYacobot(ref: string): Promise<Yacobot>;
  /** The ids of the active Yacobots. */
  activeIds(): Promise<Set<number>>;
  /** Whether a Yacobot with this id exists. */
  yacobotExists(id: bigint): Promise<boolean>;
  /** The owners of `domains` that have one (ids as stored: bigint when integers), in one batch. */
  ownersOf(domains: readonly string[]): Promise<OwnerLookup>;
  /** The added_at of a domain's row, or undefined, once every write transaction begun before has ended. */
  addedAtOf(domain: string): Promise<string | undefined>;
  /**
   * Every (domain, owner) row in bytewise domain order, from one snapshot: each row is
   * first given to `check` (which throws for a bad one) before any goes to `emit`.
   */
  dumpSorted(check: (domain: unknown, id: unknown) => void, emit: (row: DomainRow) => void | Promise<void>): Promise<void>;
  /**
   * Gives each of `fresh` that has no owner one chosen by `choose`, inserting it if
   * absent and reading back the winner (told to fresh.owner), in one serialized write
   * transaction, a batch at a time; `beforeCommit` runs inside it, just before COMMIT,
   * after a transaction that added domains recorded them under `token` (assign.ts's recordCommit).
   */
  assignNew(
    fresh: NewDomains,
    choose: Chooser,
    addedAt: string,
    beforeCommit?: (inserted: number, witness: string | null) => void,
    token?: string,
  ): Promise<CommitResult>;
  /** Inside a write transaction: the owners of those of `domains` that have one. */
  ownersIn(domains: readonly string[]): Promise<Map<string, number>>;
  /** Inside a write transaction: gives each domain its Yacobot, inserted with added_at `addedAt` or moved (its added_at kept), many per statement. */
  setOwners(rows: readonly (readonly [string, number])[], addedAt: string): Promise<void>;
  /** Brings a store opened with anyVersion to this program's schema version, in one write transaction (see sqlite-db.ts's migrateDb). */
  migrate(): Promise<MigrateResult>;
  /** Adds an active Yacobot numbered after the largest id; returns its id (a DataError past 2^53 - 1, nothing added). */
  addYacobot(name: string, weight: number): Promise<bigint>;
  /** Runs `fn` in one serialized write transaction (all or nothing). */
  write<T>(fn: (q: Sql) => Promise<T>): Promise<T>;
  /** Runs `fn` in one read snapshot. */
  read<T>(fn: (q: Sql) => Promise<T>): Promise<T>;
  /** Writes many rows in one statement per batch (copy): `rows` tuples for `table(columns)`. */
  insertMany(q: Sql, table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void>;
}

/** Whether `db` names a PostgreSQL database (a URI) rather than a SQLite file. */
export function isPgUri(db: string): boolean {
  return /^postgres(ql)?:\/\//i.test(db);
}

/** `db` as it may be shown: a URI without its password (a file path unchanged). */
export function redactDb(db: string): string {
  return redactSecrets(db);
}

/**
 * Finds a Yacobot by id (all digits) or by name; throws a DataError if there is none.
 * Names are never all digits (partner-db add refuses them), so the two cannot clash.
 */
export async function findYacobotIn(q: Sql, ref: string): Promise<Yacobot> {
  const byId = /^\d+$/.test(ref);
  const row = await q.get(`SELECT id, name, weight, active FROM yacobot WHERE ${byId ? 'id' : 'name'} = ?`, [byId ? parseCount(ref) : ref]);
  if (!row) throw new DataError('NO_YACOBOT', byId ? `no Yacobot with id ${ref}` : `no Yacobot named '${ref}'`);
  return { id: Number(row.id), name: row.name as string, weight: Number(row.weight), active: Number(row.active) !== 0 };
}

/** The time-outs of addDbOptions' options (cli/db-options.ts) as parsed; a UsageError names a bad one. */
export function timeoutsOf(raw: Record<string, unknown>): Timeouts {
  const ms = (flag: string, v: unknown, dflt: number): number => {
    if (v === undefined) return dflt;
    const n = parseDecimal(String(v));
    if (n === null || !(n >= 0 && n <= 86_400)) throw new UsageError(`${flag} wants seconds from 0 to 86400, got '${clipText(String(v))}'`);
    return Math.round(n * 1000);
  };
  const t = { ...DEFAULT_TIMEOUTS };
  for (const [flag, field] of TIMEOUT_OPTIONS) t[field] = ms(`--${flag}`, raw[camelOf(flag)], DEFAULT_TIMEOUTS[field]);
  return t;
}
