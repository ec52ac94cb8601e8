// Options of reflog-to-yacobot-queue: flags, an optional key = value config file
// (the same names as the flags; flags win), defaults under ./var/. Pure: no I/O
// except reading the config file.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError, clipText } from '../core/errors.js';
import { parseGroupedCount, parseRatio, ratioError } from '../core/numbers.js';
import { parseBudget } from '../core/size.js';
import { isValidTimestamp, parseDuration } from '../core/time.js';
import { DEFAULT_KEEP, DEFAULT_RESEND_AFTER } from '../stages/filter-url.js';
import { DEFAULT_CARRY_KEEP } from '../stages/limit-domains.js';
import { isPgUri, timeoutsOf, type Timeouts } from '../core/store/store.js';
import { looksLikeUri, pgUriProblem } from '../core/db-uri.js';
import { rememberSecretsIn } from '../core/secrets.js';

export const PROG = 'reflog-to-yacobot-queue';

/** Everything a runner invocation needs, normalized; paths are absolute. */
export interface RunnerOptions {
  inbox: string;
  state: string;
  db: string;
  /** The database time-outs, as upload-domains takes them (the database itself goes in MASTER_SERVER_DB: never on an argv, which `ps` shows). */
  dbArgs: string[];
  dbTimeouts: Timeouts;
  queueDir: string;
  /** Fixed "now" for every run of this invocation, or null (see resolveNow). */
  now: string | null;
  backlogWarn: number;
  /** Passed to filter-url / analyze-dump only when set. */
  keep: string | null;
  /** filter-url's --keep in ms: `keep`, else filter-url's default. */
  keepMs: number;
  resendAfter: string | null;
  /** filter-url's --resend-after in ms: `resendAfter`, else filter-url's default. */
  resendAfterMs: number;
  /** limit-domains' --max-per-domain, or null: no cap, no limit-domains in the chain (see carry.ts). */
  maxPerDomain: number | null;
  /** limit-domains' --carry-keep in ms (its default when unset). */
  carryKeepMs: number;
  maxRejectRatio: string | null;
  memory: string | null;
  logLevel: string;
  /** After a signal, how long the stages get to stop before they are SIGKILLed. */
  killAfterMs: number;
  /** --max-run-time: how long one invocation may run before it stops its chain (see deadline.ts). */
  maxRunTimeMs: number;
  /** The config file read, if any (absolute). */
  config: string | null;
  /** Run with --keep / --resend-after other than those stored with the state, and store these. */
  acceptSettingsChange: boolean;
  /** Commit a reflog whose last line has no LF (by default its run fails). */
  allowUnterminated: boolean;
  /** Start current_log over when it is missing after a committed run (by default the run fails). */
  resetCurrentLog: boolean;
  /** After an invocation that committed a run, remove done/ and rejects files older than this (ms); null: keep all. */
  keepDoneMs: number | null;
  /** Where the Prometheus textfile goes after every invocation that takes the lock, or null. */
  metricsFile: string | null;
  /** This master's name in the claims of hours (--master-name, default the host name). */
  masterName: string;
  /** How long another master's unconfirmed claim of an hour holds before this one may take it over (ms). */
  claimLeaseMs: number;
}

/** The keys a config file may set; each is also a --flag taking a value. */
export const KEYS = [
  'inbox',
  'state',
  'db',
  'queue-dir',
  'now',
  'backlog-warn',
  'keep',
  'resend-after',
  'max-per-domain',
  'carry-keep',
  'max-reject-ratio',
  'memory',
  'log-level',
  'kill-after',
  'max-run-time',
  'keep-done',
  'accept-settings-change',
  'allow-unterminated',
  'reset-current-log',
  'metrics-file',
  'master-name',
  'claim-lease',
  'connect-timeout',
  'statement-timeout',
  'lock-timeout',
] as const;
export type Key = (typeof KEYS)[number];
const PATH_KEYS: ReadonlySet<Key> = new Set(['inbox', 'state', 'db', 'queue-dir', 'metrics-file']);
/** Keys that are switches: a flag without a value on the command line, yes or no in a config file. */
const BOOL_KEYS: ReadonlySet<Key> = new Set(['accept-settings-change', 'allow-unterminated', 'reset-current-log']);

export const USAGE = `Usage: ${PROG} [options]
       ${PROG} status [--json] [--max-age DURATION] [options]
       ${PROG} explain [--json] [options] URL...

Processes every *.reflog in the inbox, oldest name first (bytewise order of the
file names), each as one run named after its file (2011072806.reflog -> run
2011072806, queue files <queue-dir>/<yacobot_id>/2011072806.tsv). For each run:

  analyze-dump < reflog | group-sum | join-current --current STATE/current_log
    | filter-url --current-out <staged current_log> --now NOW
    | upload-domains --db DB --now NOW
    | logsaver --queue-dir <staged queue dir> --name RUN

upload-domains looks the hour's distinct domains up in the partner database,
in batches: the run's cost follows the hour, not the size of the partner table.

Everything is written under STATE/staging/RUN/ first. Only when every stage
exited 0, the reflog was one (lines without a TAB and nothing else, more than
one of them or one without its newline, are not: an HTML page saved as the hour)
and every queue file was copied beside its place does the run commit: publish
the queue files, replace STATE/current_log, keep the rejects in
STATE/rejects/RUN.tsv, append a line to STATE/runs.jsonl, move the reflog to
STATE/done/. A failed run publishes nothing and leaves the reflog
in the inbox, its rejects in STATE/rejects/failed/RUN.tsv; later reflogs wait
for it (exit 1). A run killed at any instant is finished or redone by the
next invocation, with the same result (a queue file may be published twice,
same name, same content).

Unattended runs:
  - A reflog whose last line has no newline (a cut download) fails its run
    unless --allow-unterminated. A gzip file or an HTML page is named as such.
  - A reflog with the same bytes as one a committed run of its name left in
    STATE/done/ (a re-sent hour) is set aside there as
    RUN.reflog.resent.~N~, with a warning; nothing runs for it. To replay an
    hour on purpose, move (mv, or ln) its reflog from done/ into the inbox.
  - A run whose name still has queue files in a Yacobot's directory (not
    taken yet) writes its own as RUN.replay-YYYYMMDDhhmmss.tsv.
  - --keep, --resend-after, --max-per-domain and --carry-keep are stored with
    the state (STATE/settings.json); other values make the invocation exit 2
    (see --accept-settings-change).
  - STATE/current_log missing, or not what the last commit left (emptied,
    cut, edited, an older copy: STATE/memory.json holds its size, URL count
    and SHA-256), fails the run (exit 1); STATE/current_log.last, a copy the
    commit keeps, restores it.
  - STATE/runs.jsonl is opened by name for each line: logrotate may rotate
    it by rename (create, the safer) or copytruncate.

Options (each also a key of the --config file):
  --inbox DIR             where reflogs arrive (default ./var/inbox)
  --state DIR             current_log, done/, runs.jsonl, lock
                          (default ./var/state)
  --db DB                 partner database: a SQLite file or a postgres:// URI
                          (default STATE/partner.db)
  --connect-timeout S     PostgreSQL: seconds to wait for a connection (10)
  --statement-timeout S   PostgreSQL: seconds one statement may take (300)
  --lock-timeout S        PostgreSQL: seconds to wait for another master's
                          commit (60)
  --queue-dir DIR         queue root: DIR/<yacobot_id>/<run>.tsv
                          (default ./var/queue)
  --now YYYYMMDDhhmmss    "now" of every run of this invocation (see below)
  --backlog-warn N        warn when a Yacobot has more than N URLs waiting in
                          its queue directory (default 1000000)
  --keep DURATION         filter-url --keep (default ${DEFAULT_KEEP}; production: 10h);
                          at least --resend-after
  --resend-after DURATION filter-url --resend-after (default ${DEFAULT_RESEND_AFTER})
  --max-per-domain N      send at most N URLs of a domain per run; the rest
                          wait in STATE/carry for the next runs (limit-domains
                          between filter-url and upload-domains; default: no
                          cap, and no such stage)
  --carry-keep DURATION   drop a URL that waited in the carry this long
                          (default ${DEFAULT_CARRY_KEEP})
  --max-reject-ratio R    analyze-dump --max-reject-ratio (default 0.01)
  --memory SIZE           analyze-dump and limit-domains --memory (default
                          256M)
  --log-level LEVEL       JSON log lines on stderr: debug, info, warn, error,
                          silent (default info)
  --kill-after DURATION   after SIGINT, SIGTERM or SIGHUP, how long the stages
                          get to stop before they are SIGKILLed (default 10s,
                          at most 1d; 0: at once); a second signal SIGKILLs
                          them at once
  --max-run-time DURATION the longest an invocation runs (default 50m, at
                          most 1d): a run still going then is stopped and
                          fails (exit 1, nothing published, the reflog
                          stays), naming the stage still running; no run
                          starts after it
  --keep-done DURATION    after an invocation that committed a run, remove the
                          reflogs in STATE/done/ and the rejects files in
                          STATE/rejects/ (and failed/) last changed or moved
                          there more than DURATION ago (default: keep all)
  --accept-settings-change
                          run although --keep or --resend-after differs from
                          the settings stored with the state
                          (STATE/settings.json, written by each commit);
                          without it such an invocation exits 2 before any
                          stage runs. The next commit stores the new settings
  --allow-unterminated    commit a reflog whose last line has no newline, that
                          line included; without it such a run fails (exit 1,
                          the reflog stays in the inbox): a cut download
  --reset-current-log     start the memory of sent URLs over when
                          STATE/current_log is missing after runs were
                          committed, or go on with it as it is when it is
                          not what the last commit left (emptied, cut,
                          edited); without it such a run fails (exit 1)
  --metrics-file FILE     after every invocation that takes the lock, replace
                          FILE (atomically) with the job's metrics in the
                          Prometheus text format, for node_exporter's textfile
                          collector (FILE ends in .prom)
  --master-name NAME      this master's name in the partner database's claims
                          of hours (default: the host name); with several
                          masters on one PostgreSQL database, each run claims
                          its hour before it publishes, and an hour another
                          master published is remembered, not published
  --claim-lease DURATION  how long another master's claim of an hour, not yet
                          confirmed by its publish, holds before this master
                          takes it over (default 2m)
  --config FILE           read options from FILE: "key = value" lines with the
                          names above (no dashes in front), "#" comment lines;
                          the switches (accept-settings-change, ...) take yes
                          or no;
                          relative paths are relative to FILE's directory;
                          flags given on the command line win
  -h, --help              print this help and exit
  --version               print the version and exit

The "now" of a run (filter-url's clock, added_at of new domains) is, in order:
  1. --now, when given;
  2. when the reflog's name starts with an hour YYYYMMDDhh: the end of that
     hour (2011072806.reflog -> 20110728070000), so a backlog or a replay is
     processed as it would have been on time (an hour that has not begun
     by the clock, a typo, is skipped with a warning: it would empty
     current_log; so is a name that reads as YYYYMMDDhh but is no real
     hour, 2011072824);
  3. otherwise the wall clock when the run was first attempted.
It is stored in STATE/staging/RUN/run.json before any stage starts, and a rerun
after a crash reuses the stored value, so it reaches the same result. Times are
local (set TZ), as in filter-url.

Every invocation whose state directory exists records its result in
STATE/last-invocation.json (also when the lock is busy or the options are
wrong), which status reads:
  status    whether the job is healthy (exit 0) or not (exit 1): the last
            invocation, the last committed run, the inbox, each Yacobot's
            backlog, the lock, current_log's size; --json for a machine;
            --max-age DURATION: unhealthy also when the last committed run
            is older than that
  explain   what the job knows of each URL: canonical form, id, domain, owner
            (or the Yacobot least-loaded would pick now), current_log's entry
            and when it is due again, the queue files and rejects files that
            hold it, and a verdict as of the last run; --json for an array
Both take the options above (--config too) after their name, read only, and
take no lock: safe beside a running invocation.

One invocation at a time per state directory (flock on STATE/lock); another one
exits 75 at once, naming the process that holds the lock.

Exit status: 0 all runs committed (or nothing to do), 1 a run failed (its
stage's message is printed), 2 usage or config error, 75 locked, 130, 143 or
129 stopped by SIGINT, SIGTERM or SIGHUP (the run under way is finished or
redone by the next invocation).
`;

/** --max-run-time when unset. */
export const DEFAULT_MAX_RUN_TIME = '50m';

/** The longest --kill-after and --max-run-time: a day (a timer cannot wait beyond about 24 days). */
const MAX_KILL_AFTER_MS = 86400 * 1000;

/** Parses a config file's text into key -> value and the line (from 1) it is on; throws UsageError naming the line. */
export function parseConfig(text: string, file: string): Map<Key, { value: string; line: number }> {
  const out = new Map<Key, { value: string; line: number }>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.replace(/\r$/, '');
    const t = raw.trim();
    if (t === '' || t.startsWith('#')) continue;
    const eq = t.indexOf('=');
    if (eq < 0) throw new UsageError(`${file}:${i + 1}: want "key = value", got '${clipText(t)}'`);
    const key = t.slice(0, eq).trim();
    let value = t.slice(eq + 1).trim();
    // Before any check: a message about this line must not show a password in it.
    rememberSecretsIn(value);
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new UsageError(`${file}:${i + 1}: unknown key '${clipText(key)}' (known: ${KEYS.join(', ')})`);
    }
    const quote = value[0] === '"' || value[0] === "'" ? value[0] : null;
    if (quote !== null && (value.length < 2 || !value.endsWith(quote)))
      throw new UsageError(`${file}:${i + 1}: ${key}: the ${quote} that opens the value is never closed`);
    if (quote !== null) value = value.slice(1, -1);
    out.set(key as Key, { value, line: i + 1 });
  }
  return out;
}

/** Where each option was set: its value, the directory a relative path in it is from, and 'FILE:LINE: ' (config file) or '' (command line) for a message. */
type Values = Map<Key, { value: string; base: string; at: string }>;

/**
 * Parses argv (without node and script), merges the config file, validates.
 * Returns 'help' or 'version' when asked; throws UsageError on anything wrong.
 */
export function parseArgs(argv: readonly string[], cwd: string): RunnerOptions | 'help' | 'version' {
  const cli = readArgv(argv);
  if (cli === 'help' || cli === 'version') return cli;
  const { values, configPath } = mergeConfig(cli.flags, cli.configFile, cwd);
  const o = new OptionReader(values, cwd);
  // The checks run in this order: with several wrong values, the first one is reported.
  const state = o.pathOf('state', 'var/state');
  const now = nowOption(o);
  const backlogWarn = backlogWarnOption(o);
  const { keep, resend } = keepOptions(o);
  const cap = capOptions(o);
  const stage = stageOptions(o);
  const { db, dbArgs, dbTimeouts } = dbOptions(o, state);
  return {
    inbox: o.pathOf('inbox', 'var/inbox'),
    state,
    db,
    dbArgs,
    dbTimeouts,
    queueDir: o.pathOf('queue-dir', 'var/queue'),
    now,
    backlogWarn,
    keep: o.get('keep') ?? null,
    keepMs: keep.ms,
    resendAfter: o.get('resend-after') ?? null,
    resendAfterMs: resend.ms,
    ...cap,
    maxRejectRatio: stage.maxRejectRatio,
    memory: stage.memory,
    logLevel: stage.logLevel,
    killAfterMs: stage.killAfterMs,
    maxRunTimeMs: maxRunTimeOption(o),
    config: configPath,
    acceptSettingsChange: o.bool('accept-settings-change'),
    allowUnterminated: o.bool('allow-unterminated'),
    resetCurrentLog: o.bool('reset-current-log'),
    keepDoneMs: stage.keepDoneMs,
    metricsFile: values.has('metrics-file') ? o.pathOf('metrics-file', '') : null,
    ...masterOptions(o),
  };
}

/** The command line's --key values and its --config file; 'help' or 'version' as soon as asked; throws UsageError on an unknown or incomplete option. */
function readArgv(argv: readonly string[]): { flags: Map<Key, string>; configFile: string | null } | 'help' | 'version' {
  const flags = new Map<Key, string>();
  let configFile: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') return 'help';
    if (a === '--version') return 'version';
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument '${clipText(a)}'`);
    const eq = a.indexOf('=');
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    let value: string | undefined = eq < 0 ? undefined : a.slice(eq + 1);
    if (name !== 'config' && !(KEYS as readonly string[]).includes(name)) throw new UsageError(`unknown option '--${clipText(name)}'`);
    if (value === undefined && BOOL_KEYS.has(name as Key)) value = 'yes';
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new UsageError(`option '--${name}' wants a value`);
    }
    if (name === 'config') configFile = value;
    else flags.set(name as Key, value);
  }
  return { flags, configFile };
}

/** The config file's values (if one is given) overridden by the command line's `flags`, and the config file's absolute path. */
function mergeConfig(flags: Map<Key, string>, configFile: string | null, cwd: string): { values: Values; configPath: string | null } {
  const values: Values = new Map();
  let configPath: string | null = null;
  if (configFile !== null) {
    if (configFile === '') throw new UsageError(`config is an empty path ('' is not the current directory)`);
    configPath = path.resolve(cwd, configFile);
    let text: string;
    try {
      text = fs.readFileSync(configPath, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read config file ${configFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    for (const [k, { value, line }] of parseConfig(text, configFile)) values.set(k, { value, base: path.dirname(configPath), at: `${configFile}:${line}: ` });
  }
  for (const [k, v] of flags) values.set(k, { value: v, base: cwd, at: '' });
  return { values, configPath };
}

/** Reads the merged option values: raw, as paths, as switches; messages name where a value was set. */
class OptionReader {
  constructor(
    private readonly values: Values,
    private readonly cwd: string,
  ) {}

  /** The value of `k`, if set. */
  get(k: Key): string | undefined {
    return this.values.get(k)?.value;
  }

  /** `k` as a message names it: after its config file's place when it was set there. */
  named(k: Key): string {
    return `${this.values.get(k)?.at ?? ''}${k}`;
  }

  /** `k` resolved from where it was set (a path key), or `dflt` from the current directory; an empty value is a UsageError. */
  pathOf(k: Key, dflt: string): string {
    const v = this.values.get(k);
    if (v === undefined) return path.resolve(this.cwd, dflt);
    // Not 'inbox is empty', which reads as an inbox without reflogs.
    if (v.value === '') throw new UsageError(`${this.named(k)} is an empty path ('' is not the current directory)`);
    return PATH_KEYS.has(k) ? path.resolve(v.base, v.value) : v.value;
  }

  /** The switch `k`: false when unset; a value other than yes/no is a UsageError. */
  bool(k: Key): boolean {
    const v = this.get(k);
    if (v === undefined) return false;
    const b = parseSwitch(v);
    if (b === null) throw new UsageError(`${this.named(k)} is yes or no (also true/false, 1/0), got '${clipText(v)}'`);
    return b;
  }
}

/** --now, checked as a real time, or null. */
function nowOption(o: OptionReader): string | null {
  const now = o.get('now') ?? null;
  if (now !== null && !isValidTimestamp(now)) throw new UsageError(`${o.named('now')} wants a real time as YYYYMMDDhhmmss, got '${clipText(now)}'`);
  return now;
}

/** --master-name (printable, no spaces; default the host name) and --claim-lease. */
function masterOptions(o: OptionReader): Pick<RunnerOptions, 'masterName' | 'claimLeaseMs'> {
  const masterName = o.get('master-name') ?? os.hostname();
  if (!/^[\x21-\x7e]{1,200}$/.test(masterName))
    throw new UsageError(`${o.named('master-name')} wants a name of 1 to 200 printable ASCII characters without spaces, got '${clipText(masterName)}'`);
  const cl = o.get('claim-lease') ?? '2m';
  const claimLeaseMs = parseDuration(cl);
  if (claimLeaseMs === null) throw new UsageError(`${o.named('claim-lease')} wants a duration like 2m, 90s or seconds, got '${clipText(cl)}'`);
  return { masterName, claimLeaseMs };
}

/** --backlog-warn as a number of URLs. */
function backlogWarnOption(o: OptionReader): number {
  const bw = o.get('backlog-warn') ?? '1000000';
  const backlogWarn = parseGroupedCount(bw);
  if (backlogWarn === null) throw new UsageError(`${o.named('backlog-warn')} wants a number of URLs, got '${clipText(bw)}'`);
  return backlogWarn;
}

/** --keep and --resend-after (filter-url's defaults when unset), each as given and in ms; keep may not be the shorter. */
function keepOptions(o: OptionReader): { keep: { v: string; ms: number }; resend: { v: string; ms: number } } {
  const duration = (k: 'keep' | 'resend-after') => {
    const v = o.get(k) ?? (k === 'keep' ? DEFAULT_KEEP : DEFAULT_RESEND_AFTER);
    const ms = parseDuration(v);
    if (ms === null) throw new UsageError(`${o.named(k)} wants a duration like 90s, 30m, 1h, 10h, 1d or seconds (at most 3650d), got '${clipText(v)}'`);
    return { v, ms };
  };
  const keep = duration('keep');
  const resend = duration('resend-after');
  // The job promises a URL at most once per resend-after; a current_log entry dropped
  // after a shorter keep would let it come back as new and be sent early.
  if (keep.ms < resend.ms) {
    throw new UsageError(
      `keep (${keep.v}) is shorter than resend-after (${resend.v}): a URL unseen for longer than keep would be sent again before resend-after; set keep at least as long`,
    );
  }
  return { keep, resend };
}

/** --max-per-domain (none when unset) and --carry-keep (limit-domains' default when unset). */
function capOptions(o: OptionReader): Pick<RunnerOptions, 'maxPerDomain' | 'carryKeepMs'> {
  const m = o.get('max-per-domain');
  const maxPerDomain = m === undefined ? null : parseGroupedCount(m);
  if (maxPerDomain === 0 || (maxPerDomain === null && m !== undefined) || (maxPerDomain ?? 0) > 2 ** 31) {
    throw new UsageError(`${o.named('max-per-domain')} wants a number of URLs from 1 to 2147483648, got '${clipText(m!)}'`);
  }
  const ck = o.get('carry-keep') ?? DEFAULT_CARRY_KEEP;
  const carryKeepMs = parseDuration(ck);
  if (carryKeepMs === null) throw new UsageError(`${o.named('carry-keep')} wants a duration like 10h, 1d or seconds (at most 3650d), got '${clipText(ck)}'`);
  return { maxPerDomain, carryKeepMs };
}

/** --max-reject-ratio, --memory, --log-level, --kill-after and --keep-done, each checked as its reader would. */
function stageOptions(o: OptionReader): Pick<RunnerOptions, 'maxRejectRatio' | 'memory' | 'logLevel' | 'killAfterMs' | 'keepDoneMs'> {
  const ratio = o.get('max-reject-ratio');
  // Read as analyze-dump reads it: a value it would refuse would fail every run.
  if (ratio !== undefined && parseRatio(ratio) === null) throw ratioError(o.named('max-reject-ratio'), clipText(ratio));
  const memory = o.get('memory');
  const budget = memory === undefined ? 0 : parseBudget(memory);
  if (typeof budget !== 'number') throw new UsageError(`${o.named('memory')} ${budget.error}`);
  const logLevel = o.get('log-level') ?? 'info';
  if (!['debug', 'info', 'warn', 'error', 'silent'].includes(logLevel)) {
    throw new UsageError(`${o.named('log-level')} is one of debug, info, warn, error, silent; got '${clipText(logLevel)}'`);
  }
  const ka = o.get('kill-after') ?? '10s';
  const killAfterMs = parseDuration(ka);
  if (killAfterMs === null || killAfterMs > MAX_KILL_AFTER_MS) {
    throw new UsageError(`${o.named('kill-after')} wants a duration like 5s, 1m or seconds, at most 1d; got '${clipText(ka)}'`);
  }
  const kd = o.get('keep-done');
  const keepDoneMs = kd === undefined ? null : parseDuration(kd);
  if (keepDoneMs === null && kd !== undefined)
    throw new UsageError(`${o.named('keep-done')} wants a duration like 7d, 12h or seconds (at most 3650d), got '${clipText(kd)}'`);
  return { maxRejectRatio: ratio ?? null, memory: memory ?? null, logLevel, killAfterMs, keepDoneMs };
}

/** --max-run-time in ms: a duration above 0, at most a day (50m when unset: an hourly job ends before the next hour's). */
function maxRunTimeOption(o: OptionReader): number {
  const v = o.get('max-run-time') ?? DEFAULT_MAX_RUN_TIME;
  const ms = parseDuration(v);
  if (ms === null || ms === 0 || ms > MAX_KILL_AFTER_MS)
    throw new UsageError(`${o.named('max-run-time')} wants a duration like 50m, 2h or seconds, above 0 and at most 1d; got '${clipText(v)}'`);
  return ms;
}

/** --db (STATE/partner.db by default; a postgres:// URI as it is, a URI-like one that is no PostgreSQL URI refused) and the time-outs, as the stages take them. */
function dbOptions(o: OptionReader, state: string): Pick<RunnerOptions, 'db' | 'dbArgs' | 'dbTimeouts'> {
  const given = o.get('db');
  const problem = given !== undefined && looksLikeUri(given) ? pgUriProblem(given) : null;
  if (problem !== null) throw new UsageError(`${o.named('db')} is not a PostgreSQL URI: ${problem}`);
  const db = given !== undefined ? (isPgUri(given) ? given : o.pathOf('db', '')) : path.join(state, 'partner.db');
  const dbArgs: string[] = [];
  const raw: Record<string, string> = {};
  for (const [k, opt] of [
    ['connect-timeout', 'connectTimeout'],
    ['statement-timeout', 'statementTimeout'],
    ['lock-timeout', 'lockTimeout'],
  ] as const) {
    const v = o.get(k);
    if (v === undefined) continue;
    raw[opt] = v;
    dbArgs.push(`--${k}`, v);
  }
  // Read as the stages read them: a value they would refuse would fail every run.
  return { db, dbArgs, dbTimeouts: timeoutsOf(raw) };
}

/** A switch's value: true for yes/true/1, false for no/false/0 (any case), else null. */
function parseSwitch(v: string): boolean | null {
  const t = v.toLowerCase();
  if (['yes', 'true', '1'].includes(t)) return true;
  if (['no', 'false', '0'].includes(t)) return false;
  return null;
}
