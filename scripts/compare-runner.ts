// The proof that a change of the runner's code changed nothing it does: the same
// scenarios run by two trees (each its own scripts/reflog-to-yacobot-queue and bin/),
// their outputs compared byte for byte. Usage (scripts/compare-runner.sh builds both):
//   node dist/scripts/compare-runner.js --base DIR --new DIR --work DIR [--hours N] [--lines N]
// Inputs, made once with gen-reflog (seeded): N hours of N lines, a --messy and a
// --flood hour, a gzip file, an HTML page, a cut last line, a typo hour, a future hour.
// Scenarios: plain (two invocations), cap (--max-per-domain), faults, replay and
// settings, a crash at each failpoint then a plain rerun, the views (status, explain,
// the metrics file), and two masters on PostgreSQL where its binaries are.
// Compared: every file under var/ (big ones by SHA-256, then by line), the database's
// rows, each exit status, analyze-dump's output and rejects per hour; after clocks,
// pids and paths are normalized: runs.jsonl, last-invocation.json, the metrics, the
// views' JSON and stderr. Prints the differences and exits 1, or one line and exits 0.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { PgCluster, pgBinDir } from '../test/lib/pg.js';
import { countOption, generateReflog } from './gen-reflog.js';

interface Options {
  base: string;
  new: string;
  work: string;
  hours: number;
  lines: number;
  /** Only the scenarios whose names this matches (and no analyze-dump comparison). */
  only?: string;
}

/** What one tree's run of one scenario left, by name: normalized texts or digests. */
type Outputs = Map<string, string>;

/** A tree under comparison: its root (scripts/, bin/, dist/) and a short name. */
interface Tree {
  name: 'base' | 'new';
  root: string;
}

/** The hour of gen-reflog's hour `h` (1: 2011072805) as a run name. */
function hourName(h: number): string {
  const d = new Date(Date.UTC(2011, 6, 28, 5) + (h - 1) * 3_600_000);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}`;
}

/** The inputs, made once in `dir`: file name -> path. */
interface Inputs {
  hours: string[];
  small: string[];
  messy: string;
  flood: string;
  gzip: string;
  html: string;
  cut: string;
  typo: string;
  future: string;
}

function makeInputs(dir: string, o: Options): Inputs {
  fs.mkdirSync(dir, { recursive: true });
  const gen = (name: string, g: Parameters<typeof generateReflog>[1]) => {
    const f = path.join(dir, name);
    const fd = fs.openSync(f, 'w');
    generateReflog(fd, g);
    fs.closeSync(fd);
    return f;
  };
  const small = Math.min(o.lines, 20_000);
  const hours = Array.from({ length: o.hours }, (_, i) => gen(`${hourName(i + 1)}.reflog`, { lines: o.lines, hour: i + 1, seed: 7 }));
  const smallHours = Array.from({ length: 6 }, (_, i) => gen(`small-${hourName(i + 1)}.reflog`, { lines: small, hour: i + 1, seed: 8 }));
  const after = o.hours + 1;
  const messy = gen(`${hourName(after)}.reflog`, { lines: small, hour: after, seed: 7, messy: true });
  const flood = gen(`${hourName(after + 1)}.reflog`, { lines: small, hour: after + 1, seed: 7, flood: true });
  const put = (name: string, data: string | Buffer) => {
    fs.writeFileSync(path.join(dir, name), data);
    return path.join(dir, name);
  };
  const cutText = fs.readFileSync(smallHours[2]!, 'latin1');
  return {
    hours,
    small: smallHours,
    messy,
    flood,
    gzip: put('gzip.reflog', gzipSync(fs.readFileSync(smallHours[1]!))),
    html: put('html.reflog', '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>502</body></html>\n'),
    cut: put('cut.reflog', cutText.slice(0, cutText.lastIndexOf('\n', cutText.length - 2) + 40)),
    typo: put('2011023112.reflog', fs.readFileSync(smallHours[0]!)),
    future: put('2999010100.reflog', fs.readFileSync(smallHours[0]!)),
  };
}

/** Replaces what differs between two runs of the same thing: paths, times, pids, durations. */
function normalizeText(text: string, roots: readonly [string, string][]): string {
  let t = text;
  for (const [from, to] of roots) t = t.split(from).join(to);
  return (
    t
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, 'T')
      .replace(/\breplay-\d{14}/g, 'replay-STAMP')
      .replace(/\b\d+(\.\d+)? s\b/g, 'N s')
      .replace(/\b(pid=|process |pid )\d+/g, '$1P')
      .replace(/@T#\d+/g, '@T#P')
      // A state's identity and its incarnation's token: random 128-bit hex, made anew by each tree.
      .replace(/\b[0-9a-f]{32}\b/g, 'ID')
      // A now from the clock (a run name that is no hour); the hours the scenarios run are of 2011.
      .replace(/\b20[2-9]\d{11}\b/g, 'CLOCK')
  );
}

/** Keys of JSON lines whose values are clocks, durations or pids. */
const CLOCK_KEYS = new Set(['time', 'pid', 'hostname', 'seconds', 'ms', 'run_id', 'start', 'started', 'at', 'created', 'lock_age_seconds', 'peak_rss_mib']);

/** `v` without CLOCK_KEYS (and *_age_seconds) at any depth, its keys sorted. */
function withoutClocks(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutClocks);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) if (!CLOCK_KEYS.has(k) && !k.endsWith('_age_seconds')) out[k] = withoutClocks((v as Record<string, unknown>)[k]);
  return out;
}

/** A JSON text without its clocks (keys sorted); else each line so, a plain one by normalizeText. */
function normalizeLines(text: string, roots: readonly [string, string][]): string {
  if (/^[[{]/.test(text)) {
    try {
      return normalizeText(JSON.stringify(withoutClocks(JSON.parse(text)), null, 1), roots);
    } catch {
      /* lines of their own */
    }
  }
  return text
    .split('\n')
    .map((l) => {
      if (l.startsWith('{') || l.startsWith('[')) {
        try {
          return normalizeText(JSON.stringify(withoutClocks(JSON.parse(l))), roots);
        } catch {
          /* a plain line after all */
        }
      }
      return normalizeText(l, roots);
    })
    .join('\n');
}

/** The metrics text without the values of its clock and duration series. */
function normalizeMetrics(text: string, roots: readonly [string, string][]): string {
  return normalizeText(text.replace(/^(master_server_\w*(timestamp_seconds|age_seconds|run_seconds|run_stage_seconds|held_seconds)\S*) .*$/gm, '$1 X'), roots);
}

/** A big file's digest (kept as `sha256:HEX\0FILE`: compared by the digest, a difference shown from the file). */
function digestOf(file: string): string {
  return `sha256:${createHash('sha256').update(fs.readFileSync(file)).digest('hex')}`;
}

/** Every file under `dir`/var (normalized where it holds clocks), the database's rows, into `out`. */
function collectVar(dir: string, roots: readonly [string, string][], out: Outputs, prefix: string): void {
  const walk = (rel: string) => {
    const abs = path.join(dir, rel);
    if (!fs.existsSync(abs)) return;
    for (const e of fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = path.join(rel, e.name);
      const f = path.join(dir, r);
      const key = `${prefix}${normalizeText(r, roots)}`;
      if (e.isDirectory()) walk(r);
      else if (e.isSymbolicLink()) out.set(key, `-> ${normalizeText(fs.readlinkSync(f), roots)}`);
      else if (/(^|\/)(lock|partner\.db.*)$/.test(r)) continue;
      else if (/(runs\.jsonl|identity\.json|last-invocation\.json|last-run\.json|run\.json|COMMIT)$/.test(r))
        out.set(key, normalizeLines(fs.readFileSync(f, 'utf8'), roots));
      else if (fs.statSync(f).size > 1 << 20) out.set(key, `${digestOf(f)}\0${f}`);
      else out.set(key, fs.readFileSync(f, 'latin1'));
    }
  };
  walk('var');
  const db = path.join(dir, 'var/state/partner.db');
  if (!fs.existsSync(db)) return;
  const d = new Database(db, { readonly: true });
  out.set(`${prefix}db:partner_domain`, JSON.stringify(d.prepare('SELECT domain, yacobot_id, added_at FROM partner_domain ORDER BY domain').raw().all()));
  out.set(`${prefix}db:yacobot`, JSON.stringify(d.prepare('SELECT * FROM yacobot ORDER BY id').raw().all()));
  out.set(
    `${prefix}db:hour_claim`,
    JSON.stringify(d.prepare('SELECT run, digest, master, published_at IS NULL FROM hour_claim ORDER BY run, digest').raw().all()),
  );
  d.close();
}

/** One scenario's run in one tree: its directory, the invocations it makes, what they leave. */
class Play {
  readonly out: Outputs = new Map();
  private step = 0;
  readonly roots: [string, string][];
  constructor(
    readonly tree: Tree,
    readonly dir: string,
  ) {
    this.roots = [
      [dir, 'DIR'],
      [tree.root, 'ROOT'],
    ];
  }

  /** Runs the runner with `args` (and `env`); records its exit status, stderr and (for a subcommand) stdout. */
  run(args: string[] = [], env: Record<string, string> = {}): number | string {
    const r = spawnSync(path.join(this.tree.root, 'scripts/reflog-to-yacobot-queue'), args, {
      cwd: this.dir,
      env: { ...process.env, TZ: 'UTC', LC_ALL: 'C', ...env },
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    // A runner killed at a failpoint may leave its stages a moment: the lock tells when all are gone.
    spawnSync('flock', ['-w', '30', path.join(this.dir, 'var/state/lock'), 'true']);
    const n = String(++this.step).padStart(2, '0');
    const what = [...args.slice(0, 1), ...Object.entries(env).map(([k, v]) => `${k}=${v}`)].join(' ');
    const status = r.status ?? String(r.signal);
    this.out.set(`${n} ${what}: exit`, String(status));
    this.out.set(`${n} ${what}: stderr`, normalizeLines(r.stderr, this.roots));
    if (args[0] === 'status' || args[0] === 'explain') this.out.set(`${n} ${what}: stdout`, normalizeLines(r.stdout, this.roots));
    return status;
  }

  inbox(...files: string[]): void {
    for (const f of files) fs.copyFileSync(f, path.join(this.dir, 'var/inbox', path.basename(f).replace(/^small-/, '')));
  }

  /** Moves `from` (relative to the scenario) to `to`. */
  mv(from: string, to: string): void {
    fs.renameSync(path.join(this.dir, from), path.join(this.dir, to));
  }

  /** What the scenario left: every file under var/, the database's rows, the metrics file. */
  collect(prefix = ''): void {
    collectVar(this.dir, this.roots, this.out, prefix);
    const m = path.join(this.dir, 'metrics.prom');
    if (fs.existsSync(m)) this.out.set(`${prefix}metrics.prom`, normalizeMetrics(fs.readFileSync(m, 'utf8'), this.roots));
  }
}

/** The scenarios: each gets a fresh copy of the template (three Yacobots, an empty inbox). */
function scenarios(inp: Inputs, pg: PgCluster | null): Record<string, (p: Play) => void> {
  const metrics = ['--metrics-file', 'metrics.prom'];
  const s: Record<string, (p: Play) => void> = {
    plain(p) {
      p.inbox(...inp.hours);
      p.run(metrics);
      p.inbox(inp.messy, inp.flood);
      p.run(metrics);
      p.run(['status', '--json']);
      const urls = explainable(p.dir, inp);
      p.run(['explain', '--json', ...urls]);
    },
    cap(p) {
      p.inbox(...inp.hours, inp.messy, inp.flood);
      p.run(['--max-per-domain', '50', '--carry-keep', '2h', ...metrics]);
      p.run(['status', '--json']);
      p.run(['explain', '--json', '--max-per-domain', '50', '--carry-keep', '2h', ...carried(p.dir)]);
    },
    faults(p) {
      p.inbox(inp.small[0]!, inp.gzip);
      p.run();
      for (const [bad, next] of [
        [inp.gzip, inp.html],
        [inp.html, inp.cut],
      ] as const) {
        fs.rmSync(path.join(p.dir, 'var/inbox', path.basename(bad)));
        p.inbox(next);
        p.run();
      }
      p.run(['--allow-unterminated']);
      p.inbox(inp.typo, inp.future);
      p.run();
    },
    replay(p) {
      p.inbox(inp.small[0]!, inp.small[1]!);
      p.run();
      fs.copyFileSync(path.join(p.dir, 'var/state/done', `${hourName(1)}.reflog`), path.join(p.dir, 'var/inbox', `${hourName(1)}.reflog`));
      p.run();
      p.mv(`var/state/done/${hourName(2)}.reflog`, `var/inbox/${hourName(2)}.reflog`);
      p.run();
      p.inbox(inp.small[2]!);
      p.run(['--keep', '2h']);
      p.run(['--keep', '2h', '--accept-settings-change']);
      const cur = path.join(p.dir, 'var/state/current_log');
      fs.truncateSync(cur, Math.floor(fs.statSync(cur).size / 2));
      p.inbox(inp.small[3]!);
      p.run(['--keep', '2h']);
      p.run(['--keep', '2h', '--reset-current-log']);
    },
  };
  for (const step of ['chain', 'claim', 'commit:marker', 'confirm', 'queue:1', 'current_log', 'record', 'reflog', 'uncommit']) {
    s[`crash ${step}`] = (p) => {
      p.inbox(inp.small[0]!, inp.small[1]!);
      p.run([], { REFLOG_RUNNER_FAILPOINT: `*:${step}` });
      p.run();
    };
  }
  s['crash failed:cleanup'] = (p) => {
    p.inbox(inp.small[0]!, inp.html);
    p.run([], { REFLOG_RUNNER_FAILPOINT: '*:failed:cleanup' });
    p.run();
  };
  if (pg !== null) s['two masters'] = (p) => twoMasters(p, inp, pg);
  return s;
}

/** URLs explain is asked about: one sent (the newest queue file's first), one in current_log, one rejected, one new, one invalid. */
function explainable(dir: string, inp: Inputs): string[] {
  const first = (f: string) => fs.readFileSync(f, 'utf8').split('\n', 1)[0]!.split('\t');
  const q = path.join(dir, 'var/queue/1');
  const newest = fs
    .readdirSync(q)
    .filter((f) => f.endsWith('.tsv'))
    .sort()
    .at(-1)!;
  const rejects = path.join(dir, 'var/state/rejects', `${path.basename(inp.hours[0]!, '.reflog')}.tsv`);
  const rejected = fs.existsSync(rejects) ? [first(rejects)[2 + 4] ?? ''] : [];
  return [first(path.join(q, newest))[5]!, first(path.join(dir, 'var/state/current_log'))[5]!, ...rejected, 'http://never-seen.example.org/x', 'not a url'];
}

/** URLs explain is asked about in the cap scenario: the first two in the carry. */
function carried(dir: string): string[] {
  const f = path.join(dir, 'var/state/carry');
  const lines = fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').slice(0, 2) : [];
  return lines.filter((l) => l !== '').map((l) => l.split('\t')[5]!);
}

/** Two masters on one PostgreSQL database: A publishes hours 1-3, B remembers them and publishes hour 4, A remembers hour 4. */
function twoMasters(p: Play, inp: Inputs, pg: PgCluster): void {
  const db = pg.newDatabase();
  p.roots.push([db, 'PGURI']);
  initPartners(p.tree, db);
  const master = (m: string) => ['--db', db, '--master-name', m, '--state', `var/state-${m}`, '--queue-dir', `var/queue-${m}`];
  fs.mkdirSync(path.join(p.dir, 'var/state-a'));
  fs.mkdirSync(path.join(p.dir, 'var/state-b'));
  p.inbox(inp.small[0]!, inp.small[1]!, inp.small[2]!);
  p.run(master('a'));
  p.inbox(inp.small[0]!, inp.small[1]!, inp.small[2]!, inp.small[3]!);
  p.run(master('b'));
  p.inbox(inp.small[3]!);
  p.run(master('a'));
  const name = PgCluster.dbName(db);
  p.out.set('pg:partner_domain', pg.psql(name, 'SELECT domain, yacobot_id, added_at FROM partner_domain ORDER BY domain'));
  p.out.set('pg:hour_claim', pg.psql(name, 'SELECT run, digest, master, published_at IS NULL FROM hour_claim ORDER BY run, digest'));
}

/** analyze-dump of each input hour through `tree`'s bin/, spilling (--memory 16M): its output and rejects, by digest. */
function analyzeDumps(tree: Tree, inp: Inputs, dir: string): Outputs {
  const out: Outputs = new Map();
  fs.mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  for (const f of [...inp.hours, inp.messy, inp.flood]) {
    const name = path.basename(f);
    const rejects = path.join(dir, `${name}.rejects`);
    const r = spawnSync(
      path.join(tree.root, 'bin/analyze-dump'),
      ['--input-name', name, '--rejects', rejects, '--tmp', path.join(dir, 'tmp'), '--memory', '16M'],
      {
        input: fs.readFileSync(f),
        env: { ...process.env, TZ: 'UTC', LC_ALL: 'C' },
        maxBuffer: 1 << 30,
      },
    );
    const stdout = path.join(dir, `${name}.out`);
    fs.writeFileSync(stdout, r.stdout);
    out.set(`${name}: exit`, String(r.status ?? r.signal));
    out.set(`${name}: stdout`, `${digestOf(stdout)}\0${stdout}`);
    out.set(`${name}: rejects`, `${digestOf(rejects)}\0${rejects}`);
    out.set(`${name}: stderr`, normalizeLines(r.stderr.toString('utf8'), [[tree.root, 'ROOT']]));
  }
  return out;
}

/** The first line at which two outputs (texts, or the files of two digests) differ. */
function firstDiff(a: string, b: string): string {
  const text = (s: string) => (s.includes('\0') ? fs.readFileSync(s.slice(s.indexOf('\0') + 1), 'latin1') : s);
  const la = text(a).split('\n');
  const lb = text(b).split('\n');
  for (let i = 0; i < Math.max(la.length, lb.length); i++) {
    if (la[i] === lb[i]) continue;
    const [x, y] = [la[i] ?? '(none)', lb[i] ?? '(none)'];
    let c = 0;
    while (c < x.length && x[c] === y[c]) c++;
    const around = (t: string) => JSON.stringify(t.slice(Math.max(0, c - 150), c + 150));
    return `line ${i + 1}, column ${c + 1}:\n    base: ${around(x)}\n    new:  ${around(y)}`;
  }
  return 'the same lines';
}

/** An output without the file a digest was made of. */
const comparable = (s: string | undefined) => s?.split('\0', 1)[0];

/** The differences between two trees' outputs of one scenario, each as a message. */
function differences(scenario: string, base: Outputs, next: Outputs): string[] {
  const out: string[] = [];
  for (const k of [...new Set([...base.keys(), ...next.keys()])].sort()) {
    const a = base.get(k);
    const b = next.get(k);
    if (comparable(a) === comparable(b)) continue;
    if (a === undefined || b === undefined) out.push(`${scenario}: ${k}: only in ${a === undefined ? 'new' : 'base'}`);
    else out.push(`${scenario}: ${k}: differs at ${firstDiff(a, b)}`);
  }
  return out;
}

/** The template every scenario copies: var/inbox, var/state with partner.db (three Yacobots, weights 1, 1, 2). */
function makeTemplate(tree: Tree, dir: string): void {
  fs.mkdirSync(path.join(dir, 'var/inbox'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'var/state'), { recursive: true });
  initPartners(tree, path.join(dir, 'var/state/partner.db'));
}

/** Creates the partner database `db` with `tree`'s partner-db: three Yacobots, weights 1, 1, 2; throws on a failure. */
function initPartners(tree: Tree, db: string): void {
  const partnerDb = (...args: string[]) => {
    const r = spawnSync(path.join(tree.root, 'bin/partner-db'), ['--db', db, ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`partner-db ${args.join(' ')}: ${r.stderr}`);
  };
  partnerDb('init');
  for (const [n, w] of [
    ['alpha', '1'],
    ['beta', '1'],
    ['gamma', '2'],
  ] as const)
    partnerDb('add', n, '--weight', w);
}

async function compare(o: Options): Promise<number> {
  const t0 = Date.now();
  const trees: Tree[] = [
    { name: 'base', root: path.resolve(o.base) },
    { name: 'new', root: path.resolve(o.new) },
  ];
  const inp = makeInputs(path.join(o.work, 'in'), o);
  const template = path.join(o.work, 'template');
  makeTemplate(trees[1]!, template);
  const pg = pgBinDir() === null ? null : await PgCluster.start();
  const diffs: string[] = [];
  let compared = 0;
  try {
    const chosen = Object.entries(scenarios(inp, pg)).filter(([name]) => o.only === undefined || new RegExp(o.only).test(name));
    for (const [name, play] of chosen) {
      const got = trees.map((t) => {
        const dir = path.join(o.work, t.name, name.replace(/[^\w-]/g, '_'));
        fs.cpSync(template, dir, { recursive: true });
        const p = new Play(t, dir);
        play(p);
        p.collect();
        return p.out;
      });
      compared += got[0]!.size;
      diffs.push(...differences(name, got[0]!, got[1]!));
      process.stderr.write(`compare-runner: ${name}: ${got[0]!.size} outputs, ${diffs.length} difference(s) so far\n`);
    }
    if (o.only === undefined) {
      const ad = trees.map((t) => analyzeDumps(t, inp, path.join(o.work, t.name, 'analyze-dump')));
      compared += ad[0]!.size;
      diffs.push(...differences('analyze-dump', ad[0]!, ad[1]!));
    }
  } finally {
    pg?.remove();
  }
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  for (const d of diffs) process.stdout.write(`${d}\n`);
  const what = `${o.only === undefined ? '' : `scenarios /${o.only}/, `}${o.hours} hour(s) of ${o.lines} lines, ${compared} outputs compared${pg === null ? ' (no PostgreSQL: two masters not run)' : ''}, ${secs} s`;
  process.stdout.write(diffs.length === 0 ? `compare-runner: identical: ${what}\n` : `compare-runner: ${diffs.length} difference(s): ${what}\n`);
  return diffs.length === 0 ? 0 : 1;
}

function main(argv: string[]): Promise<never> {
  return runAdmin(
    'compare-runner',
    (p) =>
      p
        .description("Runs the runner's scenarios with two trees and compares what they leave.")
        .requiredOption('--base <DIR>', 'the tree before the change (built)')
        .requiredOption('--new <DIR>', 'the tree after it (built)')
        .requiredOption('--work <DIR>', 'a scratch directory')
        .option('--hours <N>', 'generated hours of the plain and cap scenarios', intOption('--hours', 1, 1000), 8)
        .option('--lines <N>', 'lines per generated hour', countOption('--lines'), 50_000)
        .option('--only <REGEX>', 'only the scenarios whose names match (to look into a difference)')
        .action(async (o: Options) => {
          if ((await compare(o)) !== 0) process.exit(1);
        }),
    argv,
  );
}

void main(process.argv);
