// npm run bench -- [--lines N] [--memory SIZE] [--repeat R] [--out DIR] [--tmp DIR] [--seed S] [--no-reference] [--no-floor]
// npm run bench -- --domains N[,N...] [--flood] [--lines N] [--memory SIZE] [--repeat R] [--out DIR] [--seed S]
//
// Generates a synthetic reflog for hour 1 and hour 2 (scripts/gen-reflog.ts), runs
// the chain for hour 1 to build current_log and the partner table, then times hour 2 side
// by side in one run:
//   (a) the chain as the cron runner runs it: analyze-dump | group-sum |
//       join-current | filter-url | upload-domains | logsaver;
//   (b) bench/reference.sh: LC_ALL=C sort + join + mawk doing the same step;
//   (c) the floor: analyze-dump, then five Node processes that only copy bytes
//       (bench/copy-stage.mjs) where the five streaming stages would be.
// Each process runs under /usr/bin/time for its peak RSS. Then each stage runs
// alone on the previous stage's output file (best of --repeat), for its own
// throughput. Prints wall seconds, lines/s, per-stage peak RSS and the ratio
// (a)/(b). With PostgreSQL installed, upload-domains alone also runs on a throwaway
// PostgreSQL cluster holding a copy of the same partner database, and the report
// gives its ratio to SQLite. With --domains, instead: hours 1 and 2 through the cron
// runner with the partner table pre-filled with N domains, for each N
// (scripts/bench-runner.ts). Not a test: nothing is asserted. Outputs go to --out (default bench/out/, gitignored).
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Command } from 'commander';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { pathOption } from '../src/cli/stage.js';
import { DataError, UsageError } from '../src/core/errors.js';
import { PIPE_BYTES, PIPESIZE_ADDON } from '../src/core/pipes.js';
import { BIN_DIR, PROJECT_ROOT as ROOT } from '../src/core/root.js';
import { parseBudget } from '../src/core/size.js';
import { countLines } from '../src/core/lines.js';
import { stageEnv } from '../src/runner/run/pipeline.js';
import { shellQuote as q } from '../src/core/errors.js';
import { countOption } from './gen-reflog.js';
import { benchDomains, cachedReflog, domainsOption } from './bench-runner.js';
import { PgCluster, pgSkipReason } from '../test/lib/pg.js';

const BIN = BIN_DIR;
const REFERENCE = path.join(ROOT, 'bench', 'reference.sh');
const COPY_STAGE = path.join(ROOT, 'bench', 'copy-stage.mjs');
const HOUR1_NAME = '2011072805';
const HOUR2_NAME = '2011072806';
const NOW1 = '20110728060000';
const NOW2 = '20110728070000';

interface Args {
  lines: number;
  seed: number;
  memory: string | null;
  repeat: number;
  out: string;
  reference: boolean;
  floor: boolean;
  tmp: string;
  domains: number[] | null;
  flood: boolean;
}

/** The options, or a UsageError (exit 2) naming the bad one. */
function buildProgram(p: Command, run: (a: Args) => Promise<void>): void {
  p.description(
    'Times the hourly step on a synthetic reflog: the chain, as the runner runs it,\n' +
      'against the coreutils reference (bench/reference.sh), side by side; then each\n' +
      'stage alone. Prints a report on stdout (progress on stderr). Not a test:\n' +
      'nothing is asserted.',
  )
    .option('--lines <N>', 'reflog lines per hour: 1000000, 1M, 10M, 500k', countOption('--lines'), 1_000_000)
    // Checked by analyze-dump's own rule, here at once: a budget it refuses (beyond this
    // machine's memory, below 1M) failed only after the reflogs were generated.
    .option('--memory <SIZE>', 'analyze-dump --memory (default: its own)', (v: string) => {
      const budget = parseBudget(v);
      if (typeof budget !== 'number') throw new UsageError(`--memory ${budget.error}`);
      return v;
    })
    .option('--repeat <R>', 'timed runs of hour 2 and of each stage alone; the best is shown', intOption('--repeat', 1, 100), 1)
    .option('--out <DIR>', 'where reflogs and outputs go', path.join(ROOT, 'bench', 'out'))
    // As the stages take it: '' was resolved to the current directory.
    .option('--tmp <DIR>', 'analyze-dump --tmp, upload-domains --tmp and sort -T', (v: string) => pathOption('--tmp', v, 'a directory name'), os.tmpdir())
    .option('--seed <S>', 'seed of the reflog generator', intOption('--seed', 0), 1)
    .option('--no-reference', 'do not time (b), the coreutils reference')
    .option('--no-floor', 'do not time (c), analyze-dump followed by five byte-copying Node processes')
    .option(
      '--domains <N,...>',
      'instead: hour 2 through the cron runner with the partner table pre-filled with N domains, for each N (100k,5M,20M)',
      domainsOption,
    )
    .option('--flood', 'with --domains: then an hour of --lines lines, each on a new domain of its own')
    .action((o: Args) =>
      run({ ...o, memory: o.memory ?? null, out: path.resolve(o.out), tmp: path.resolve(o.tmp), domains: o.domains ?? null, flood: o.flood ?? false }),
    );
}

// The stages get the environment the cron runner gives them (stageEnv), so peak RSS is as in production.
const ENV = stageEnv({ ...process.env, TZ: 'UTC', LC_ALL: 'C', PATH: `${BIN}:${process.env.PATH}` });
/** Wraps a command so /usr/bin/time appends "label elapsed maxrss_kb user sys" to `times`. */
const timed = (times: string, label: string, cmd: string) => `/usr/bin/time -f '${label} %e %M %U %S' -a -o ${q(times)} ${cmd}`;

function sh(script: string, what: string): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync('bash', ['-c', `set -euo pipefail\n${script}`], { env: ENV, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 26 });
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) {
    process.stderr.write(
      `bench: ${what} failed (exit ${r.status}):\n${r.stderr
        .toString()
        .split('\n')
        .filter((l) => !l.startsWith('{"level":30'))
        .slice(-20)
        .join('\n')}\n`,
    );
    process.exit(1);
  }
  return secs;
}

interface Proc {
  label: string;
  elapsed: number;
  rssMiB: number;
  cpu: number;
}

/** One timed run of a whole step: its wall seconds and each of its processes. */
interface Run {
  wall: number;
  procs: Proc[];
}

function readTimes(file: string): Proc[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => /^\S+ [\d.]+ \d+ [\d.]+ [\d.]+$/.test(l))
    .map((l) => {
      const [label, e, m, u, s] = l.split(' ');
      return { label: label!, elapsed: Number(e), rssMiB: Number(m) / 1024, cpu: Number(u) + Number(s) };
    });
}

/** The "ms" of the summary line in a stage's log file, or 0 when there is none. */
function summaryMs(log: string): number {
  const line = fs.existsSync(log)
    ? fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .find((l) => l.includes('"summary":true'))
    : undefined;
  if (!line) return 0;
  try {
    const ms = Number((JSON.parse(line) as { ms?: unknown }).ms);
    return Number.isFinite(ms) ? ms : 0;
  } catch {
    return 0;
  }
}

function ensureReflogs(a: Args): [string, string] {
  return [cachedReflog(a.out, { lines: a.lines, hour: 1, seed: a.seed }), cachedReflog(a.out, { lines: a.lines, hour: 2, seed: a.seed })];
}

function log(msg: string): void {
  process.stderr.write(`bench: ${msg}\n`);
}

/**
 * The seven stages' command lines for one hour on the state in `dir`, in chain
 * order (domains-from-db first): the pipeline and the solo runs use the same ones.
 */
function stageCommands(dir: string, name: string, now: string, a: Args, logLevel = 'warn'): { label: string; cmd: string }[] {
  const mem = a.memory ? ` --memory ${q(a.memory)}` : '';
  const d = (f: string) => q(path.join(dir, f));
  const ll = `--log-level ${logLevel}`;
  return [
    { label: 'domains-from-db', cmd: `domains-from-db ${ll} --db ${d('partner.db')}` },
    { label: 'analyze-dump', cmd: `analyze-dump ${ll}${mem} --tmp ${q(a.tmp)} --rejects ${d('rejects.txt')}` },
    { label: 'group-sum', cmd: `group-sum ${ll}` },
    { label: 'join-current', cmd: `join-current ${ll} --current ${d('current_log')}` },
    { label: 'filter-url', cmd: `filter-url ${ll} --current-out ${d('current_log.next')} --now ${now}` },
    { label: 'upload-domains', cmd: `upload-domains ${ll} --db ${d('partner.db')} --now ${now} --tmp ${q(a.tmp)}` },
    { label: 'logsaver', cmd: `logsaver ${ll} --queue-dir ${d('queues')} --name ${name}` },
  ];
}

/**
 * The chain for one hour, as one bash script (each process under /usr/bin/time when
 * `times`), as the cron runner runs it: the six stages after domains-from-db, whose
 * upload-domains looks the hour's domains up in the database (no --map).
 */
function chainScript(dir: string, reflog: string, name: string, now: string, a: Args, times: string | null): string {
  const [first, ...rest] = stageCommands(dir, name, now, a)
    .slice(1)
    .map(({ label, cmd }) => (times ? timed(times, label, cmd) : cmd));
  const d = (f: string) => q(path.join(dir, f));
  return [`cd ${q(dir)}`, [`${first} < ${q(reflog)}`, ...rest].join(' \\\n| '), `mv ${d('current_log.next')} ${d('current_log')}`].join('\n');
}

/**
 * The floor (c) for one hour: the seven stages with the five streaming ones replaced
 * by Node processes that only copy bytes (bench/copy-stage.mjs, started with the
 * stages' shebang flags). The
 * copies' output goes to `out.tsv` in `dir`: analyze-dump's records, byte for byte.
 */
function floorScript(dir: string, reflog: string, now: string, a: Args, times: string): string {
  const first = stageCommands(dir, HOUR2_NAME, now, a)
    .slice(1, 2)
    .map(({ label, cmd }) => timed(times, label, cmd))[0]!;
  const copies = [1, 2, 3, 4, 5].map((k) => timed(times, `copy-${k}`, `node --single-threaded ${q(COPY_STAGE)}`));
  return [`cd ${q(dir)}`, [`${first} < ${q(reflog)}`, ...copies].join(' \\\n| ') + ' > out.tsv'].join('\n');
}

function referenceScript(dir: string, reflog: string, name: string, now: string, a: Args): string {
  const d = (f: string) => q(path.join(dir, f));
  return `cd ${q(dir)}\n${q(REFERENCE)} ${q(reflog)} ${d('current_log')} ${d('current_log')} ${d('filtered_log')} ${d('domain_map')} ${d('queues')} ${name} ${now} ${q(a.tmp)}`;
}

/** A fresh copy of a state directory. */
function copyState(from: string, to: string): void {
  fs.rmSync(to, { recursive: true, force: true });
  fs.cpSync(from, to, { recursive: true });
}

const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const rate = (lines: number, secs: number) => (secs > 0 ? `${(lines / secs / 1e6).toFixed(2)}M` : '-');

/**
 * upload-domains alone on the solo run's filtered hour with the hour-1 partner database
 * copied into a throwaway PostgreSQL cluster (partner-db copy): best of --repeat.
 */
async function uploadOnPostgres(a: Args, ours1: string, solo: string): Promise<(Proc & { ownMs: number }) | null> {
  const cluster = await PgCluster.start();
  try {
    const db = cluster.newDatabase();
    const dir = path.join(solo, 'pg');
    fs.mkdirSync(dir, { recursive: true });
    const st = path.join(dir, 'times.txt');
    const stageLog = path.join(dir, 'upload-domains.log');
    let best: (Proc & { ownMs: number }) | null = null;
    for (let r = 0; r < a.repeat; r++) {
      fs.rmSync(st, { force: true });
      sh(`partner-db copy --force ${q(path.join(ours1, 'partner.db'))} ${q(db)} > /dev/null`, 'partner-db copy to PostgreSQL');
      const cmd = `upload-domains --log-level info --db ${q(db)} --now ${NOW2} --tmp ${q(a.tmp)}`;
      sh(`${timed(st, 'upload-domains', cmd)} < ${q(path.join(solo, 'f.tsv'))} > /dev/null 2> ${q(stageLog)}`, 'upload-domains on PostgreSQL');
      const x = readTimes(st)[0]!;
      if (!best || x.elapsed < best.elapsed) best = { ...x, ownMs: summaryMs(stageLog) };
    }
    log(`upload-domains on PostgreSQL: best ${f2(best!.elapsed)} s`);
    return best;
  } finally {
    cluster.remove();
  }
}

async function main(a: Args): Promise<void> {
  if (a.domains) return benchDomains({ ...a, domains: a.domains });
  if (a.flood) throw new UsageError('--flood goes with --domains');
  if (!fs.existsSync('/usr/bin/time')) throw new DataError('NO_TIME', 'needs /usr/bin/time (GNU time) for peak RSS');
  const [h1, h2] = ensureReflogs(a);
  const work = path.join(a.out, `run-${a.lines}`);
  fs.rmSync(work, { recursive: true, force: true });
  const ours1 = path.join(work, 'ours-hour1');
  const ref1 = path.join(work, 'ref-hour1');
  fs.mkdirSync(ours1, { recursive: true });
  fs.mkdirSync(ref1, { recursive: true });

  // Hour 1: build the state the timed hour starts from.
  sh(
    [
      `partner-db --db ${q(path.join(ours1, 'partner.db'))} init`,
      ...['yacobot-a 1', 'yacobot-b 1', 'yacobot-c 2'].map((nw) => {
        const [n, w] = nw.split(' ');
        return `partner-db --db ${q(path.join(ours1, 'partner.db'))} add ${n} --weight ${w} > /dev/null`;
      }),
    ].join('\n'),
    'partner-db setup',
  );
  sh(chainScript(ours1, h1, HOUR1_NAME, NOW1, a, null), 'hour 1 (stages)');
  if (a.reference) sh(referenceScript(ref1, h1, HOUR1_NAME, NOW1, a), 'hour 1 (reference)');
  const current1 = countLines(path.join(ours1, 'current_log'));
  log(`hour 1 done: current_log ${current1} records (reference ${a.reference ? countLines(path.join(ref1, 'current_log')) : '-'})`);

  // Hour 2, side by side, alternating.
  const inLines = countLines(h2);
  const oursRuns: Run[] = [];
  const refRuns: Run[] = [];
  const floorRuns: Run[] = [];
  for (let r = 0; r < a.repeat; r++) {
    const od = path.join(work, `ours-hour2-${r}`);
    copyState(ours1, od);
    const ot = path.join(od, 'times.txt');
    const wall = sh(chainScript(od, h2, HOUR2_NAME, NOW2, a, ot), 'hour 2 (stages)');
    oursRuns.push({ wall, procs: readTimes(ot) });
    if (a.reference) {
      const rd = path.join(work, `ref-hour2-${r}`);
      copyState(ref1, rd);
      const rt = path.join(rd, 'times.txt');
      const t0 = process.hrtime.bigint();
      const res = spawnSync('bash', ['-c', referenceScript(rd, h2, HOUR2_NAME, NOW2, a)], {
        env: { ...ENV, BENCH_TIMES: rt },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const rwall = Number(process.hrtime.bigint() - t0) / 1e9;
      if (res.status !== 0) {
        log(`reference failed: ${res.stderr.toString()}`);
        process.exit(1);
      }
      refRuns.push({ wall: rwall, procs: readTimes(rt) });
    }
    if (a.floor) {
      const fd = path.join(work, `floor-hour2-${r}`);
      copyState(ours1, fd);
      const ft = path.join(fd, 'times.txt');
      floorRuns.push({ wall: sh(floorScript(fd, h2, NOW2, a, ft), 'hour 2 (floor)'), procs: readTimes(ft) });
    }
    log(
      `hour 2 run ${r + 1}/${a.repeat}: stages ${f2(wall)} s` +
        (a.reference ? `, reference ${f2(refRuns[r]!.wall)} s` : '') +
        (a.floor ? `, floor ${f2(floorRuns[r]!.wall)} s` : ''),
    );
  }

  // Each stage alone, on the previous stage's output file; --repeat times, each from
  // the hour-1 state (upload-domains changes partner.db), best kept.
  const solo = path.join(work, 'solo');
  // Each stage's input and output file, in chain order; the commands are the pipeline's.
  const files = [
    ['/dev/null', 'domain_map'],
    [h2, 'a.tsv'],
    ['a.tsv', 'g.tsv'],
    ['g.tsv', 'j.tsv'],
    ['j.tsv', 'f.tsv'],
    ['f.tsv', 'r.tsv'],
    ['r.tsv', '/dev/null'],
  ].map((io) => io.map((f) => path.resolve(solo, f)));
  // At info level, for each stage's summary line: its "ms" is the stage's own time, Node's start-up and module loading excluded.
  const soloSteps = stageCommands(solo, HOUR2_NAME, NOW2, a, 'info').map((s, i) => ({ ...s, input: files[i]![0]!, output: files[i]![1]! }));
  const soloIn: Record<string, number> = {};
  const soloBest = new Map<string, Proc & { ownMs: number }>();
  for (let r = 0; r < a.repeat; r++) {
    copyState(ours1, solo);
    const st = path.join(solo, 'times.txt');
    for (const { label, cmd, input, output } of soloSteps) {
      // Counted once (every repeat reads the same); join-current reads two inputs: stdin and current_log.
      soloIn[label] ??= (input === '/dev/null' ? 0 : input === h2 ? inLines : countLines(input)) + (label === 'join-current' ? current1 : 0);
      sh(`${timed(st, label, cmd)} < ${q(input)} > ${q(output)} 2> ${q(path.join(solo, `${label}.log`))}`, `${label} alone`);
    }
    for (const x of readTimes(st)) {
      const b = soloBest.get(x.label);
      if (!b || x.elapsed < b.elapsed) soloBest.set(x.label, { ...x, ownMs: summaryMs(path.join(solo, `${x.label}.log`)) });
    }
  }
  const soloProcs = [...soloBest.values()];
  const pgUpload = pgSkipReason() === null ? await uploadOnPostgres(a, ours1, solo) : null;

  // --- report ----------------------------------------------------------------
  const best = <T extends { wall: number }>(runs: T[]) => runs.reduce((x, y) => (y.wall < x.wall ? y : x));
  const ob = best(oursRuns);
  const rb = a.reference ? best(refRuns) : null;
  const fb = a.floor ? best(floorRuns) : null;
  const lines: string[] = [];
  const p = (s = '') => lines.push(s);
  p(
    `master-server bench: ${inLines.toLocaleString('en')} reflog lines (hour 2), ${os.cpus().length} CPUs, node ${process.version}` +
      (a.memory ? `, analyze-dump --memory ${a.memory}` : ''),
  );
  // Whether the stages could grow their pipes (docs/formats-and-rules.md, "Common behaviour of every stage"): it shows in the figures.
  p(
    `pipes between the stages: ${fs.existsSync(PIPESIZE_ADDON) ? `grown to ${PIPE_BYTES / 1024} KiB by the stages` : '64 KiB (the pipe-size addon was not built)'}`,
  );
  p(`current_log before hour 2: ${current1.toLocaleString('en')} records; best of ${a.repeat} run(s)`);
  p();
  p('hour 2, whole step (pipeline as cron runs it)   wall s   lines/s   peak RSS MiB (max stage)   CPU s');
  const sumCpu = (ps: Proc[]) => ps.reduce((s, x) => s + x.cpu, 0);
  const maxRss = (ps: Proc[]) => Math.max(0, ...ps.map((x) => x.rssMiB));
  /** A whole-step row: the best run's wall, lines/s, largest peak RSS and the CPU of its processes; the wall ends in column 54. */
  const whole = (label: string, r: Run) => {
    const left = `  ${label}`.padEnd(47);
    p(
      `${left}${f2(r.wall).padStart(54 - left.length)}  ${rate(inLines, r.wall).padStart(8)}   ${f1(maxRss(r.procs)).padStart(8)}                  ${f1(sumCpu(r.procs)).padStart(6)}`,
    );
  };
  /** The ratio of `runs` to the reference's runs, best to best and run by run. */
  const ratio = (name: string, runs: Run[], ref: Run) =>
    p(`  ratio ${name}/(b) wall: ${f2(best(runs).wall / ref.wall)}   (each run: ${runs.map((o, i) => f2(o.wall / refRuns[i]!.wall)).join(', ')})`);
  whole('(a) the chain (as the runner)', ob);
  if (rb) whole('(b) coreutils reference (sort+join+mawk)', rb);
  if (fb) whole('(c) floor: analyze-dump, then 5 copying procs', fb);
  if (rb) ratio('(a)', oursRuns, rb);
  if (rb && fb) ratio('(c)', floorRuns, rb);
  p();
  p('per process in the pipeline          peak RSS MiB   CPU s');
  const procRows = (ps: Proc[], prefix = '') => {
    for (const x of ps) p(`  ${`${prefix}${x.label}`.padEnd(34)} ${f1(x.rssMiB).padStart(8)}   ${f2(x.cpu).padStart(6)}`);
  };
  procRows(ob.procs);
  if (rb) procRows(rb.procs);
  if (fb) procRows(fb.procs, 'floor ');
  p();
  p(`each stage alone, file to file, best of ${a.repeat}   lines in     wall s    lines/s   peak RSS MiB   own s   lines/s`);
  for (const x of soloProcs) {
    const n = soloIn[x.label] ?? 0;
    const own = x.ownMs / 1000;
    p(
      `  ${x.label.padEnd(34)} ${n.toLocaleString('en').padStart(10)}  ${f2(x.elapsed).padStart(7)}  ${(n ? rate(n, x.elapsed) : '-').padStart(8)}   ${f1(x.rssMiB).padStart(8)}` +
        `   ${(own > 0 ? f2(own) : '-').padStart(5)}  ${(n && own > 0 ? rate(n, own) : '-').padStart(8)}`,
    );
  }
  p("  (wall: the whole process, ~0.15 s of Node start-up and module loading included; own: the stage's");
  p('  "ms" from its summary line, from its start to its end, the streaming rate)');
  const sqliteUpload = soloBest.get('upload-domains');
  p();
  if (pgUpload && sqliteUpload) {
    p(`upload-domains alone, the same hour and partner database, best of ${a.repeat}   wall s   own s   peak RSS MiB`);
    const row = (label: string, x: Proc & { ownMs: number }) =>
      p(`  ${label.padEnd(64)} ${f2(x.elapsed).padStart(6)}  ${f2(x.ownMs / 1000).padStart(6)}   ${f1(x.rssMiB).padStart(8)}`);
    row('SQLite', sqliteUpload);
    row('PostgreSQL (a throwaway cluster on this machine)', pgUpload);
    p(`  ratio PostgreSQL/SQLite: wall ${f2(pgUpload.elapsed / sqliteUpload.elapsed)}, own ${f2(pgUpload.ownMs / sqliteUpload.ownMs)}`);
  } else p(`upload-domains on PostgreSQL: not measured (${pgSkipReason()})`);
  p();
  p(`outputs: ${path.relative(ROOT, work) || work}`);
  process.stdout.write(lines.join('\n') + '\n');
}

void runAdmin('bench', (p) => buildProgram(p, main));
