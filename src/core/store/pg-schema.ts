// The partner database's tables, triggers and functions on PostgreSQL, as SQL text;
// the store that runs them is in pg.ts.
import { claimTableSql } from './schema.js';

/** The contract's tables for PostgreSQL (all of schema version 1); domains compare bytewise (collation "C"), as on SQLite. */
export const BASE_SQL = `
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

/** The triggers that keep partner_load, by name (each is created by LOAD_SQL). */
export const LOAD_TRIGGERS = ['partner_load_insert', 'partner_load_delete', 'partner_load_update', 'partner_load_truncate'];

/** The upsert that adds each yacobot_id's count in `source` (rows of yacobot_id, n) to partner_load, rows locked in id order. */
const addCounts = (source: string) => `INSERT INTO partner_load AS l (yacobot_id, domains)
    SELECT yacobot_id, SUM(n) FROM (${source}) c GROUP BY yacobot_id HAVING SUM(n) <> 0 ORDER BY yacobot_id
    ON CONFLICT (yacobot_id) DO UPDATE SET domains = l.domains + EXCLUDED.domains`;

/** A trigger function of partner_load that runs `body` and returns. */
const loadFunction = (name: string, body: string) => `CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  ${body};
  RETURN NULL;
END $$;`;

/**
 * What version 2 adds on PostgreSQL: partner_load and partner_meta as on SQLite, kept
 * by statement-level triggers that read the statement's rows from transition tables
 * and add one count per yacobot_id: a counter row is updated once per statement, not
 * once per domain (in one transaction each update of a row leaves a version that the
 * next one walks past).
 */
export const LOAD_SQL = `
CREATE TABLE IF NOT EXISTS partner_load (
  yacobot_id BIGINT PRIMARY KEY,
  domains BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS partner_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
${loadFunction('partner_load_insert', addCounts('SELECT yacobot_id, 1 AS n FROM new_rows'))}
${loadFunction('partner_load_delete', addCounts('SELECT yacobot_id, -1 AS n FROM old_rows'))}
${loadFunction('partner_load_update', addCounts('SELECT yacobot_id, 1 AS n FROM new_rows UNION ALL SELECT yacobot_id, -1 FROM old_rows'))}
${loadFunction('partner_load_truncate', 'DELETE FROM partner_load')}
CREATE TRIGGER partner_load_insert AFTER INSERT ON partner_domain
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_load_insert();
CREATE TRIGGER partner_load_delete AFTER DELETE ON partner_domain
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_load_delete();
CREATE TRIGGER partner_load_update AFTER UPDATE ON partner_domain
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION partner_load_update();
CREATE TRIGGER partner_load_truncate AFTER TRUNCATE ON partner_domain
  FOR EACH STATEMENT EXECUTE FUNCTION partner_load_truncate();
`;

/** The tables of versions 3 and 4 (hour_claim, master_state, domain_commit); run names compare bytewise (collation "C"), as on SQLite. */
export const CLAIM_SQL = claimTableSql(' COLLATE "C"');
