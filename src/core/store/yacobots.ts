// The rules on Yacobot rows that both backends apply: ids and weights this program
// handles, owners that do not exist, and the errors that say how to mend them.
import { DataError, clipText, shellQuote } from '../errors.js';

/** A Yacobot row. */
export interface Yacobot {
  id: number;
  name: string;
  weight: number;
  active: boolean;
}

/** A Yacobot with the number of domains it owns. */
export interface YacobotLoad extends Yacobot {
  domains: number;
}

/** The largest weight partner-db accepts; weights are relative, so this is no limit in practice. */
export const MAX_WEIGHT = 1_000_000;

/** A Yacobot id set by hand that a JavaScript number cannot hold (or not positive): read as one, it would become another id. */
export function badYacobotId(file: string, y: { id: bigint; name: string }): DataError {
  return new DataError(
    'BAD_YACOBOT_ID',
    `Yacobot '${clipText(y.name)}' has id ${y.id}, outside the ids this program handles (1 to ${Number.MAX_SAFE_INTEGER}); give it another`,
    { file },
  );
}

/**
 * A Yacobot row with its domain count as a YacobotLoad, or a DataError for an id no
 * stream can carry or a weight outside (0, MAX_WEIGHT] (both set by hand).
 */
export function checkedLoad(r: { id: bigint; name: string; weight: number | bigint; active: number | bigint; domains: bigint }, file: string): YacobotLoad {
  if (r.id > BigInt(Number.MAX_SAFE_INTEGER) || r.id < 1n) throw badYacobotId(file, r);
  const weight = Number(r.weight);
  // The schema's CHECK (weight > 0) lets Infinity through (9e999 typed into SQLite),
  // and a load of n / Infinity made every such Yacobot tie at 0.
  if (!(weight > 0 && weight <= MAX_WEIGHT)) {
    throw new DataError('BAD_WEIGHT', `Yacobot '${clipText(r.name)}' has weight ${weight}, outside 0 to ${MAX_WEIGHT} (set by hand?); fix that row`, { file });
  }
  return { id: Number(r.id), name: r.name, weight, active: Number(r.active) !== 0, domains: Number(r.domains) };
}

/** A yacobot_id of partner_domain that names no Yacobot: its rows' count and first domain. */
export interface MissingOwner {
  /** The value as SQLite holds it (an integer, exactly, or whatever else was written). */
  id: string;
  domains: number;
  first: string;
}

/**
 * The error for partner_domain rows that name Yacobots that do not exist: the first
 * such domain and its id, how many there are, and the partner-db command that gives
 * a domain to a Yacobot that does.
 */
export function missingOwnerError(file: string, missing: readonly MissingOwner[]): DataError {
  const m = missing[0]!;
  const rows = missing.reduce((n, x) => n + x.domains, 0);
  const also =
    rows > 1
      ? ` (${rows} domains name ${
          missing.length === 1
            ? 'it'
            : `${missing.length} such ids: ${missing
                .slice(0, 5)
                .map((x) => x.id)
                .join(', ')}${missing.length > 5 ? ', ...' : ''}`
        })`
      : '';
  return new DataError(
    'NO_SUCH_YACOBOT',
    `partner_domain gives ${m.first} to Yacobot ${m.id}, which does not exist${also} (written with foreign keys off?); ` +
      `give ${rows > 1 ? 'each such domain' : 'it'} to an existing Yacobot with: partner-db --db ${shellQuote(file)} assign ${shellQuote(m.first)} YACOBOT` +
      (rows > 1 ? ` (or all at once: partner-db --db ${shellQuote(file)} import FILE.csv)` : ''),
    { file },
  );
}

/** The error for a new Yacobot whose id no stream could carry (the largest id, set by hand, is that high). */
export function newIdTooBig(id: bigint, file: string): DataError | null {
  if (id <= BigInt(Number.MAX_SAFE_INTEGER)) return null;
  return new DataError(
    'BAD_YACOBOT_ID',
    `the new Yacobot would get id ${id}, beyond the ids this program handles (1 to ${Number.MAX_SAFE_INTEGER}): an id set by hand is that high; give that Yacobot another`,
    { file },
  );
}

/** The error when no Yacobot is active (`when` says at which point). */
export function noActive(name: string, when: string, shellDb: string): DataError {
  return new DataError('NO_ACTIVE_YACOBOT', `no active Yacobot${when ? ' ' + when : ''}; add one with: partner-db --db ${shellDb} add NAME (or enable one)`, {
    file: name,
  });
}
