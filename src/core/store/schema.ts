// The partner database's schema rules, for both backends: the contract's tables and
// their columns and keys, the schema version and how a database stands against it
// (init, migrate and every open check it), and the hints that name the command to run.
import { DataError, clipText, shellQuote } from '../errors.js';

/** The schema version this program reads, and `partner-db init` creates. */
export const SCHEMA_VERSION = 4;

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
/** The tables versions 2 (partner_load, partner_meta), 3 (hour_claim) and 4 (master_state, domain_commit, hour_claim.state_id) add, with their columns. */
const DERIVED_COLUMNS: Record<string, string[]> = {
  partner_load: ['yacobot_id', 'domains'],
  partner_meta: ['key', 'value'],
  hour_claim: ['run', 'digest', 'master', 'run_id', 'claimed_at', 'published_at', 'state_id'],
  master_state: ['state_id', 'token', 'master', 'place', 'seen_at'],
  domain_commit: ['token', 'domains', 'committed_at'],
};
/** Each table's PRIMARY KEY: a domain has one row (upload-domains' upsert relies on it), an hour's reflog one claim. */
const PRIMARY_KEYS: Record<string, readonly string[]> = {
  yacobot: ['id'],
  partner_domain: ['domain'],
  partner_load: ['yacobot_id'],
  partner_meta: ['key'],
  hour_claim: ['run', 'digest'],
  master_state: ['state_id'],
  domain_commit: ['token'],
};

/**
 * What versions 3 and 4 add. hour_claim: one row per hour (run name) and reflog (its
 * SHA-256): the master that claimed it to publish it (its name, and the identity of its
 * state: NULL in a claim made before version 4), that master's run id, when, and when it
 * was published (NULL while only claimed). master_state: one row per state identity, the
 * token of its current incarnation (a copy of the state that presents an older one is
 * fenced), and the master name and place that last presented it. domain_commit: one row
 * per upload-domains transaction that added domains, under the token it logged before
 * its COMMIT, with how many. `collate` is the run column's collation clause (bytewise
 * order on both backends).
 */
export function claimTableSql(collate: string): string {
  return `
CREATE TABLE IF NOT EXISTS hour_claim (
  run TEXT${collate} NOT NULL,
  digest TEXT NOT NULL,
  master TEXT NOT NULL,
  run_id TEXT NOT NULL,
  claimed_at TEXT NOT NULL,
  published_at TEXT,
  state_id TEXT,
  PRIMARY KEY (run, digest)
);
CREATE TABLE IF NOT EXISTS master_state (
  state_id TEXT PRIMARY KEY,
  token TEXT NOT NULL,
  master TEXT NOT NULL,
  place TEXT NOT NULL,
  seen_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS domain_commit (
  token TEXT PRIMARY KEY,
  domains INTEGER NOT NULL,
  committed_at TEXT NOT NULL
);
`;
}

/** The statement that gives a version 3 hour_claim (as `facts` found it) its state_id column, or ''. */
export function claimUpgradeSql(facts: SchemaFacts): string {
  const claims = facts.shapes.get('hour_claim');
  return claims !== undefined && !claims.columns.has('state_id') ? 'ALTER TABLE hour_claim ADD COLUMN state_id TEXT;' : '';
}

/** The hint every "no database" message carries. */
export function initHint(file: string): string {
  return `create one with: partner-db --db ${shellQuote(file)} init`;
}

/** What a migration did: the schema it found, and what partner_load counts now. */
export interface MigrateResult {
  /** 'current': nothing to do; 'version1' to 'version3': upgraded; 'incomplete': this version with a part missing, restored. */
  found: SchemaStanding;
  /** The number of domains partner_load counts, and of yacobot_id values it counts them under. */
  domains: number;
  owners: number;
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
  const pk = PRIMARY_KEYS[table]!;
  if (shape.pk.length !== pk.length || !pk.every((c) => shape.pk.includes(c)))
    return `the PRIMARY KEY of '${table}' is not (${pk.join(', ')})${pk.length === 1 ? ' alone' : ''}`;
  return null;
}

/** How a database with the contract's tables stands against this program's schema version. */
export type SchemaStanding = 'current' | 'version1' | 'version2' | 'version3' | 'incomplete';

/**
 * Where `facts` stand (with `what`, the first part of this version missing when
 * incomplete); a DataError for a version this program does not know.
 */
export function schemaStanding(facts: SchemaFacts, triggers: readonly string[], file: string): { standing: SchemaStanding; what?: string } {
  if (facts.version === null) return { standing: 'version1' };
  if (facts.version === '2') return { standing: 'version2' };
  if (facts.version === '3') return { standing: 'version3' };
  if (facts.version !== String(SCHEMA_VERSION)) {
    throw new DataError(
      'BAD_SCHEMA',
      `schema version '${clipText(facts.version)}', which this program does not know (it reads version ${SCHEMA_VERSION}): made by a newer release?`,
      { file },
    );
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
 * Throws unless `facts` are of this schema version, whole: an older version and this
 * one with a part missing name the command that mends them (never done behind the
 * operator's back, as migrate rewrites a table).
 */
export function checkVersion(facts: SchemaFacts, triggers: readonly string[], file: string): void {
  const { standing, what } = schemaStanding(facts, triggers, file);
  const adds: Partial<Record<SchemaStanding, string>> = {
    version1: "keeps each Yacobot's domain count in partner_load and the masters' claims of hours in hour_claim, fenced by each state's identity",
    version2: "records the masters' claims of hours in hour_claim, fenced by each state's identity",
    version3: "fences the claims of hours by each state's identity (master_state) and records what each upload-domains commit added (domain_commit)",
  };
  const upgrade = adds[standing];
  if (upgrade !== undefined) {
    throw new DataError(
      'OLD_SCHEMA',
      `schema version ${standing.slice('version'.length)}: this program reads version ${SCHEMA_VERSION}, which ${upgrade}; upgrade it (one transaction) with: ${migrateHint(file)}`,
      { file },
    );
  }
  if (standing === 'incomplete') {
    throw new DataError('BAD_SCHEMA', `schema version ${SCHEMA_VERSION}, but ${what} (changed by hand?); restore it with: ${migrateHint(file)}`, { file });
  }
}

/** The error for a database that holds tables of another application (init refuses to add ours). */
export function foreignTables(tables: Iterable<string>, file: string): DataError | null {
  const foreign = [...tables].filter((t) => !OUR_TABLES.includes(t) && !t.startsWith('sqlite_'));
  if (foreign.length === 0) return null;
  return new DataError(
    'BAD_SCHEMA',
    `not a partner database: it holds other tables (${foreign.sort().join(', ')}); init only creates one or completes its own`,
    { file },
  );
}
