// partner-db: administration of the partner database (Yacobots and domain owners);
// import (import.ts), copy (copy.ts) and owner (owner.ts) have their own modules.
import type { Command } from 'commander';
import { dashArguments } from '../cli/admin.js';
import { copyCommand } from './copy.js';
import { importCommand, readCsvText } from './import.js';
import { NAME, label, say, subdomainNote, warn } from './messages.js';
import { Progress } from '../cli/progress.js';
import { addOwnerCommand } from './owner.js';
import { LeastLoaded } from '../core/store/assign.js';
import { normalizeDomain } from '../core/store/domains.js';
import { countMove } from '../core/store/moves.js';
import { initStore, openStore } from '../core/store/open.js';
import { SCHEMA_VERSION } from '../core/store/schema.js';
import {
  DEFAULT_TIMEOUTS,
  TIMEOUT_OPTIONS,
  findYacobotIn,
  timeoutsOf,
  type OpenOptions,
  type PartnerStore,
  type Sql,
  type Timeouts,
} from '../core/store/store.js';
import { missingOwnerError, MAX_WEIGHT, type MissingOwner, type Yacobot, type YacobotLoad } from '../core/store/yacobots.js';
import { DataError, UsageError, clipText, hasControl, shellQuote, visibleName } from '../core/errors.js';
import { parseDecimal } from '../core/numbers.js';
import { formatTimestamp } from '../core/time.js';
import { DB_ENV } from '../core/secrets.js';

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
    );
  for (const [flag, field, help, zero] of TIMEOUT_OPTIONS)
    program.option(`--${flag} <s>`, `PostgreSQL: ${help} (default ${DEFAULT_TIMEOUTS[field] / 1000}; 0: ${zero})`);
  program.addHelpText(
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
      `upgrade the database to schema version ${SCHEMA_VERSION} (each Yacobot's domain count kept in partner_load by triggers, the masters' claims of hours in hour_claim fenced by each state's identity in master_state, each upload-domains commit in domain_commit), in one transaction; safe to run again`,
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
  // Ticks only while the database works elsewhere (PostgreSQL): SQLite's work holds this thread.
  const progress = new Progress({ log: null, plain: NAME }, () => ({ fields: {}, text: `migrate: under way in ${visibleName(store.name)}` })).start();
  const r = await store.migrate().finally(() => progress.stop());
  const name = visibleName(store.name);
  if (r.found === 'current') {
    say(`${name} is already at schema version ${SCHEMA_VERSION}`);
    return;
  }
  const seconds = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(1);
  const what =
    r.found === 'incomplete'
      ? `restored partner_load, its triggers, hour_claim, master_state and domain_commit in ${name}`
      : `upgraded ${name} from schema version ${r.found.slice('version'.length)} to ${SCHEMA_VERSION}`;
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
