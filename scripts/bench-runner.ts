// The bench's --domains mode: the hourly run through the cron runner
// (scripts/reflog-to-yacobot-queue) with a partner table pre-filled with N synthetic
// domains, for each N of a list, side by side in one run; with --flood also an hour
// whose every line is on a new domain. Reads each stage's peak RSS and time from the
// run's line in runs.jsonl (its summary's peak_rss_mib and ms).
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { DataError, UsageError } from '../src/core/errors.js';
import { BIN_DIR, PROJECT_ROOT as ROOT } from '../src/core/root.js';
import { stageEnv } from '../src/runner/run/pipeline.js';
import { countOption, generateReflog } from './gen-reflog.js';

const RUNNER = path.join(ROOT, 'scripts', 'reflog-to-yacobot-queue');
const ENV = stageEnv({ ...process.env, TZ: 'UTC', LC_ALL: 'C', PATH: `${BIN_DIR}:${process.env.PATH}` });
/** The bench's Yacobots: name and weight; the pre-filled domains are spread over them by weight. */
export const YACOBOTS: readonly [string, number][] = [
  ['yacobot-a', 1],
  ['yacobot-b', 1],
  ['yacobot-c', 2],
];
/** The hours' reflog names: hour 1 builds the state, hour 2 is timed, hour 3 is the flood. */
const HOURS = ['2011072805', '2011072806', '2011072807'] as const;
/** Labels and suffixes of the pre-filled domains; the labels bytewise sorted, none a prefix of another. */
const WORDS = ['auto', 'blog', 'forum', 'games', 'home', 'kino', 'market', 'music', 'news', 'photo', 'shop', 'sport', 'travel', 'video'];
const SUFFIXES = ['com', 'ru', 'net', 'org', 'co.uk', 'com.ru', 'de', 'info', 'com.ua', 'fr', 'narod.ru', 'msk.ru', 'github.io', 'blogspot.com'];

export interface DomainsArgs {
  domains: number[];
  lines: number;
  seed: number;
  memory: string | null;
  repeat: number;
  out: string;
  flood: boolean;
}

function log(msg: string): void {
  process.stderr.write(`bench: ${msg}\n`);
}

/** A commander parser for --domains: a comma-separated list of counts (100k,5M,20M), or a UsageError. */
export function domainsOption(text: string): number[] {
  let list: number[];
  try {
    list = text.split(',').map(countOption('--domains'));
  } catch {
    throw new UsageError(`--domains wants counts separated by commas, such as 100k,5M,20M, not '${text}'`);
  }
  if (new Set(list).size !== list.length) throw new UsageError(`--domains names a count twice: '${text}'`);
  if (list.some((n) => n > 100_000_000)) throw new UsageError(`--domains counts go up to 100M, not '${text}'`);
  return list;
}

/** The reflog of one hour, generated once into `out` and reused: its path. */
export function cachedReflog(out: string, o: { lines: number; hour: number; seed: number; flood?: boolean }): string {
  fs.mkdirSync(out, { recursive: true });
  const file = path.join(out, `reflog-${o.flood ? 'flood-' : ''}${o.lines}-s${o.seed}-h${o.hour}.reflog`);
  if (fs.existsSync(file)) return file;
  const t0 = Date.now();
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  const bad = generateReflog(fd, o);
  fs.closeSync(fd);
  fs.renameSync(tmp, file);
  const mib = (fs.statSync(file).size / 2 ** 20).toFixed(0);
  log(
    `generated ${path.relative(ROOT, file)} (${mib} MiB, ${bad} bad lines = ${((100 * bad) / o.lines).toFixed(2)}%) in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  return file;
}

/** Runs a command of the project (partner-db, the runner) with the bench's environment; its stdout, or exit 1 with its stderr's tail. */
function run(cmd: string, args: string[], what: string): string {
  const r = spawnSync(cmd, args, { env: ENV, encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) {
    const tail = (r.stderr ?? '')
      .split('\n')
      .filter((l) => !l.startsWith('{"level":30'))
      .slice(-20)
      .join('\n');
    process.stderr.write(`bench: ${what} failed (exit ${r.status ?? r.signal}):\n${tail}\n`);
    process.exit(1);
  }
  return r.stdout;
}

/** A fresh partner database at `file` with the bench's Yacobots and no domain, made by partner-db as an operator makes it. */
function emptyPartnerDb(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true });
  run(path.join(BIN_DIR, 'partner-db'), ['--db', file, 'init'], 'partner-db init');
  for (const [name, weight] of YACOBOTS) run(path.join(BIN_DIR, 'partner-db'), ['--db', file, 'add', name, '--weight', String(weight)], 'partner-db add');
}

/** A digest of the database's schema (tables, indexes, triggers): a cached filled database is reused only under the same schema. */
function schemaKey(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare("SELECT type, name, COALESCE(sql, '') AS sql FROM sqlite_master ORDER BY type, name").all();
    return createHash('sha256').update(JSON.stringify(rows)).digest('hex').slice(0, 10);
  } finally {
    db.close();
  }
}

const caseOf = (expr: string, values: readonly string[]) => `CASE ${expr} ${values.map((v, k) => `WHEN ${k} THEN '${v}'`).join(' ')} END`;

/**
 * The INSERT ... SELECT that adds `n` domains (a recursive CTE counts v from 0): a label
 * word, then 8 hex digits spread evenly over 2^32 with a hashed jitter, then a public
 * suffix. The domains come out in bytewise order (the words are sorted and the hex
 * increases within a word), so the primary key's index grows at its end; v % (sum
 * of the weights) picks the Yacobot, so the loads match the weights.
 */
function fillSql(n: number, ids: readonly number[]): string {
  const per = Math.ceil(n / WORDS.length);
  const step = Math.floor(2 ** 32 / per);
  const owners = YACOBOTS.flatMap(([, w], k) => Array<number>(w).fill(ids[k]!));
  return `
WITH RECURSIVE i(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM i WHERE v < ${n - 1}),
  x(v, w, h, s) AS (SELECT v, v / ${per}, (v % ${per}) * ${step} + ((v % ${per}) * 2654435761 % 4294967296) % ${step}, (v * 40503) % 65521 % ${SUFFIXES.length} FROM i)
INSERT INTO partner_domain (domain, yacobot_id, added_at)
SELECT ${caseOf('w', WORDS)} || printf('%08x', h) || '.' || ${caseOf('s', SUFFIXES)},
       CASE v % ${owners.length} ${owners.map((id, k) => `WHEN ${k} THEN ${id}`).join(' ')} END,
       '20110601000000'
  FROM x`;
}

/** Adds `n` synthetic domains to the partner database `file` in one transaction, through SQL (so its triggers, if any, run). */
function fillPartnerDb(file: string, n: number): void {
  const db = new Database(file);
  try {
    // The file is a temporary one, renamed into place when whole: no journal needed.
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -262144');
    const ids = YACOBOTS.map(([name]) => Number((db.prepare('SELECT id FROM yacobot WHERE name = ?').get(name) as { id: number }).id));
    db.transaction(() => db.prepare(fillSql(n, ids)).run())();
    db.pragma('journal_mode = WAL');
  } finally {
    db.close();
  }
}

/** The partner database pre-filled with `n` domains, made once per count and schema in `out`: its path and the seconds its fill took (null: reused). */
export function cachedPartnerDb(out: string, n: number): { file: string; fillSeconds: number | null } {
  const tmp = path.join(out, `partners-${n}.db.tmp`);
  emptyPartnerDb(tmp);
  const file = path.join(out, `partners-${n}-${schemaKey(tmp)}.db`);
  if (fs.existsSync(file)) {
    fs.rmSync(tmp);
    return { file, fillSeconds: null };
  }
  const t0 = process.hrtime.bigint();
  fillPartnerDb(tmp, n);
  const fillSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  fs.renameSync(tmp, file);
  log(
    `filled ${path.relative(ROOT, file)} with ${n.toLocaleString('en')} domains in ${fillSeconds.toFixed(1)} s (${(fs.statSync(file).size / 2 ** 20).toFixed(0)} MiB)`,
  );
  return { file, fillSeconds };
}

/** A runner's working directory: inbox, state (with the partner database) and queue root. */
interface Place {
  dir: string;
  inbox: string;
  state: string;
  queue: string;
}

function place(dir: string): Place {
  return { dir, inbox: path.join(dir, 'inbox'), state: path.join(dir, 'state'), queue: path.join(dir, 'queue') };
}

/** One run of the runner on one hour: its wall seconds and its runs.jsonl line. */
interface HourRun {
  wall: number;
  record: { seconds: number; stages: Record<string, { peak_rss_mib?: number; ms?: number }> };
  digest: string;
}

/**
 * Hands `reflog` to the runner in `p` as hour `hour` (a hard link in the inbox), runs
 * it, and returns its wall time and its line of runs.jsonl. Afterwards the queue
 * files are taken (removed), as the Yacobots take them between hours.
 */
function runHour(p: Place, reflog: string, hour: string, a: DomainsArgs): HourRun {
  fs.linkSync(reflog, path.join(p.inbox, `${hour}.reflog`));
  const args = ['--inbox', p.inbox, '--state', p.state, '--queue-dir', p.queue, '--log-level', 'warn', ...(a.memory ? ['--memory', a.memory] : [])];
  const t0 = process.hrtime.bigint();
  run(RUNNER, args, `the runner on hour ${hour} in ${p.dir}`);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const last = fs.readFileSync(path.join(p.state, 'runs.jsonl'), 'utf8').trimEnd().split('\n').at(-1)!;
  const record = JSON.parse(last) as HourRun['record'] & { run: string; status: string };
  if (record.run !== hour || record.status !== 'ok')
    throw new DataError('BENCH', `runs.jsonl's last line is not hour ${hour} committed: ${last.slice(0, 200)}`);
  const digest = outputDigest(p);
  fs.rmSync(p.queue, { recursive: true, force: true });
  return { wall, record, digest };
}

/** A digest of what a run published: every queue file (name and bytes) and current_log. */
function outputDigest(p: Place): string {
  const h = createHash('sha256');
  const files = fs.existsSync(p.queue) ? (fs.readdirSync(p.queue, { recursive: true }) as string[]).sort() : [];
  for (const f of files) {
    const abs = path.join(p.queue, f);
    if (fs.statSync(abs).isFile()) h.update(`${f}\0`).update(fs.readFileSync(abs));
  }
  h.update('current_log\0').update(fs.readFileSync(path.join(p.state, 'current_log')));
  return h.digest('hex').slice(0, 12);
}

/** The figures of one partner-table size: hour 2 (best wall of the repeats) and the flood hour. */
interface SizeResult {
  n: number;
  fillSeconds: number | null;
  hour2: HourRun[];
  flood: HourRun[];
}

/** Hour 1 through the runner on a copy of the filled database: the state every timed hour starts from. */
function hourOne(work: string, db: string, h1: string, a: DomainsArgs): Place {
  const p = place(path.join(work, 'hour1'));
  fs.rmSync(p.dir, { recursive: true, force: true });
  for (const d of [p.inbox, p.state, p.queue]) fs.mkdirSync(d, { recursive: true });
  fs.copyFileSync(db, path.join(p.state, 'partner.db'));
  const r = runHour(p, h1, HOURS[0], a);
  log(`  hour 1: ${r.wall.toFixed(2)} s`);
  return p;
}

/** Hour 2 (and with --flood hour 3 after it), --repeat times, each on a fresh copy of hour 1's state. */
function benchSize(a: DomainsArgs, n: number, reflogs: string[]): SizeResult {
  const { file, fillSeconds } = cachedPartnerDb(a.out, n);
  const work = path.join(a.out, `domains-${a.lines}`, `n${n}`);
  log(`${n.toLocaleString('en')} partner domains (${path.relative(ROOT, work)})`);
  const base = hourOne(work, file, reflogs[0]!, a);
  const res: SizeResult = { n, fillSeconds, hour2: [], flood: [] };
  for (let r = 0; r < a.repeat; r++) {
    const p = place(path.join(work, `run-${r}`));
    fs.rmSync(p.dir, { recursive: true, force: true });
    fs.cpSync(base.dir, p.dir, { recursive: true });
    res.hour2.push(runHour(p, reflogs[1]!, HOURS[1], a));
    if (a.flood) res.flood.push(runHour(p, reflogs[2]!, HOURS[2], a));
    log(`  run ${r + 1}/${a.repeat}: hour 2 ${res.hour2[r]!.wall.toFixed(2)} s` + (a.flood ? `, flood hour ${res.flood[r]!.wall.toFixed(2)} s` : ''));
    if (r > 0) fs.rmSync(p.dir, { recursive: true, force: true }); // run-0 stays, to look at
  }
  fs.rmSync(base.dir, { recursive: true, force: true });
  return res;
}

const f1 = (x: number | undefined) => (x === undefined ? '-' : x.toFixed(1));
const f2 = (x: number) => x.toFixed(2);
const bestOf = (runs: HourRun[]) => runs.reduce((x, y) => (y.wall < x.wall ? y : x));
/** A stage's highest peak RSS over the runs (MiB), or undefined when its summary has none. */
const peak = (runs: HourRun[], stage: string) => {
  const v = runs.map((r) => r.record.stages[stage]?.peak_rss_mib).filter((x): x is number => typeof x === 'number');
  return v.length ? Math.max(...v) : undefined;
};

/** The output digest of an hour's runs: the same in each, or said otherwise. */
const digestOf = (runs: HourRun[]) => (runs.every((h) => h.digest === runs[0]!.digest) ? runs[0]!.digest : `${runs[0]!.digest} (differs between runs!)`);

/** The report: one row per partner-table size, the ratios of its wall to the smallest size's. */
function report(a: DomainsArgs, results: SizeResult[]): string {
  const stages = [...new Set(results.flatMap((r) => r.hour2.flatMap((h) => Object.keys(h.record.stages))))];
  const lines: string[] = [];
  const p = (s = '') => lines.push(s);
  p(
    `master-server bench: hour 2 (${a.lines.toLocaleString('en')} reflog lines) through the runner, after hour 1, by partner-table size; best wall of ${a.repeat}, highest RSS`,
  );
  p();
  const head = ['N domains', 'fill s', 'run wall s', 'runs.jsonl s', 'x smallest', ...stages.map((s) => `${s} MiB`)];
  if (a.flood) head.push('flood wall s', 'flood upload-domains s', 'flood upload-domains MiB');
  head.push('output digest', ...(a.flood ? ['flood output digest'] : []));
  const rows = results.map((r) => {
    const b = bestOf(r.hour2);
    const row = [
      r.n.toLocaleString('en'),
      r.fillSeconds === null ? 'cached' : f1(r.fillSeconds),
      f2(b.wall),
      f2(b.record.seconds),
      f2(b.wall / bestOf(results[0]!.hour2).wall),
      ...stages.map((s) => f1(peak(r.hour2, s))),
    ];
    if (a.flood) {
      const fb = bestOf(r.flood);
      row.push(f2(fb.wall), f2((fb.record.stages['upload-domains']?.ms ?? NaN) / 1000), f1(peak(r.flood, 'upload-domains')));
    }
    row.push(digestOf(r.hour2), ...(a.flood ? [digestOf(r.flood)] : []));
    return row;
  });
  p(`| ${head.join(' | ')} |`);
  p(`|${head.map(() => ' --- ').join('|')}|`);
  for (const row of rows) p(`| ${row.join(' | ')} |`);
  p();
  p("x smallest: the run wall against the smallest N's; output digest: the hour's queue files and current_log (the same");
  p('at every N when routing does not depend on the table size; compare it across commits for identical output)');
  p(`outputs: ${path.relative(ROOT, path.join(a.out, `domains-${a.lines}`))}`);
  return lines.join('\n') + '\n';
}

/** The --domains mode: for each N, fill (or reuse) the partner database, run hours 1 and 2 (and the flood) through the runner, report. */
export function benchDomains(a: DomainsArgs): void {
  const reflogs = [1, 2].map((hour) => cachedReflog(a.out, { lines: a.lines, hour, seed: a.seed }));
  if (a.flood) reflogs.push(cachedReflog(a.out, { lines: a.lines, hour: 3, seed: a.seed, flood: true }));
  const sizes = [...a.domains].sort((x, y) => x - y);
  const results = sizes.map((n) => benchSize(a, n, reflogs));
  process.stdout.write(report(a, results));
}
