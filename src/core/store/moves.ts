// Domains moved to another Yacobot while a run routes them. `partner-db assign` and
// `import` count each transaction that moves a domain in partner_meta; upload-domains
// reads the count before it routes and after: only when it changed does it read its
// domains' owners again, and it warns for those that moved, as it does for a Yacobot
// disabled mid-run (the hour's records of such a domain went to the owner it had when
// looked up: a domain is not split within a run).
import type { PartnerStore, Sql } from './store.js';

const KEY = 'domains_moved';

/** Inside a write transaction that moved domains: counts one more such transaction. */
export async function countMove(q: Sql): Promise<void> {
  await q.run(
    `INSERT INTO partner_meta (key, value) VALUES ('${KEY}', '1') ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(partner_meta.value AS INTEGER) + 1 AS TEXT)`,
  );
}

/** The number of transactions that moved domains so far ('0' when none did). */
export async function movesSoFar(store: PartnerStore): Promise<string> {
  const row = await store.read((q) => q.get(`SELECT value FROM partner_meta WHERE key = '${KEY}'`));
  return String(row?.value ?? '0');
}

/** One domain a run routed: its name, the owner it routed to, the records it sent there. */
export interface Routed {
  name: string;
  owner: number;
  records: number;
}

/** Of `routed`, those whose owner the database gives now is another, and their records; read in batches of `batch`. */
export async function movedSince(store: PartnerStore, routed: readonly Routed[], batch = 5000): Promise<{ domains: number; records: number; to: Set<number> }> {
  const out = { domains: 0, records: 0, to: new Set<number>() };
  for (let i = 0; i < routed.length; i += batch) {
    const part = routed.slice(i, i + batch);
    const { found, error } = await store.ownersOf(part.map((r) => r.name));
    if (error) throw error;
    for (const r of part) {
      const now = found.get(r.name);
      if (now === undefined || Number(now) === r.owner) continue;
      out.domains++;
      out.records += r.records;
      out.to.add(Number(now));
    }
  }
  return out;
}
