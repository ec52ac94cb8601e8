// domains-from-db: the partner database's domain -> Yacobot table as a domain_map.
import type { StageDef } from '../cli/stage.js';
import { dbError, openDb } from '../core/db.js';

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
the database is never created or changed here.

Buffers: one row (the rows are streamed from the database).`,
  options(cmd) {
    cmd.requiredOption('--db <file>', 'the partner database (SQLite; required)');
  },
  normalize: (raw) => ({ db: String(raw.db) }),
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
      const rows = db.prepare('SELECT domain, yacobot_id FROM partner_domain ORDER BY domain').raw().iterate() as IterableIterator<
        [string, number]
      >;
      for (const [domain, id] of rows) {
        out.write(`${domain}\t${id}\n`);
        perYacobot[id] = (perYacobot[id] ?? 0) + 1;
        if (++n % 4096 === 0) await out.flushIfFull();
      }
    } catch (err) {
      throw dbError(err, o.db);
    }
  },
};
