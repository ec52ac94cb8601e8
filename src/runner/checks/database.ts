// Before the chain: the partner database answers within its time-outs, is of this
// schema version, has Yacobots and one active, and on a state with committed runs is
// the one those runs used (never an empty one, never advice to create one).
import * as fs from 'node:fs';
import { DataError, shellQuote } from '../../core/errors.js';
import { openStore } from '../../core/store/open.js';
import { SCHEMA_VERSION } from '../../core/store/schema.js';
import { type PartnerStore, redactDb } from '../../core/store/store.js';
import { noActive } from '../../core/store/yacobots.js';
import type { RunnerOptions } from '../options/types.js';
import { stateLayout } from '../state/layout.js';
import { statQuiet } from '../../core/durable.js';
import { BACKUPS } from './memory.js';
import { committedRuns } from '../state/run-history.js';
import { everCommitted } from '../state/settings.js';

/** What the database check found: its line for `check`, and the ids of the active Yacobots. */
export interface DatabaseFound {
  ok: string;
  active: number[];
}

/** The options the database check reads. */
export type DatabaseCheckOptions = Pick<RunnerOptions, 'state' | 'db' | 'dbTimeouts' | 'resetCurrentLog'>;

/**
 * Opens the partner database read-only (bounded by its time-outs), and throws a
 * DataError when it cannot serve a run: missing, not a partner database, another schema
 * version, no Yacobot or none active; on a state with committed runs (`past`: runs.jsonl's
 * lines) a missing or empty one is "wrong --db?", never advice to create one.
 */
export async function checkDatabase(o: DatabaseCheckOptions, past: readonly unknown[]): Promise<DatabaseFound> {
  const used = lastRunOf(o.state, past);
  let store: PartnerStore;
  try {
    store = await openStore(o.db, { readonly: true, timeouts: o.dbTimeouts });
  } catch (err) {
    const missing = used === null ? null : missingWhy(err);
    if (missing !== null) throw wrongDb(o, used!, missing, 'a new, empty one would give every domain those runs routed a new owner');
    throw err;
  }
  try {
    const loads = await store.yacobotLoads();
    const domains = loads.reduce((n, y) => n + y.domains, 0);
    if (used !== null && (loads.length === 0 || (domains === 0 && memoryHolds(o.state) && !o.resetCurrentLog))) {
      const what = loads.length === 0 ? 'it has no Yacobot and no domain' : 'its owner table is empty';
      throw wrongDb(o, used, what, 'a run on it would give every domain those runs routed a new owner');
    }
    if (loads.length === 0)
      throw new DataError('NO_YACOBOT', `no Yacobot; add one with: partner-db --db ${shellQuote(store.name)} add NAME`, { file: store.name });
    const active = loads.filter((y) => y.active).map((y) => y.id);
    if (active.length === 0) throw noActive(store.name, '', shellQuote(store.name));
    return { ok: `${store.name}: schema version ${SCHEMA_VERSION}, ${loads.length} Yacobot(s), ${active.length} active, ${domains} domain(s)`, active };
  } finally {
    await store.close();
  }
}

/** The last run committed in `state` ('a run' when only settings.json tells), or null when none was. */
function lastRunOf(state: string, past: readonly unknown[]): string | null {
  const last = committedRuns(past).at(-1);
  if (last !== undefined) return `run ${last}`;
  return everCommitted(state, past) ? 'a run' : null;
}

/** Why `err` says the database is not there (missing, or without the partner tables), or null for any other error. */
function missingWhy(err: unknown): string | null {
  if (!(err instanceof DataError)) return null;
  if (err.code === 'NO_DB' && /does not exist/.test(err.message)) return 'it does not exist';
  if (err.code === 'BAD_SCHEMA' && /missing table/.test(err.message)) return 'it holds no partner tables';
  return null;
}

/** Whether STATE/current_log holds URLs (sent ones, whose domains have owners). */
function memoryHolds(state: string): boolean {
  return (statQuiet(stateLayout(state).currentLog, fs.statSync)?.size ?? 0n) > 0n;
}

/** The "wrong --db?" refusal: `state` has committed runs (the last: `used`), and the database named is not theirs (`what`). */
function wrongDb(o: DatabaseCheckOptions, used: string, what: string, stakes: string): DataError {
  const empty = what === 'its owner table is empty';
  return new DataError(
    'NO_DB',
    `wrong --db? the state ${o.state} has committed runs (the last: ${used}), but ${what}: ${stakes}. ` +
      `Give the --db those runs used (the cron's --config?), or restore that database from a backup (${BACKUPS}); nothing was run` +
      (empty ? '; to go on with this database all the same, run once with --reset-current-log (config key reset-current-log = yes)' : ''),
    { file: redactDb(o.db) },
  );
}
