// partner-db: administration of the partner database (Yacobots and domain owners).
import * as fs from 'node:fs';
import { constants as bufferConstants, isUtf8 } from 'node:buffer';
import type { Command } from 'commander';
import { dashArguments } from '../cli/admin.js';
import { addOwnerCommand } from './owner.js';
import { CsvError, parse as parseCsv } from 'csv-parse/sync';
import { LeastLoaded } from '../core/store/assign.js';
import { normalizeDomain } from '../core/store/domains.js';
import { countMove } from '../core/store/moves.js';
import { initStore, openStore } from '../core/store/open.js';
import { SCHEMA_VERSION } from '../core/store/schema.js';
import { findYacobotIn, timeoutsOf, type OpenOptions, type PartnerStore, type Row, type Sql, type Timeouts } from '../core/store/store.js';
import { missingOwnerError, MAX_WEIGHT, type MissingOwner, type Yacobot, type YacobotLoad } from '../core/store/yacobots.js';
import { DataError, UsageError, clipText, formatPlace, hasControl, ioError, shellQuote, visibleName } from '../core/errors.js';
import { parseCount, parseDecimal } from '../core/numbers.js';
import { formatTimestamp } from '../core/time.js';
import { domainOfHost } from '../core/url.js';
import { DB_ENV } from '../core/secrets.js';

const NAME = 'partner-db';
/** At most this many bad CSV rows are listed before the import gives up. */
const MAX_REPORTED_ROWS = 20;
/** The longest string V8 makes: the largest CSV file an import reads at once. */
const MAX_STRING_LENGTH = bufferConstants.MAX_STRING_LENGTH;
/** The most distinct domains one import holds: V8's Maps stop at 2^24 entries. */
const MAX_IMPORT_DOMAINS = 16_000_000;
/** Domains an import looks up and writes per step (PostgreSQL: per statement). */
const IMPORT_BATCH = 5000;

const say = (text: string) => process.stdout.write(text + '\n');
// One line, whatever it quotes (a domain written by hand may hold a newline).
const warn = (text: string) => process.stderr.write(`${NAME}: warning: ${visibleName(text)}\n`);

/** Routing keys are registrable domains (unless analyze-dump runs with --domain-mode host): say so when one is not. */
function subdomainNote(domain: string): string | null {
  const reg = domainOfHost(domain);
  return reg !== domain ? `${domain} is not a registrable domain; URL records of its pages carry ${reg} (unless --domain-mode host)` : null;
}
// A name written by hand may hold control characters (add refuses them): shown escaped, as list shows it.
const label = (y: Yacobot) => `${y.id} (${visibleName(y.name)})`;

const badWeight = (text: string) => `weight must be a positive number up to ${MAX_WEIGHT}, got '${text}'`;

/** Parses a weight argument: a positive finite decimal number. */
export function parseWeight(text: string): number {
  const w = parseDecimal(text) ?? NaN;
  // Capped so that the least-loaded comparison (domains x weight) stays exact: a
  // weight of 1e308 made every load Infinity and gave every domain the smallest id.
  if (!(w > 0 && w <= MAX_WEIGHT)) throw new UsageError(badWeight(text));
  return w;
}

/** Returns what is wrong with a new Yacobot name, or null. */
export function checkYacobotName(name: string): string | null {
  if (name.trim() !== name || name === '') return 'must be non-empty without leading or trailing spaces';
  if (/^\d+$/.test(name)) return 'must not be all digits (digits mean an id)';
  // It would read as an option: every later command would need '--' before it.
  if (name.startsWith('-')) return "must not start with '-' (it would read as an option)";
  if (hasControl(name)) return 'must not contain control characters';
  if (name.length > 100) return 'must be at most 100 characters';
  return null;
}

/** Moves every domain of `from` to the other active Yacobots, least-loaded first; returns moves per target id. */
async function moveDomains(store: PartnerStore, q: Sql, from: Yacobot, others: YacobotLoad[]): Promise<Map<number, number>> {
  const domains = (await q.all('SELECT domain FROM partner_domain WHERE yacobot_id = ? ORDER BY domain', [from.id])).map((r) => r.domain as string);
  const moved = new Map<number, number>();
  if (domains.length === 0) return moved;
  if (others.length === 0) {
    throw new DataError(
      'LAST_YACOBOT',
      from.active
        ? `cannot disable Yacobot ${label(from)}: it is the last active one and owns ${domains.length} domain(s); add or enable another first`
        : `cannot move the ${domains.length} domain(s) of disabled Yacobot ${label(from)}: no Yacobot is active; add or enable one first`,
    );
  }
  const least = new LeastLoaded(others);
  const moves = domains.map((d) => [d, least.pick()] as const);
  for (const [, to] of moves) moved.set(to, (moved.get(to) ?? 0) + 1);
  await store.setOwners(moves, formatTimestamp(new Date()));
  return moved;
}

/**
 * The rows of a CSV import, one per domain, as parallel arrays (a million rows kept as
 * objects, with csv-parse's records and an info object each, took 1 GB; seven million
 * ran out of heap): the domain as records spell it, its Yacobot's id, and the line.
 */
export interface ImportRows {
  domains: string[];
  ids: number[];
  lines: number[];
}

/**
 * Parses and validates a `domain,yacobot` CSV (RFC 4180 quoting, an optional
 * `domain,yacobot` header, blank lines skipped). Bad rows are counted (`bad`), the
 * first MAX_REPORTED_ROWS of them kept as errors naming their line; nothing is
 * written to the database here.
 */
export function readImportCsv(
  text: string,
  file: string,
  yacobots: Yacobot[],
  maxDomains = MAX_IMPORT_DOMAINS,
): { rows: ImportRows; errors: DataError[]; bad: number } {
  const byId = new Map(yacobots.map((y) => [String(y.id), y]));
  const byName = new Map(yacobots.map((y) => [y.name, y]));
  // The text csv-parse reads: no BOM (its own BOM option would no longer see it), the
  // spaces it must not trim hidden.
  const csv = hideSpaces(text.startsWith('\ufeff') ? text.slice(1) : text);
  // csv-parse's own line count takes a CRLF inside quotes for two lines: lines are
  // counted here from its byte offsets (into the UTF-8 bytes it parsed).
  const bytes = Buffer.from(csv, 'utf8');
  const lines = new LineCounter(bytes);
  const rows: ImportRows = { domains: [], ids: [], lines: [] };
  const errors: DataError[] = [];
  let bad = 0;
  // Each domain's row so far, by its index in `rows`.
  const rowOf = new Map<string, number>();
  let prevEnd = 0;
  let index = 0;
  // Each record as csv-parse reads it; none is kept (returning undefined drops it).
  const onRecord = (hidden: string[], context: { bytes: number }): undefined => {
    // context.bytes is where the record ends; a quoted field may span lines, so name where it starts.
    const line = lines.recordStartLine(prevEnd);
    prevEnd = context.bytes;
    const record = hidden.map(unhideSpaces);
    const fail = (m: string): undefined => {
      if (errors.length < MAX_REPORTED_ROWS) errors.push(new DataError('BAD_ROW', m, { file, line }));
      bad++;
      return undefined;
    };
    if (index++ === 0 && record.length === 2 && record[0]!.toLowerCase() === 'domain' && /^yacobot(_id)?$/i.test(record[1]!)) return undefined;
    if (record.length !== 2) return fail(`expected 2 fields (domain,yacobot), got ${record.length}`);
    const nd = normalizeDomain(record[0]!);
    if ('error' in nd) return fail(nd.error);
    const ref = record[1]!;
    const y = /^\d+$/.test(ref) ? byId.get(String(parseCount(ref))) : byName.get(ref);
    if (!y) return fail(/^\d+$/.test(ref) ? `no Yacobot with id ${ref}` : `no Yacobot named '${clipText(ref)}'`);
    if (!y.active) return fail(`Yacobot ${label(y)} is disabled`);
    const prev = rowOf.get(nd.domain);
    if (prev !== undefined) {
      if (rows.ids[prev] !== y.id) fail(`domain ${nd.domain} was given to another Yacobot on line ${rows.lines[prev]}`);
      return undefined;
    }
    if (rows.domains.length === maxDomains) {
      throw new DataError(
        'CSV_TOO_BIG',
        `more than ${maxDomains} distinct domains, the most one import holds; split the file (each part is then all or nothing)`,
        { file, line },
      );
    }
    rowOf.set(nd.domain, rows.domains.length);
    rows.domains.push(nd.domain);
    rows.ids.push(y.id);
    rows.lines.push(line);
    return undefined;
  };
  try {
    // Every line end, in any mix: csv-parse would otherwise take the first one for all.
    parseCsv(csv, { skip_empty_lines: true, relax_column_count: true, trim: true, record_delimiter: ['\r\n', '\n', '\r'], on_record: onRecord });
  } catch (err) {
    const e = err as { message?: string; bytes?: number; code?: string };
    // csv-parse passes on what onRecord throws: only its own errors are CSV syntax.
    if (!(err instanceof CsvError)) throw err;
    if (e.code === 'CSV_QUOTE_NOT_CLOSED') {
      // csv-parse names the end of the file; the operator needs the line of the quote.
      throw new DataError('BAD_CSV', 'CSV syntax: the quote opened on this line is never closed', {
        file,
        line: new LineCounter(bytes).lineAt(unclosedQuoteAt(bytes)),
      });
    }
    const msg = unhideSpaces(String(e.message ?? err))
      .replace(/^Invalid (Opening|Closing) Quote: /, '')
      .replace(/ on field (\d+)/, (_, n: string) => ` in field ${Number(n) + 1}`) // it counts from 0
      .replace(/ at line \d+/, ''); // its count, off after a CRLF inside quotes; the place names the line
    throw new DataError('BAD_CSV', `CSV syntax: ${msg}`, { file, line: typeof e.bytes === 'number' ? new LineCounter(bytes).lineAt(e.bytes) : undefined });
  }
  return { rows, errors, bad };
}

// csv-parse's trim takes off a field's ends every space String.prototype.trim() does
// (a no-break space, U+3000, ..., and \v, \f), where only spaces and tabs may go: a
// no-break space pasted before '.de' made the row the domain '.de'. So those
// characters are hidden from it, each as SPACE_MARK and its 4 hex digits (the mark
// itself too), and put back in the fields it returns, which then hold them as written.
const SPACE_MARK = '\ue000';
const TRIMMED_SPACE = /[^\S\t\n\r ]|\ue000/g;
const MARKED = /\ue000([0-9a-f]{4})/g;
const hideSpaces = (s: string) => s.replace(TRIMMED_SPACE, (c) => SPACE_MARK + c.charCodeAt(0).toString(16).padStart(4, '0'));
const unhideSpaces = (s: string) => s.replace(MARKED, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

/** The line (from 1; LF, CRLF or a lone CR ends one) of the first byte sequence in `b` that is not UTF-8. */
function firstNonUtf8Line(b: Buffer): number {
  let line = 1;
  let from = 0;
  for (let i = 0; i <= b.length; i++) {
    const c = b[i];
    if (i < b.length && c !== 10 && c !== 13) continue;
    if (!isUtf8(b.subarray(from, i))) return line;
    if (c === 13 && b[i + 1] === 10) i++;
    line++;
    from = i + 1;
  }
  return line;
}

/** Line numbers (from 1) of byte offsets into a text, asked in increasing order. */
class LineCounter {
  private at = 0;
  private line = 1;

  constructor(private readonly b: Buffer) {}

  /** The line of byte `offset`: LF, CRLF and a lone CR each end one line, as the parser reads them. */
  lineAt(offset: number): number {
    const to = Math.min(offset, this.b.length);
    for (; this.at < to; this.at++) {
      const c = this.b[this.at];
      if (c === 10 || (c === 13 && this.b[this.at + 1] !== 10)) this.line++;
    }
    return this.line;
  }

  /** The line where a record starts that follows byte `offset` (blank lines skipped, as the parser does with trim). */
  recordStartLine(offset: number): number {
    let p = offset;
    for (let c = this.b[p]; c === 10 || c === 13 || c === 32 || c === 9; c = this.b[++p]);
    return this.lineAt(p);
  }
}

/** The byte offset of the quote that RFC 4180 quoting leaves open at the end of `b`. */
function unclosedQuoteAt(b: Buffer): number {
  let open = 0;
  let inQuote = false;
  for (let i = 0; i < b.length; i++) {
    if (b[i] !== 34) continue;
    if (!inQuote) {
      open = i;
      inQuote = true;
    } else if (b[i + 1] === 34)
      i++; // a doubled quote inside quotes is an escaped one
    else inQuote = false;
  }
  return open;
}

function pad(table: string[][], rightAligned: boolean[]): string {
  // One row per line whatever a hand-edited database holds (add refuses control characters).
  const cells = table.map((r) => r.map(visibleName));
  const widths = cells[0]!.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  return cells
    .map((r) =>
      r
        .map((v, c) => (rightAligned[c] ? v.padStart(widths[c]!) : v.padEnd(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const pct = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(1)}%`);

/**
 * The numbers behind `stats`: per Yacobot, its domains and its shares of domains and of
 * active weight; and the domains owned by ids that name no Yacobot (`missing`, from
 * missingOwners), which count in `domains` and the shares.
 */
export function statsOf(ys: YacobotLoad[], missing: readonly MissingOwner[] = []) {
  const total = ys.reduce((s, y) => s + y.domains, 0) + missing.reduce((s, m) => s + m.domains, 0);
  const activeWeight = ys.filter((y) => y.active).reduce((s, y) => s + y.weight, 0);
  return {
    domains: total,
    active: ys.filter((y) => y.active).length,
    active_weight: activeWeight,
    yacobots: ys.map((y) => ({
      id: y.id,
      name: y.name,
      weight: y.weight,
      active: y.active,
      domains: y.domains,
      domain_share: total === 0 ? null : y.domains / total,
      weight_share: y.active && activeWeight > 0 ? y.weight / activeWeight : null,
    })),
    missing_owners: missing.map((m) => ({ id: m.id, domains: m.domains, domain_share: m.domains / total, first_domain: m.first })),
  };
}

/** Adds partner-db's subcommands to the program (the runner owns parsing and exits). */
export function buildPartnerDb(program: Command): void {
  describeProgram(program);
  addYacobotCommands(program);
  addDomainCommands(program);
  addDatabaseCommands(program);
  addOwnerCommand(program, dbName);
}

/** The program's description, global options and closing help. */
function describeProgram(program: Command): void {
  program
    .description(
      `Administer the partner database: Yacobots (crawler servers) with weights, and
the domain -> Yacobot table that upload-domains and domains-from-db use.

YACOBOT arguments take an id or a name. Domains given by hand are read as the
URL parser reads a host (lower case, punycode, one trailing dot dropped) and
stored as URL records carry them: registrable domains (example.co.uk), or whole
hosts under analyze-dump --domain-mode host. A domain that starts with '-'
goes after '--': assign -- -a-.com YACOBOT.`,
    )
    .option(
      '--db <db>',
      `the partner database: a SQLite file or a postgres:// URI; required, unless ${DB_ENV} holds it (which keeps a password off the command line)`,
    )
    .option('--connect-timeout <s>', 'PostgreSQL: seconds to wait for a connection (0: no limit)')
    .option('--statement-timeout <s>', 'PostgreSQL: seconds one statement may take (0: no limit)')
    .option('--lock-timeout <s>', "PostgreSQL: seconds to wait for a lock, another writer's among them (0: no limit)")
    .addHelpText(
      'after',
      `
Exit status: 0 success, 1 bad data or database failure, 2 usage error.
Errors read "partner-db: <file>:<line>: <message>".

Example:
  partner-db --db state/partner.db init
  partner-db --db state/partner.db add yb1 --weight 2
  partner-db --db state/partner.db import partners.csv
  partner-db --db state/partner.db stats`,
    );
}

/** The --db a subcommand was given; a UsageError when there is none. */
function dbName(cmd: Command): string {
  const f = (cmd.optsWithGlobals().db as string | undefined) ?? process.env[DB_ENV];
  if (f === undefined) throw new UsageError(`--db FILE is required (or ${DB_ENV} in the environment)`);
  if (f === '') throw new UsageError('--db wants a file name'); // as the stages' pathOption says it
  return f;
}

/** Opens the checked database (`readonly` for list and stats: they need no write access; `anyVersion` for migrate), runs fn, closes. */
async function withDb<T>(cmd: Command, fn: (store: PartnerStore) => Promise<T>, opts: Pick<OpenOptions, 'readonly' | 'anyVersion'> = {}): Promise<T> {
  const store = await openStore(dbName(cmd), { ...opts, timeouts: timeoutsOf(cmd.optsWithGlobals()) });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** add, list, set-weight, disable, enable: the Yacobots. */
function addYacobotCommands(program: Command): void {
  const add = program
    .command('add <name>')
    .description('add an active Yacobot; prints its id')
    .option('--weight <w>', 'its share of domains relative to the others', '1');
  // Not '-- -x': add refuses such a name (checkYacobotName).
  dashArguments(add, "a Yacobot name must not start with '-'");
  add.action((name: string, o: { weight: string }, cmd: Command) => {
    const bad = checkYacobotName(name);
    if (bad) throw new UsageError(`Yacobot name '${clipText(name)}' ${bad}`);
    const weight = parseWeight(o.weight);
    return withDb(cmd, (store) => addCommand(store, name, weight));
  });

  program
    .command('list')
    .description('list the Yacobots: id, name, weight, active')
    .option('--json', 'one JSON array for scripts')
    .action((o: { json?: boolean }, cmd: Command) => withDb(cmd, (store) => listCommand(store, o.json ?? false), { readonly: true }));

  const setWeight = program.command('set-weight <yacobot> <w>').description("change a Yacobot's weight (domains already assigned stay where they are)");
  // Commander takes -1 for a number, but reads -1,5 or -x as an option: as the last of two
  // arguments it is the weight, refused as -1 is, not with "unknown option" and a hint to
  // write '-- -x', which parseWeight then refuses. Elsewhere after the Yacobot (`a -x 5`,
  // `a 2 -x`) it is an unknown option, with no hint: no argument could go there.
  dashArguments(setWeight, (at, opt, count) => (at === 0 ? undefined : at === 1 && count === 2 ? { message: badWeight(opt) } : null));
  setWeight.action((ref: string, w: string, _o, cmd: Command) => {
    const weight = parseWeight(w);
    return withDb(cmd, (store) => setWeightCommand(store, ref, weight));
  });

  program
    .command('disable <yacobot>')
    .description('stop giving domains to a Yacobot and move its domains to the remaining active ones, least-loaded first, in one transaction')
    .action((ref: string, _o, cmd: Command) => withDb(cmd, (store) => disableCommand(store, ref)));

  program
    .command('enable <yacobot>')
    .description('let a Yacobot take new domains again (nothing is moved back to it)')
    .action((ref: string, _o, cmd: Command) => withDb(cmd, (store) => enableCommand(store, ref)));
}

/** assign, import, stats: the domains. */
function addDomainCommands(program: Command): void {
  program
    .command('assign <domain> <yacobot>')
    .description('give a domain to an active Yacobot (moving it if it had another)')
    .action((domainArg: string, ref: string, _o, cmd: Command) => {
      const nd = normalizeDomain(domainArg);
      if ('error' in nd) throw new UsageError(nd.error);
      return withDb(cmd, (store) => assignCommand(store, nd.domain, ref));
    });

  program
    .command('import <file>')
    .description('assign domains from a CSV file of "domain,yacobot" rows (quoting as RFC 4180, optional header row); all rows or none')
    .action((csvFile: string, _o, cmd: Command) => {
      const text = readCsvText(csvFile);
      return withDb(cmd, (store) => importCommand(store, csvFile, text));
    });

  program
    .command('stats')
    .description('per Yacobot: id, name, weight, active, domains, share of domains vs share of active weight')
    .option('--json', 'one JSON object for scripts')
    .action((o: { json?: boolean }, cmd: Command) => withDb(cmd, (store) => statsCommand(store, o.json ?? false), { readonly: true }));
}

/** init, copy, migrate: the database itself. */
function addDatabaseCommands(program: Command): void {
  program
    .command('init')
    .description('create the database (a SQLite file, or the tables in a PostgreSQL database) and its tables (safe to run again)')
    .action((_o, cmd: Command) => initCommand(dbName(cmd), timeoutsOf(cmd.optsWithGlobals())));

  program
    .command('copy <from> <to>')
    .description('copy a whole partner database (SQLite file or postgres:// URI) into another, all or nothing; the target is made with init first')
    .option('--force', 'replace what the target holds (by default a target with Yacobots or domains is refused)')
    .action((from: string, to: string, o: { force?: boolean }, cmd: Command) => copyCommand(from, to, o.force ?? false, timeoutsOf(cmd.optsWithGlobals())));

  program
    .command('migrate')
    .description(
      `upgrade the database to schema version ${SCHEMA_VERSION} (each Yacobot's domain count kept in partner_load by triggers, the masters' claims of hours in hour_claim), in one transaction; safe to run again`,
    )
    .action((_o, cmd: Command) => withDb(cmd, migrateCommand, { anyVersion: true }));
}

/** init: creates the tables where missing. */
async function initCommand(db: string, timeouts: Timeouts): Promise<void> {
  const { store, created } = await initStore(db, { timeouts });
  await store.close();
  say(created ? `initialized ${visibleName(store.name)}` : `${visibleName(store.name)} is already a partner database`);
}

/** migrate: the database brought to this program's schema version, in one transaction. */
async function migrateCommand(store: PartnerStore): Promise<void> {
  const t0 = process.hrtime.bigint();
  const r = await store.migrate();
  const name = visibleName(store.name);
  if (r.found === 'current') {
    say(`${name} is already at schema version ${SCHEMA_VERSION}`);
    return;
  }
  const seconds = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(1);
  const what =
    r.found === 'incomplete'
      ? `restored partner_load, its triggers and hour_claim in ${name}`
      : `upgraded ${name} from schema version ${r.found === 'version1' ? 1 : 2} to ${SCHEMA_VERSION}`;
  say(`${what} in ${seconds} s: partner_load counts ${r.domains} domain(s) under ${r.owners} Yacobot id(s)`);
}

/** add: a new active Yacobot, numbered after the largest id. */
async function addCommand(store: PartnerStore, name: string, weight: number): Promise<void> {
  const file = store.name;
  if ((await store.findYacobot(name).catch(() => null)) !== null) {
    throw new DataError('DUPLICATE', `a Yacobot named '${name}' already exists`, { file });
  }
  // Numbered after the largest id: past 2^53 - 1 (an id set by hand) the new one could
  // not be told as it is, nor routed to (yacobotLoads refuses it).
  const id = await store.addYacobot(name, weight);
  say(`added Yacobot ${id} (${name}), weight ${weight}`);
}

/** list: the Yacobots, as a table or JSON. */
async function listCommand(store: PartnerStore, json: boolean): Promise<void> {
  const ys = await store.yacobotLoads();
  if (json) {
    say(JSON.stringify(ys.map(({ id, name, weight, active }) => ({ id, name, weight, active }))));
    return;
  }
  const rows = [['ID', 'NAME', 'WEIGHT', 'ACTIVE'], ...ys.map((y) => [String(y.id), y.name, String(y.weight), y.active ? 'yes' : 'no'])];
  say(pad(rows, [true, false, true, false]));
}

/** set-weight: a Yacobot's new weight (its domains stay). */
async function setWeightCommand(store: PartnerStore, ref: string, weight: number): Promise<void> {
  const y = await store.findYacobot(ref);
  await store.write((q) => q.run('UPDATE yacobot SET weight = ? WHERE id = ?', [weight, y.id]));
  say(`Yacobot ${label(y)}: weight ${y.weight} -> ${weight}`);
}

/** disable: no new domains for a Yacobot, and its domains moved to the active ones, in one transaction. */
async function disableCommand(store: PartnerStore, ref: string): Promise<void> {
  let noneLeft = false;
  const message = await store.write(async (q) => {
    const y = await findYacobotIn(q, ref);
    // An already disabled Yacobot can still own domains (made so by hand, as
    // upload-domains warns; its warning suggests this very command): move them.
    const others = (await store.yacobotLoads()).filter((o) => o.active && o.id !== y.id);
    const moved = await moveDomains(store, q, y, others);
    if (y.active) await q.run('UPDATE yacobot SET active = 0 WHERE id = ?', [y.id]);
    const total = [...moved.values()].reduce((a, b) => a + b, 0);
    const names = new Map(others.map((o) => [o.id, o]));
    const parts = [...moved].sort((a, b) => a[0] - b[0]).map(([id, n]) => `${n} to ${label(names.get(id)!)}`);
    const what = y.active ? `disabled Yacobot ${label(y)}` : `Yacobot ${label(y)} is already disabled`;
    noneLeft = others.length === 0;
    return !y.active && total === 0 ? what : `${what}; moved ${total} domain(s)${parts.length ? ': ' + parts.join(', ') : ''}`;
  });
  say(message);
  // Allowed (it owned no domain), but every run fails from now on: say so while it is fresh.
  if (noneLeft)
    warn(`no active Yacobot is left: upload-domains fails until one is added or enabled (partner-db --db ${shellQuote(store.name)} add NAME, or enable ID)`);
}

/** enable: a Yacobot takes new domains again. */
async function enableCommand(store: PartnerStore, ref: string): Promise<void> {
  const y = await store.findYacobot(ref);
  await store.write((q) => q.run('UPDATE yacobot SET active = 1 WHERE id = ?', [y.id]));
  say(y.active ? `Yacobot ${label(y)} is already enabled` : `enabled Yacobot ${label(y)}`);
}

/** assign: one domain to an active Yacobot. */
async function assignCommand(store: PartnerStore, domain: string, ref: string): Promise<void> {
  const file = store.name;
  // The check and the write in one write transaction: a disable between them would
  // leave the domain on a disabled Yacobot.
  const { y, prev } = await store.write(async (q) => {
    const y = await findYacobotIn(q, ref);
    if (!y.active) throw new DataError('DISABLED', `Yacobot ${label(y)} is disabled; enable it first`, { file });
    const row = await q.get('SELECT yacobot_id FROM partner_domain WHERE domain = ?', [domain]);
    await store.setOwners([[domain, y.id]], formatTimestamp(new Date()));
    if (row !== undefined && Number(row.yacobot_id) !== y.id) await countMove(q); // a run under way warns of it
    return { y, prev: row === undefined ? undefined : Number(row.yacobot_id) };
  });
  const note = subdomainNote(domain);
  if (note) warn(note);
  say(
    prev === undefined
      ? `assigned ${domain} to Yacobot ${label(y)}`
      : prev === y.id
        ? `${domain} already belongs to Yacobot ${label(y)}`
        : `moved ${domain} from Yacobot ${prev} to ${label(y)}`,
  );
}

/** The text of a CSV file to import: UTF-8, of a size one string holds. */
function readCsvText(csvFile: string): string {
  try {
    // A file past the longest string V8 makes failed with ERR_STRING_TOO_LONG as its "read" error.
    if (fs.statSync(csvFile).size > MAX_STRING_LENGTH) {
      throw new DataError(
        'CSV_TOO_BIG',
        `larger than ${MAX_STRING_LENGTH >> 20} MiB, the most one import can read; split it (each part is then all or nothing)`,
        { file: csvFile },
      );
    }
    const bytes = fs.readFileSync(csvFile);
    // Decoded as it was, a Latin-1 file's 'münchen.de' failed as "bad domain 'm\ufffdnchen.de'".
    if (!isUtf8(bytes))
      throw new DataError('BAD_CSV', 'not UTF-8 text (convert it first, e.g. iconv -f latin1 -t utf-8)', { file: csvFile, line: firstNonUtf8Line(bytes) });
    return bytes.toString('utf8');
  } catch (err) {
    if (err instanceof DataError) throw err;
    throw ioError(err, csvFile, 'read');
  }
}

/** import: every row of a checked CSV file in one write transaction, or none. */
async function importCommand(store: PartnerStore, csvFile: string, text: string): Promise<void> {
  const yacobots = await store.yacobotLoads();
  const { rows, errors, bad } = readImportCsv(text, csvFile, yacobots);
  if (bad > 0) {
    for (const e of errors) process.stderr.write(`${NAME}: ${visibleName(formatPlace(e.place ?? { file: csvFile }, e.message))}\n`);
    const more = bad > errors.length ? ` (first ${errors.length} shown)` : '';
    throw new DataError('BAD_CSV', `${bad} bad row(s)${more}; nothing imported`, { file: csvFile });
  }
  const now = formatTimestamp(new Date());
  const counts = await store.write(async (q) => {
    // The file was checked before this write transaction (parsing can take seconds, too
    // long to hold the lock); a Yacobot disabled since then fails the import here, so
    // no domain lands on a disabled Yacobot.
    const active = new Set((await q.all('SELECT id FROM yacobot WHERE active = 1')).map((r) => Number(r.id)));
    for (const id of new Set(rows.ids)) {
      if (!active.has(id)) {
        const y = yacobots.find((x) => x.id === id)!;
        throw new DataError('DISABLED', `Yacobot ${label(y)} was disabled while the file was read; nothing imported`, { file: csvFile });
      }
    }
    const c = { added: 0, moved: 0, same: 0 };
    // Many domains per step: on PostgreSQL a statement per domain took a round trip
    // each, and updated each Yacobot's partner_load row once per domain.
    for (let i = 0; i < rows.domains.length; i += IMPORT_BATCH) {
      const domains = rows.domains.slice(i, i + IMPORT_BATCH);
      const prev = await store.ownersIn(domains);
      const changed: [string, number][] = [];
      domains.forEach((domain, j) => {
        const id = rows.ids[i + j]!;
        const p = prev.get(domain);
        if (p === undefined) c.added++;
        else if (Number(p) === id) {
          c.same++;
          return;
        } else c.moved++;
        changed.push([domain, id]);
      });
      await store.setOwners(changed, now);
    }
    if (c.moved > 0) await countMove(q); // a run under way warns of it
    return c;
  });
  say(`imported ${rows.domains.length} domain(s) from ${visibleName(csvFile)}: ${counts.added} new, ${counts.moved} moved, ${counts.same} unchanged`);
  let notes = 0;
  let first: string | null = null;
  for (const domain of rows.domains) {
    const note = subdomainNote(domain);
    if (note === null) continue;
    notes++;
    first ??= note;
  }
  if (first !== null) warn(`${notes} row(s) name no registrable domain, e.g. ${first}`);
}

/** stats: per Yacobot its domains and shares, as a table or JSON. */
async function statsCommand(store: PartnerStore, json: boolean): Promise<void> {
  const missing = await store.missingOwners();
  const s = statsOf(await store.yacobotLoads(), missing);
  // upload-domains and domains-from-db refuse to start on such rows: say why, and the fix.
  if (missing.length > 0) warn(missingOwnerError(store.name, missing).message);
  if (json) {
    say(JSON.stringify(s));
    return;
  }
  const rows = [
    ['ID', 'NAME', 'WEIGHT', 'ACTIVE', 'DOMAINS', 'DOMAIN_SHARE', 'WEIGHT_SHARE'],
    ...s.yacobots.map((y) => [String(y.id), y.name, String(y.weight), y.active ? 'yes' : 'no', String(y.domains), pct(y.domain_share), pct(y.weight_share)]),
    ...s.missing_owners.map((m) => [m.id, '(no such Yacobot)', '-', '-', String(m.domains), pct(m.domain_share), '-']),
  ];
  say(pad(rows, [true, false, true, false, true, true, true]));
  const orphans = s.missing_owners.reduce((n, m) => n + m.domains, 0);
  const lost =
    orphans > 0
      ? `; ${orphans} of them owned by ${s.missing_owners.length} id(s) that name no Yacobot (upload-domains and domains-from-db refuse to start)`
      : '';
  say(`total: ${s.domains} domain(s), ${s.active} of ${s.yacobots.length} Yacobot(s) active${lost}`);
}

/** Rows per batch when copy writes the domains. */
const COPY_BATCH = 10_000;

/**
 * copy: every Yacobot and domain of FROM into TO (made with init first), in one write
 * transaction on TO: all or nothing. A TO that holds rows is refused unless `force`,
 * which replaces them.
 */
async function copyCommand(fromDb: string, toDb: string, force: boolean, timeouts: Timeouts): Promise<void> {
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
        try {
          domains = await copyInto(to, fq, ys, force);
        } catch (err) {
          throw copyError(err, from.name);
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

/** Writes `ys` and every domain the source snapshot `fq` holds into `to`, in one write transaction; returns the domains copied. */
async function copyInto(to: PartnerStore, fq: Sql, ys: Row[], force: boolean): Promise<number> {
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
  return domains;
}
