// Opening the partner store: the backend a --db value names, loaded only when used
// (a SQLite file, or a postgres:// URI).
import { checkDbName } from '../db-uri.js';
import { isPgUri, type OpenOptions, type PartnerStore, type Timeouts } from './store.js';

/** Opens an existing partner database, schema checked; a DataError says what is wrong (a URI-like name that is no PostgreSQL URI too). */
export async function openStore(db: string, opts: OpenOptions = {}): Promise<PartnerStore> {
  checkDbName(db);
  if (isPgUri(db)) return (await import('./pg.js')).openPgStore(db, opts);
  return (await import('./sqlite.js')).openSqliteStore(db, opts);
}

/** Creates the partner database's tables where missing (the file too, for SQLite); whether they were created now. */
export async function initStore(db: string, opts: OpenOptions = {}): Promise<{ store: PartnerStore; created: boolean }> {
  checkDbName(db);
  if (isPgUri(db)) return (await import('./pg.js')).initPgStore(db, opts);
  return (await import('./sqlite.js')).initSqliteStore(db);
}

/** Runs `fn` on the partner store, opened for it and closed after. */
export async function withStore<T>(o: { db: string; dbTimeouts?: Timeouts | undefined }, fn: (s: PartnerStore) => Promise<T>): Promise<T> {
  const store = await openStore(o.db, { timeouts: o.dbTimeouts });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}
