// Which backend a --db names, decided before anything is opened: a URI-like string, or
// one that looks like a libpq connection string (`host=... dbname=...`) or holds a
// password, is never taken for a SQLite file (whose messages would show it whole and
// suggest to `init` a file of that name, the password in its name). A PostgreSQL URI
// with a problem is refused with a message that names the problem and never quotes the password.
import { DataError } from './errors.js';
import { redactSecrets, secretsIn } from './secrets.js';

/** The URI form a PostgreSQL database is named by, as messages show it. */
export const URI_FORM = 'postgresql://USER@HOST:PORT/DBNAME';

/** Whether `db` is meant as a URI (`scheme://...`, or a scheme starting with postgres) rather than a SQLite file path. */
export function looksLikeUri(db: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(db) || /^postgres[a-z]*:/i.test(db);
}

/** What is wrong with the URI-like `db` as a PostgreSQL URI, in words that quote no part of its user information; null when nothing is. */
export function pgUriProblem(db: string): string | null {
  const head = /^([a-z][a-z0-9+.-]*):(\/*)/i.exec(db);
  if (head === null) return 'not a URI';
  const [whole, scheme, slashes] = head as unknown as [string, string, string];
  if (!/^postgres(ql)?$/i.test(scheme)) return `unknown scheme '${scheme.slice(0, 20)}:': a PostgreSQL URI starts with postgres:// or postgresql://`;
  if (slashes !== '//') return `'${scheme}:' is followed by ${slashes.length} slash(es), not two: ${scheme}://HOST/DATABASE, with USER:PASSWORD@ before HOST`;
  const rest = db.slice(whole.length);
  if (/[\s\x00-\x1f\x7f]/.test(rest)) return 'a space or control character in the URI: percent-encode it (a space is %20)';
  if (rest.includes('#')) return "a '#' in the URI: one in the password must be written %23";
  const authEnd = rest.search(/[/?]/);
  if (authEnd >= 0 && rest.indexOf('@', authEnd) >= 0) {
    return "an '@' after the host part: a '/' or '?' in the user name or password must be percent-encoded (%2F, %3F), an '@' in a parameter as %40";
  }
  if (/%(?![0-9a-f]{2})/i.test(rest)) return "a '%' not followed by two hex digits: one in the password must be written %25";
  try {
    new URL(db);
  } catch {
    return "not a valid URI: characters such as ':', '[' or ']' in the user name or password must be percent-encoded";
  }
  return null;
}

/** A `keyword=` at the start or after a blank: what a libpq connection string is made of. */
const KEYWORD = /(?:^|\s)[a-z_][a-z0-9_]*\s*=/i;

/** Whether the non-URI `db` looks like a libpq key=value string, or holds a password: no SQLite file path. */
export function looksLikeConninfo(db: string): boolean {
  return !looksLikeUri(db) && (KEYWORD.test(db) || secretsIn(db).length > 0);
}

/**
 * The URI that a libpq key=value string names, without its password: host, port,
 * dbname and user as given, the rest of URI_FORM's words where one is missing.
 */
export function uriFormOf(conninfo: string): string {
  const v = new Map<string, string>();
  for (const m of conninfo.matchAll(/([a-z_][a-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)/gi)) {
    const raw = m[2]!;
    v.set(m[1]!.toLowerCase(), raw.startsWith("'") ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw);
  }
  const part = (k: string, dflt: string) => (v.get(k) ? encodeURIComponent(v.get(k)!) : dflt);
  const port = v.get('port') ? `:${part('port', '')}` : '';
  return `postgresql://${part('user', 'USER')}@${part('host', 'HOST')}${port}/${part('dbname', 'DBNAME')}`;
}

/**
 * What is wrong with `db` as a --db (a SQLite file path or a PostgreSQL URI), as the
 * end of a sentence about it; null when nothing is. Never quotes a password.
 */
export function dbNameProblem(db: string): string | null {
  if (looksLikeUri(db)) {
    const p = pgUriProblem(db);
    return p === null ? null : `not a PostgreSQL URI: ${p}`;
  }
  if (!looksLikeConninfo(db)) return null;
  return (
    `neither a SQLite file path nor a PostgreSQL URI (key=value pairs, as a libpq connection string has, or a password): ` +
    `name a PostgreSQL database by its URI, ${URI_FORM} (here ${uriFormOf(db)}), with the password in ~/.pgpass or PGPASSWORD ` +
    `(a SQLite file whose name begins with 'word=' is given as ./NAME)`
  );
}

/** Refuses a `db` that is neither a SQLite file path nor a PostgreSQL URI (DataError BAD_DB_URI, `db` shown redacted); anything else passes. */
export function checkDbName(db: string): void {
  const problem = dbNameProblem(db);
  if (problem !== null) throw new DataError('BAD_DB_URI', problem, { file: redactSecrets(db) });
}
