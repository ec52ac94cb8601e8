// The table domain_commit: each assignNew transaction that added domains records its
// token there before its COMMIT, so that whether a stage that died during its COMMIT
// committed can be asked afterwards.
import type { PartnerStore, Sql } from './store.js';

/**
 * Inside assignNew's write transaction, just before its COMMIT: records that the
 * transaction upload-domains logged as `token` added `domains` domains (domain_commit),
 * so that the runner learns whether a stage that died during its COMMIT committed, by
 * its own token: the domains' added_at is the hour's now, which every master shares.
 */
export async function recordCommit(q: Sql, token: string, domains: number, nowMs = Date.now()): Promise<void> {
  await q.run('INSERT INTO domain_commit (token, domains, committed_at) VALUES (?, ?, ?)', [token, domains, new Date(nowMs).toISOString()]);
  // A row is asked about by the next invocation of the run that wrote it: one per hour that
  // added domains, kept for ever, would grow the table without end.
  await q.run('DELETE FROM domain_commit WHERE committed_at < ?', [new Date(nowMs - DOMAIN_COMMIT_KEEP_MS).toISOString()]);
}

/** How long a domain_commit row is kept after its COMMIT: far longer than any wait for the invocation that asks about it. */
export const DOMAIN_COMMIT_KEEP_MS = 90 * 86_400_000;

/**
 * How many domains the transaction logged as `token` added, or undefined when it did
 * not commit; asked in a write transaction, so once every one begun before has ended
 * (a COMMIT still on its way is decided first).
 */
export async function committedDomains(store: PartnerStore, token: string): Promise<number | undefined> {
  const row = await store.write((q) => q.get('SELECT domains FROM domain_commit WHERE token = ?', [token]));
  return row === undefined ? undefined : Number(row.domains);
}
