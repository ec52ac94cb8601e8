// The partner database's backends, for tests that run once on each: SQLite always,
// PostgreSQL when its binaries are here (a cluster for the test file, see pg.ts).
import { after, before } from 'node:test';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { FAST_SUITE, PgCluster, pgSkipReason } from './pg.js';

export interface Backend {
  readonly name: 'sqlite' | 'postgresql';
  /** The --db of a new database for a test working in `work` (not yet initialized). */
  newDb(work: string): string;
  /** The rows `sql` selects from `db`, each as its columns' text (NULL as ''). */
  rows(work: string, db: string, sql: string): string[][];
  /** Runs `sql`, which changes `db`. */
  exec(work: string, db: string, sql: string): void;
}

const sqlite: Backend = {
  name: 'sqlite',
  newDb: () => 'p.db',
  rows(work, db, sql) {
    const d = new Database(path.resolve(work, db), { readonly: true });
    try {
      return (d.prepare(sql).raw().all() as unknown[][]).map((r) => r.map((v) => (v === null ? '' : String(v))));
    } finally {
      d.close();
    }
  },
  exec(work, db, sql) {
    const d = new Database(path.resolve(work, db));
    try {
      d.exec(sql);
    } finally {
      d.close();
    }
  },
};

/** The PostgreSQL backend over a cluster that `cluster()` returns once it runs. */
function postgresql(cluster: () => PgCluster): Backend {
  return {
    name: 'postgresql',
    newDb: () => cluster().newDatabase(),
    rows(_work, db, sql) {
      const out = cluster().psql(PgCluster.dbName(db), sql).replace(/\n$/, '');
      return out === '' ? [] : out.split('\n').map((l) => l.split('|'));
    },
    exec(_work, db, sql) {
      cluster().psql(PgCluster.dbName(db), sql);
    },
  };
}

/**
 * The backends this test file runs its parametrized tests on. With PostgreSQL, its
 * cluster starts before the file's first test and is removed after its last; without,
 * SQLite alone (postgresql.test.ts says so; a failure under MASTER_SERVER_REQUIRE_PG=1).
 * The fast suite runs SQLite alone, except in the one file that asks `inFastSuite`.
 */
export function backends({ inFastSuite = false } = {}): Backend[] {
  if (pgSkipReason() !== null) return [sqlite]; // said once, by postgresql.test.ts
  if (FAST_SUITE && !inFastSuite) return [sqlite];
  let c: PgCluster | null = null;
  before(async () => {
    c = await PgCluster.start();
  });
  after(() => c?.remove());
  return [
    sqlite,
    postgresql(() => {
      if (!c) throw new Error('the PostgreSQL cluster did not start');
      return c;
    }),
  ];
}

/** Only the SQLite backend (for a test that needs no PostgreSQL variant). */
export const SQLITE = sqlite;
