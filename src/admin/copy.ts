// partner-db copy: every Yacobot and domain of one partner database into another (a
// SQLite file and a PostgreSQL database either way), all or nothing.
import { checkDbName } from '../core/db-uri.js';
import { DataError, visibleName } from '../core/errors.js';
import { initStore, openStore } from '../core/store/open.js';
import type { PartnerStore, Row, Sql, Timeouts } from '../core/store/store.js';
import { NAME, say } from './messages.js';
import { Progress, countText, percentOf } from '../cli/progress.js';

/** Rows per batch when copy writes the domains. */
const COPY_BATCH = 10_000;

/**
 * copy: every Yacobot and domain of FROM into TO (made with init first), in one write
 * transaction on TO: all or nothing. A TO that holds rows is refused unless `force`,
 * which replaces them.
 */
export async function copyCommand(fromDb: string, toDb: string, force: boolean, timeouts: Timeouts): Promise<void> {
  // Both names before either is opened: a bad TO is refused before FROM is read.
  for (const db of [fromDb, toDb]) checkDbName(db);
  // A source of schema version 1 is read as it is: copy reads only the contract's tables.
  const from = await openStore(fromDb, { readonly: true, anyVersion: true, timeouts });
  try {
    const { store: to } = await initStore(toDb, { timeouts });
    try {
      // One snapshot of the source for its Yacobots and its domains: read in two, a
      // Yacobot added in between (a run or partner-db writing to it) made the copy fail
      // with a raw foreign-key error.
      let ys: Row[] = [];
      let domains = 0;
      await from.read(async (fq) => {
        ys = await fq.all('SELECT id, name, weight, active FROM yacobot ORDER BY id');
        const total = Number((await fq.get('SELECT COUNT(*) AS n FROM partner_domain'))!.n);
        const progress = new Progress({ log: null, plain: NAME }, () => ({
          fields: {},
          text: `copy: ${countText(domains)} of ${countText(total)} domains (${percentOf(domains, total)}%)`,
        })).start();
        try {
          await copyInto(to, fq, ys, force, (n) => {
            domains = n;
            progress.tick();
          });
        } catch (err) {
          throw copyError(err, from.name);
        } finally {
          progress.stop();
        }
      });
      say(`copied ${ys.length} Yacobot(s) and ${domains} domain(s) from ${visibleName(from.name)} to ${visibleName(to.name)}`);
    } finally {
      await to.close();
    }
  } finally {
    await from.close();
  }
}

/** A foreign-key failure of copy said as what it means; any other error as it is. */
function copyError(err: unknown, source: string): unknown {
  if (!/foreign key/i.test(String((err as Error)?.message ?? err))) return err;
  return new DataError(
    'COPY_ORPHANS',
    `the source holds domains owned by an id that names no Yacobot (partner-db stats counts them): nothing copied; give those domains to a Yacobot (assign) or remove them, then copy again`,
    { file: source },
  );
}

/** Writes `ys` and every domain the source snapshot `fq` holds into `to`, in one write transaction; `copied` is told the domains copied so far, after each batch. */
async function copyInto(to: PartnerStore, fq: Sql, ys: Row[], force: boolean, copied: (n: number) => void): Promise<void> {
  let domains = 0;
  await to.write(async (q) => {
    const held = await q.get('SELECT (SELECT COUNT(*) FROM yacobot) AS y, (SELECT COUNT(*) FROM partner_domain) AS d');
    if (!force && (Number(held!.y) > 0 || Number(held!.d) > 0)) {
      throw new DataError(
        'NOT_EMPTY',
        `the target holds ${Number(held!.y)} Yacobot(s) and ${Number(held!.d)} domain(s); nothing copied (--force replaces them)`,
        { file: to.name },
      );
    }
    await q.run('DELETE FROM partner_domain');
    await q.run('DELETE FROM yacobot');
    await to.insertMany(
      q,
      'yacobot',
      ['id', 'name', 'weight', 'active'],
      ys.map((y) => [y.id, y.name, y.weight, y.active]),
    );
    let batch: unknown[][] = [];
    const flush = async () => {
      await to.insertMany(q, 'partner_domain', ['domain', 'yacobot_id', 'added_at'], batch);
      domains += batch.length;
      batch = [];
      copied(domains);
    };
    let last = '';
    // Keyset pages: bounded memory on either backend.
    for (;;) {
      const page = await fq.all('SELECT domain, yacobot_id, added_at FROM partner_domain WHERE domain > ? ORDER BY domain LIMIT ?', [last, COPY_BATCH]);
      for (const r of page) batch.push([r.domain, r.yacobot_id, r.added_at]);
      if (batch.length > 0) await flush();
      if (page.length < COPY_BATCH) break;
      last = page[page.length - 1]!.domain as string;
    }
  });
}
