// The password of a PostgreSQL connection whose URI and PGPASSWORD give none, as libpq
// finds it: the password file (PGPASSFILE, else ~/.pgpass). Read here, not by
// node-postgres, whose own reading prints a deprecation warning at every connection;
// and no password anywhere is said as such, not as node-postgres' "SASL:
// SCRAM-SERVER-FIRST-MESSAGE: client password must be a string".
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DataError } from '../errors.js';

/** What a password file line is matched against. */
export interface PgPassTarget {
  host: string;
  port: number;
  database: string;
  user: string;
}

/** The password file libpq reads: PGPASSFILE, else ~/.pgpass. */
export function pgpassFile(env: NodeJS.ProcessEnv = process.env): string {
  return env.PGPASSFILE || path.join(env.HOME || os.homedir(), '.pgpass');
}

/** The fields of one password file line (`\:` and `\\` unescaped), or null for a comment or a line without five fields. */
export function pgpassFields(line: string): string[] | null {
  if (line.startsWith('#')) return null;
  const fields: string[] = [];
  let cur = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && i + 1 < line.length) cur += line[++i];
    else if (c === ':' && fields.length < 4) {
      fields.push(cur);
      cur = '';
    } else cur += c;
  }
  fields.push(cur);
  return fields.length === 5 ? fields : null;
}

/**
 * The password for `t` in the text of a password file: the first line whose host,
 * port, database and user match (`*` matches anything), or undefined.
 */
export function pgpassLookup(text: string, t: PgPassTarget): string | undefined {
  const want = [t.host, String(t.port), t.database, t.user];
  for (const line of text.split(/\r?\n/)) {
    const f = pgpassFields(line);
    if (f !== null && want.every((w, i) => f[i] === '*' || f[i] === w)) return f[4];
  }
  return undefined;
}

/** The password file's text, or null when it is missing or not used (libpq ignores one that others may read, and says so on stderr). */
function readPgpass(file: string): string | null {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return null;
  }
  if (!st.isFile()) return null;
  if ((st.mode & 0o077) !== 0) {
    process.stderr.write(
      `${path.basename(process.argv[1] ?? 'node')}: warning: password file "${file}" has group or world access; permissions should be u=rw (0600) or less: not used\n`,
    );
    return null;
  }
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/**
 * The password function of a connection to `t` (node-postgres calls it when the server
 * asks for a password): the password file's, or a DataError naming the user and the
 * server, and where a password can be given, on the database `name`.
 */
export function passwordFromFile(t: PgPassTarget, name: string): () => Promise<string> {
  return async () => {
    const file = pgpassFile();
    const text = readPgpass(file);
    const pw = text === null ? undefined : pgpassLookup(text, t);
    if (pw !== undefined) return pw;
    throw new DataError(
      'DB_NO_PASSWORD',
      `database error: the server asks for a password for user "${t.user}" and none was given: put it in ${file} (mode 0600, a line "${t.host}:${t.port}:${t.database}:${t.user}:PASSWORD"), in PGPASSWORD, or in the URI (percent-encoded)`,
      { file: name },
    );
  };
}
