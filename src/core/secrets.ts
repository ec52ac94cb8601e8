// Secrets never leave the process: every message, record and file the programs write
// goes through redactSecrets, which masks credentials without parsing anything as a
// URI (a URI that fails to parse must not show its password either):
//   - the password of anything that looks like a URI with credentials
//     (`scheme://user:PASSWORD@host`, `postgresql:/user:PASSWORD@...`), up to the '@'
//     that ends the authority, or, in a URI a '/', '?' or '#' in the password cut
//     short, up to the first '@' after it;
//   - the value of every password-like parameter (`password=`, `sslpassword=`,
//     `PGPASSWORD=`, percent-encoded names such as `pass%77ord=`);
//   - every secret this process was given (the passwords and password-like values
//     found, as above, in its argv, its config file and MASTER_SERVER_DB), wherever it
//     appears, as given, percent-decoded and JSON-escaped.
import * as fs from 'node:fs';

/** The mask that stands for a secret. */
export const MASK = '***';
/** The environment variable through which the runner hands the database to its stages (never argv, which `ps` shows). */
export const DB_ENV = 'MASTER_SERVER_DB';
/** Shorter known secrets are masked only where they stand as a password: everywhere, they would garble messages. */
const MIN_LITERAL = 4;

/** Where a URI may begin: `scheme://`, or a scheme starting with postgres followed by at most one '/' (a typo of one). */
const SCHEME = /\b(?:[a-z][a-z0-9+.-]*:\/\/|postgres[a-z]*:\/?)/gi;
/** A `name=value` parameter (query string, libpq keyword list, environment); a ':', ',', '.', ';' or ')' that ends a sentence is not the value's. */
const PARAM = /(^|[?&;\s,(])([^\s=&?;#,()]+)=('[^']*'?|[^\s&#]*?)(?=[:,.;)]?(?:[\s&#]|$))/g;
/** A parameter name (percent-decoded) whose value is a password. */
const PASSWORD_NAME = /pass|pwd/i;

const known = new Set<string>();
let knownSorted: string[] = [];

/** `text` with every credential masked (see the module comment). */
export function redactSecrets(text: string): string {
  let out = text;
  for (const s of knownSorted) if (out.includes(s)) out = out.split(s).join(MASK);
  return maskParams(maskUriPasswords(out));
}

/** `v` with every string in it (values of objects and arrays, at any depth) redacted; other values as they are. */
export function redactDeep<T>(v: T): T {
  if (typeof v === 'string') return redactSecrets(v) as T;
  if (Array.isArray(v)) return v.map(redactDeep) as T;
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactDeep(x)])) as T;
  }
  return v;
}

/**
 * Text to write out, redacted: each line that holds a credential is masked, a JSON
 * line (a log record) value by value so that it stays one valid JSON record.
 */
export function redactOutput(text: string): string {
  if (redactSecrets(text) === text) return text;
  return text
    .split('\n')
    .map((line) => {
      const masked = redactSecrets(line);
      if (masked === line || !line.startsWith('{')) return masked;
      try {
        return JSON.stringify(redactDeep(JSON.parse(line)));
      } catch {
        return masked;
      }
    })
    .join('\n');
}

/** Remembers the secrets in `text` (see secretsIn): every later redaction masks them wherever they appear. */
export function rememberSecretsIn(text: string): void {
  let added = false;
  for (const s of secretsIn(text)) {
    for (const form of spellings(s)) {
      if (form.length < MIN_LITERAL || known.has(form)) continue;
      known.add(form);
      added = true;
    }
  }
  // Longest first: a secret that holds another is masked whole.
  if (added) knownSorted = [...known].sort((a, b) => b.length - a.length);
}

/**
 * The secrets `text` holds, found without parsing: of each URI-like part, what stands
 * between the ':' after the user name and each '@' after it; and the value of each
 * password-like parameter.
 */
export function secretsIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(SCHEME)) {
    const rest = text.slice(m.index + m[0].length);
    const colon = rest.search(/[:/?#\s]/);
    if (colon < 0 || rest[colon] !== ':') continue;
    for (let at = rest.indexOf('@', colon); at >= 0; at = rest.indexOf('@', at + 1)) out.push(rest.slice(colon + 1, at));
  }
  for (const m of text.matchAll(PARAM)) if (PASSWORD_NAME.test(decoded(m[2]!))) out.push(unquoted(m[3]!));
  return out.filter((s) => s !== '');
}

/** Wraps process.stderr (and process.stdout when `stdout`) so that everything written is redacted, and remembers the secrets of argv and MASTER_SERVER_DB. */
export function guardOutput(stdout: boolean): void {
  for (const a of process.argv) rememberSecretsIn(a);
  const fromEnv = process.env[DB_ENV];
  if (fromEnv) rememberSecretsIn(fromEnv);
  guardStream(process.stderr);
  if (stdout) guardStream(process.stdout);
}

/** Writes `text`, redacted, to the descriptor `fd` at once (for messages written after the streams are gone). */
export function writeRedactedSync(fd: number, text: string): void {
  fs.writeSync(fd, redactOutput(text));
}

/** Makes `stream.write` redact what it is given (text or UTF-8 bytes). */
function guardStream(stream: NodeJS.WriteStream): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  stream.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (typeof chunk === 'string') return write(redactOutput(chunk), ...rest);
    if (chunk instanceof Uint8Array) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      const masked = redactOutput(text);
      return write(masked === text ? chunk : Buffer.from(masked, 'utf8'), ...rest);
    }
    return write(chunk, ...rest);
  }) as typeof stream.write;
}

/** `text` with the password of each URI-like part masked: up to the authority's last '@', else (a '/', '?' or '#' in the password) the first '@' after it. */
function maskUriPasswords(text: string): string {
  let out = '';
  let from = 0;
  for (const m of text.matchAll(SCHEME)) {
    const start = m.index + m[0].length;
    if (start < from) continue;
    let end = text.slice(start).search(/\s/);
    end = end < 0 ? text.length : start + end;
    const token = text.slice(start, end);
    const authEnd = lengthUpTo(token, /[/?#]/);
    const colon = token.indexOf(':');
    if (colon < 0 || colon >= authEnd) continue;
    let at = token.lastIndexOf('@', authEnd - 1);
    if (at < colon) at = token.indexOf('@', authEnd);
    if (at < 0) continue;
    out += text.slice(from, start + colon + 1) + MASK;
    from = start + at;
  }
  return out + text.slice(from);
}

/** `text` with the value of every password-like parameter masked. */
function maskParams(text: string): string {
  return text.replace(PARAM, (all, lead: string, name: string, value: string) =>
    value !== '' && value !== MASK && PASSWORD_NAME.test(decoded(name)) ? `${lead}${name}=${MASK}` : all,
  );
}

/** The length of `s` up to the first match of `re`, or all of it. */
function lengthUpTo(s: string, re: RegExp): number {
  const i = s.search(re);
  return i < 0 ? s.length : i;
}

/** `s` percent-decoded where it can be (as given where it cannot). */
function decoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A libpq value without the single quotes around it. */
function unquoted(v: string): string {
  return v.length >= 2 && v.startsWith("'") && v.endsWith("'") ? v.slice(1, -1) : v;
}

/** The ways a secret may be written out: as given, percent-decoded, and each of those JSON-escaped. */
function spellings(s: string): string[] {
  const forms = new Set([s, decoded(s)]);
  for (const f of [...forms]) forms.add(JSON.stringify(f).slice(1, -1));
  return [...forms];
}

/** pino's hooks that redact each log line just before it is written. */
export const REDACTING_HOOKS = { streamWrite: redactOutput };
