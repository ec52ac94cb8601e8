// domains-from-db: the partner database's domain -> Yacobot table as a domain_map.
import { pathOption, type StageDef } from '../cli/stage.js';
import { openStore } from '../core/store/open.js';
import { addDbOptions } from '../cli/db-options.js';
import { timeoutsOf, type Timeouts } from '../core/store/store.js';
import { DataError, clipText } from '../core/errors.js';
import { checkDomain } from '../core/records.js';

export interface DomainsFromDbOptions {
  db: string;
  timeouts: Timeouts;
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

--db is a SQLite file or a PostgreSQL URI (PG* variables and ~/.pgpass fill in
what it leaves out); on PostgreSQL the rows come in one snapshot, through a
cursor, ordered with collation "C" (bytewise).

Buffers: one row (the rows are streamed from the database; on PostgreSQL, 5000).`,
  options(cmd) {
    addDbOptions(cmd);
  },
  normalize: (raw) => ({ db: pathOption('--db', raw.db), timeouts: timeoutsOf(raw) }),
  async run(ctx, o) {
    // Read-only: it must not change the database, not even its journal mode.
    const store = await openStore(o.db, { readonly: true, timeouts: o.timeouts });
    ctx.onExit(() => void store.close().catch(() => undefined));
    const out = ctx.out;
    const perYacobot: Record<string, number> = {};
    let n = 0;
    ctx.reportCounts(() => ({ domains_out: n, per_yacobot: perYacobot }));
    // Every row is checked before the first line is written, in one read snapshot: a bad
    // row leaves no output at all, not a map cut off before it (a redirection already
    // flushed 64 KiB blocks of it).
    const check = (domain: unknown, id: unknown) => {
      const bad = badRow(domain, id);
      if (bad)
        throw new DataError('BAD_ROW', `partner_domain has a row no domain_map line can carry: ${bad} (edited by hand? fix or delete that row)`, {
          file: store.name,
        });
    };
    await store.dumpSorted(check, ([domain, y]) => {
      out.write(`${domain}\t${y}\n`);
      perYacobot[y] = (perYacobot[y] ?? 0) + 1;
      return ++n % 4096 === 0 ? out.flushIfFull() : undefined;
    });
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
