// domains-from-db: the partner database's domain -> Yacobot table as a domain_map.
import { pathOption, type StageDef } from '../cli/stage.js';
import { checkYacobotIds, dbError, missingOwnerError, missingOwners, openDb } from '../core/db.js';
import { DataError, clipText } from '../core/errors.js';
import { checkDomain } from '../core/records.js';

export interface DomainsFromDbOptions {
  db: string;
}

export const domainsFromDb: StageDef<DomainsFromDbOptions> = {
  name: 'domains-from-db',
  readsInput: false,
  summary: 'Write the domain -> Yacobot table of the partner database (domain_map).',
  usage: `
Reads no input. Writes one line per row of partner_domain:

  domain  yacobot_id

sorted bytewise by domain (LC_ALL=C order), ready for upload-domains --map.
Every assigned domain is written, whichever Yacobot owns it.

A missing database is an error (create one with partner-db --db FILE init);
the database is never created or changed here. A row that no domain_map line
could carry (a NULL, upper-case or non-ASCII domain, one with a TAB or LF; a
yacobot_id that is not a positive integer up to 2^53 - 1, or names no Yacobot:
rows edited outside partner-db) is an error naming it, not a broken map line.

Buffers: one row (the rows are streamed from the database).`,
  options(cmd) {
    cmd.requiredOption('--db <file>', 'the partner database (SQLite; required)');
  },
  normalize: (raw) => ({ db: pathOption('--db', raw.db) }),
  async run(ctx, o) {
    // Read-only: it must not change the database, not even its journal mode.
    const db = openDb(o.db, { readonly: true });
    ctx.onExit(() => db.close());
    const out = ctx.out;
    const perYacobot: Record<string, number> = {};
    let n = 0;
    ctx.reportCounts(() => ({ domains_out: n, per_yacobot: perYacobot }));
    try {
      // SQLite orders TEXT with the BINARY collation: memcmp of the UTF-8 bytes, i.e. bytewise.
      // safeIntegers: an id past 2^53 - 1 read as a number would be named by another value.
      const select = db.prepare('SELECT domain, yacobot_id FROM partner_domain ORDER BY domain').raw().safeIntegers(true);
      const rows = () => select.iterate() as IterableIterator<[unknown, unknown]>;
      // Every row is checked before the first line is written, in one read snapshot:
      // a bad row leaves no output at all, not a map cut off before it (a redirection
      // already flushed 64 KiB blocks of it).
      db.exec('BEGIN');
      // As every command and stage does: an id past 2^53 - 1 is refused even with no domain.
      checkYacobotIds(db);
      for (const [domain, id] of rows()) {
        const bad = badRow(domain, id);
        if (bad) throw new DataError('BAD_ROW', `partner_domain has a row no domain_map line can carry: ${bad} (edited by hand? fix or delete that row)`, { file: o.db });
      }
      // A map line naming a Yacobot that does not exist would route its domain there.
      const missing = missingOwners(db);
      if (missing.length > 0) throw missingOwnerError(o.db, missing);
      for (const [domain, id] of rows()) {
        const y = Number(id as bigint);
        out.write(`${domain as string}\t${y}\n`);
        perYacobot[y] = (perYacobot[y] ?? 0) + 1;
        if (++n % 4096 === 0) await out.flushIfFull();
      }
      db.exec('COMMIT');
    } catch (err) {
      throw dbError(err, o.db);
    }
  },
};

/** What is wrong with a partner_domain row for a domain_map line, or null. */
function badRow(domain: unknown, id: unknown): string | null {
  if (typeof domain !== 'string') return `domain ${domain === null ? 'NULL' : `of type ${typeof domain}`}`;
  const d = checkDomain(domain);
  if (d) return d;
  if (typeof id === 'bigint' && id > BigInt(Number.MAX_SAFE_INTEGER)) {
    return `domain ${domain} has yacobot_id ${id}, outside the ids this program handles (1 to ${Number.MAX_SAFE_INTEGER})`;
  }
  if (!(typeof id === 'bigint' && id > 0n)) return `domain ${domain} has yacobot_id '${clipText(String(id))}', not a positive integer`;
  return null;
}
