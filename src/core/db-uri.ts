// Which backend a --db names, decided before anything is opened: a URI-like string is
// never taken for a SQLite file (whose messages would show it whole, password and all,
// and suggest to `init` a file of that name). A PostgreSQL URI with a problem is
// refused with a message that names the problem and never quotes the password.
import { DataError } from './errors.js';
import { redactSecrets } from './secrets.js';

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

/** Refuses a URI-like `db` that is no PostgreSQL URI (DataError BAD_DB_URI, the URI shown redacted); anything else passes. */
export function checkDbName(db: string): void {
  const problem = looksLikeUri(db) ? pgUriProblem(db) : null;
  if (problem !== null) throw new DataError('BAD_DB_URI', `not a PostgreSQL URI: ${problem}`, { file: redactSecrets(db) });
}
