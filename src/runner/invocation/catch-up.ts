// Catch-up, before an invocation's runs: the hours other masters published on a shared
// database after this master's last committed run, which its current_log lacks.
import { DataError, formatPlace, visibleName } from '../../core/errors.js';
import { publishedByOthers } from '../../core/store/claims.js';
import { withStore } from '../../core/store/open.js';
import { isPgUri } from '../../core/store/store.js';
import type { ClaimOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { readIdentity } from '../state/identity.js';
import { committedRuns } from '../state/run-history.js';

/**
 * Catch-up: on a shared (PostgreSQL) database, warns of the hours other masters
 * published after this master's last committed run (`past`: runs.jsonl's lines) that
 * are not in this invocation's `runs`: this master's current_log lacks them. Nothing
 * when it cannot tell (no committed run, the database unreachable: the run says so).
 */
export async function warnMissedHours(o: ClaimOptions, say: Say, past: readonly unknown[], runs: readonly string[]): Promise<void> {
  if (!isPgUri(o.db)) return;
  const last = committedRuns(past).at(-1);
  if (last === undefined) return;
  let rows: { run: string; master: string }[];
  try {
    const state = readIdentity(o.state)?.id ?? '';
    rows = await withStore(o, (s) => publishedByOthers(s, { master: o.masterName, state }, last));
  } catch (err) {
    say.log?.warn({ error: err instanceof DataError ? formatPlace(err.place, err.message) : String(err) }, 'cannot read the claims of hours for catch-up');
    return;
  }
  const coming = new Set(runs);
  const missed = [...new Set(rows.filter((r) => !coming.has(r.run)).map((r) => r.run))];
  if (missed.length === 0) return;
  const masters = [...new Set(rows.filter((r) => !coming.has(r.run)).map((r) => r.master))].sort();
  const names = missed.length > 20 ? `${missed.slice(0, 20).join(', ')}, ...` : missed.join(', ');
  say.warn(
    `${missed.length} hour(s) that master ${masters.map(visibleName).join(', ')} published after this master's last run ${visibleName(last)} are not in its current_log: ${names}; ` +
      `to remember them (they are not published again), copy those reflogs from that master's done/ into this inbox (see the failover runbook in docs/two-masters.md)`,
    {
      fields: { missed: missed.length, runs: missed.slice(0, 100), masters, last_run: last },
      msg: "hours other masters published after this master's last run are not in its memory",
    },
  );
}
