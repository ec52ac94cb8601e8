// Fuzzing analyze-dump: arbitrary bytes and mutated reflogs through the real binary.
// Every run must exit 0 (under --max-reject-ratio 1), print no stack trace, write
// well-formed sorted records whose ids are XXH64 of their url, count every line
// (lines_in = records_out + rejected + skipped), list exactly the rejected lines in
// --rejects, and stay under a peak RSS bound. An input of more than one 1 MiB batch
// runs with --threads 1 to 3 (the main thread parsing too) and again with --threads 0:
// the two must give the same records, rejects and counts.
//
//   npm run fuzz                           60 seconds, seed from the clock
//   node dist/scripts/fuzz.js --seconds 600 --seed 42 --max-rss-mb 300
//   node dist/scripts/fuzz.js --iterations 200         200 runs, no time limit
//
// A failing input is saved under fuzz-failures/ with the arguments and the problems.
// test/fuzz.test.ts runs a short seeded pass of the same code in `npm test`.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { BIN_DIR } from '../src/core/root.js';
import { loadUrlHasher } from '../src/core/url.js';
import { jsonLogLine } from '../src/runner/run/stage-log.js';
import { watchPeakRss } from './peak-rss.js';
import { prng } from './prng.js';

const BIN = path.join(BIN_DIR, 'analyze-dump');

type Rnd = () => number;
const int = (r: Rnd, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rnd, xs: readonly T[]): T => xs[int(r, xs.length)]!;

const HOSTS = [
  'example.com',
  'WWW.Example.COM',
  'президент.рф',
  'a.b.co.uk',
  'foo.blogspot.com',
  '192.168.0.1',
  '[::1]',
  'localhost',
  'example.com.',
  'xn--d1abbgf6aiiy.xn--p1ai',
  'faß.de',
];
const PATHS = ['/', '/a/./b/../c', '/%7e/%41', '/путь', '/a b', '', '/x?y=1&utm_source=z#f', '/?' + 'q=1&'.repeat(50), '/..', '/%', '/%zz'];
const TAGS = ['', '', 'v1', 'ü', 'x\ry'];
const TSS = ['20110727200841', '20110727235959', '20120229120000', '20110229120000', '2011072720084', '20111327200841', 'x', ''];
const HITS = ['1', '0', '007', '18446744073709551616', '-1', '1.5', '', 'a', '9'.repeat(31)];
const SPECIAL = [0x09, 0x0a, 0x0d, 0x00, 0xff, 0xc3, 0xe2, 0x80, 0x20, 0x23, 0x25, 0x2f];

function validLine(r: Rnd): string {
  const scheme = pick(r, ['http', 'https', 'HTTP', 'ftp', 'javascript']);
  const port = pick(r, ['', '', ':80', ':443', ':8080', ':99999']);
  const url = `${scheme}://${pick(r, HOSTS)}${port}${pick(r, PATHS)}`;
  const f = ['b', String(int(r, 9)), pick(r, TSS.slice(0, 3)), 'p', url, pick(r, HITS.slice(0, 4))];
  if (r() < 0.7) f.push(pick(r, TAGS.slice(0, 3)));
  return f.join('\t');
}

function junkLine(r: Rnd): string {
  const f = ['b', '1', pick(r, TSS), 'p', `http://${pick(r, HOSTS)}${pick(r, PATHS)}`, pick(r, HITS)];
  const n = int(r, 10);
  return n === 0 ? 'unknown field' : n === 1 ? '' : f.slice(0, 1 + int(r, 9)).join('\t') + (r() < 0.3 ? `\t${pick(r, TAGS)}` : '');
}

function randomBytes(r: Rnd, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = r() < 0.1 ? pick(r, SPECIAL) : int(r, 256);
  return b;
}

/** Byte-level damage: flips, inserted separators and invalid UTF-8, deletions, cuts. */
function mutate(r: Rnd, b: Buffer, count: number): Buffer {
  let buf = Buffer.from(b);
  for (let k = 0; k < count && buf.length > 0; k++) {
    const at = int(r, buf.length);
    switch (int(r, 5)) {
      case 0:
        buf[at] = int(r, 256);
        break;
      case 1:
        buf = Buffer.concat([buf.subarray(0, at), Buffer.from([pick(r, SPECIAL)]), buf.subarray(at)]);
        break;
      case 2:
        buf = Buffer.concat([buf.subarray(0, at), buf.subarray(Math.min(buf.length, at + 1 + int(r, 20)))]);
        break;
      case 3: {
        const len = Math.min(200, buf.length - at);
        buf = Buffer.concat([buf.subarray(0, at), buf.subarray(at, at + len), buf.subarray(at)]);
        break;
      }
      default:
        buf = buf.subarray(0, at); // a cut-off file
    }
  }
  return buf;
}

export interface FuzzCase {
  kind: string;
  bytes: Buffer;
  args: string[];
}

/** One fuzz input of about `size` bytes (more for the long-line kinds) and its options. */
export function genCase(r: Rnd, size: number): FuzzCase {
  const kinds = ['bytes', 'mutated', 'mutated', 'mixed', 'long-line', 'long-url', 'tiny-lines', 'crlf'] as const;
  const kind = pick(r, kinds);
  let bytes: Buffer;
  const lines = (f: () => string) => {
    const out: string[] = [];
    let n = 0;
    while (n < size) {
      const l = f();
      out.push(l);
      n += l.length + 1;
    }
    return out;
  };
  switch (kind) {
    case 'bytes':
      bytes = randomBytes(r, size);
      break;
    case 'mutated':
      bytes = mutate(r, Buffer.from(lines(() => validLine(r)).join('\n') + '\n'), 1 + int(r, Math.max(2, size / 200)));
      break;
    case 'mixed':
      bytes = Buffer.concat(lines(() => (r() < 0.5 ? validLine(r) : junkLine(r))).map((l) => Buffer.from(l + (r() < 0.1 ? '\r\n' : '\n'))));
      if (r() < 0.3) bytes = Buffer.concat([bytes, randomBytes(r, 100)]);
      break;
    case 'long-line': // longer than the line limit (URL limit + 64 KiB): cut, flagged, rejected
      bytes = Buffer.concat([
        Buffer.from(validLine(r) + '\n'),
        Buffer.from(`b\t1\t20110727200841\tp\thttp://example.com/${'a'.repeat(80_000 + int(r, 100_000))}`),
        Buffer.from(r() < 0.5 ? '\t1\n' : ''),
        Buffer.from(validLine(r) + '\n'),
      ]);
      break;
    case 'long-url': {
      const n = 8150 + int(r, 100);
      const q = r() < 0.5 ? 'q'.repeat(n) : 'é'.repeat(n / 3);
      bytes = Buffer.from(`b\t1\t20110727200841\tp\thttp://example.com/?${q}\t1\t\n${validLine(r)}\n`);
      break;
    }
    case 'tiny-lines':
      bytes = Buffer.from(randomBytes(r, size).map((x) => (x % 3 === 0 ? 10 : x % 3 === 1 ? 9 : x)));
      break;
    default:
      bytes = Buffer.from(lines(() => validLine(r)).join('\r\n'));
  }
  const args = ['--max-reject-ratio', '1', '--rejects', 'rejects'];
  if (r() < 0.2) args.push('--memory', '1M');
  if (r() < 0.2) args.push('--drop-params', pick(r, ['utm_*,q', '_,?,*x*', 'a[b],.']));
  if (r() < 0.2) args.push('--sort-query');
  if (r() < 0.1) args.push('--domain-mode', 'host');
  if (r() < 0.1) args.push('--max-url-bytes', String(16 + int(r, 200)));
  return { kind, bytes, args };
}

export interface RunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Peak resident set (VmHWM) seen while it ran, in KiB; 0 where /proc is missing. */
  peakKb: number;
  rejects: Buffer;
  leftovers: string[];
}

/** Runs analyze-dump on `bytes` in a fresh directory (its --tmp inside it), watching its peak RSS. */
export async function runCase(c: FuzzCase, baseDir: string, timeoutMs = 120_000): Promise<RunResult> {
  const dir = fs.mkdtempSync(path.join(baseDir, 'case-'));
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const child = spawn(BIN, [...c.args, '--tmp', tmp], {
    cwd: dir,
    // Workers under --memory 1M (so they spill too): their assumed cost left out of the check.
    env: { ...process.env, TZ: 'UTC', LC_ALL: 'C', MASTER_SERVER_WORKER_BYTES: '0' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d));
  child.stderr.on('data', (d: Buffer) => err.push(d));
  child.stdin.on('error', () => undefined); // the stage may stop reading early; that is checked below
  child.stdin.end(c.bytes);
  const rss = watchPeakRss(child.pid);
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (code, sig) => resolve([code, sig])));
  rss.stop();
  clearTimeout(killer);
  const rejFile = path.join(dir, 'rejects');
  const rejects = fs.existsSync(rejFile) ? fs.readFileSync(rejFile) : Buffer.alloc(0);
  const leftovers = fs.readdirSync(tmp);
  fs.rmSync(dir, { recursive: true, force: true });
  return { status, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), peakKb: rss.kb, rejects, leftovers };
}

/** Lines as the stages count them: every LF ends one, and a last line without LF counts. */
export function lineCount(buf: Uint8Array): number {
  let n = 0;
  for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++;
  return buf.length > 0 && buf[buf.length - 1] !== 10 ? n + 1 : n;
}

const RECORD_RE = /^[0-9a-f]{16}\t\d{14}\t[^\t\r]*\t\d+\t[^\t\r ]+\thttps?:\/\/[\x21-\x7e]+$/;

/** Everything wrong with one run, as messages (empty: the run was fine). */
export function problems(c: FuzzCase, r: RunResult, hash: (url: string) => string, maxRssKb: number): string[] {
  const p: string[] = [];
  if (r.signal) p.push(`killed by ${r.signal} (hang?)`);
  if (r.status !== 0) p.push(`exit status ${r.status}: ${r.stderr.split('\n')[0]}`);
  if (/^\s+at .+:\d+:\d+\)?$/m.test(r.stderr)) p.push('stack trace in stderr');
  if (maxRssKb > 0 && r.peakKb > maxRssKb) p.push(`peak RSS ${r.peakKb} KiB > ${maxRssKb} KiB`);
  if (r.leftovers.length) p.push(`spill files left in --tmp: ${r.leftovers.join(' ')}`);
  let summary: Record<string, unknown> | null = null;
  for (const l of r.stderr.split('\n')) {
    if (!l.startsWith('{')) continue;
    const o = jsonLogLine(l);
    if (o === null) p.push(`stderr line is not JSON: ${l.slice(0, 80)}`);
    else if (o.summary) summary = o;
  }
  if (!summary) return [...p, 'no summary line'];
  const out = r.stdout === '' ? [] : r.stdout.endsWith('\n') ? r.stdout.slice(0, -1).split('\n') : ['(no final LF)'];
  let prev = '';
  for (const l of out) {
    if (!RECORD_RE.test(l)) {
      p.push(`malformed output line: ${JSON.stringify(l.slice(0, 120))}`);
      break;
    }
    const f = l.split('\t');
    if (hash(f[5]!) !== f[0]) p.push(`id ${f[0]} is not XXH64 of ${f[5]!.slice(0, 80)}`);
    const key = l.slice(0, 31);
    if (key < prev) p.push(`not sorted: ${prev} before ${key}`);
    prev = key;
  }
  const n = (k: string) => Number(summary![k]);
  const lines = lineCount(c.bytes);
  if (n('lines_in') !== lines) p.push(`lines_in ${n('lines_in')} but the input has ${lines} lines`);
  if (n('records_out') !== out.length) p.push(`records_out ${n('records_out')} but ${out.length} lines out`);
  if (n('records_out') + n('rejected') + n('skipped') !== n('lines_in')) p.push('records_out + rejected + skipped != lines_in');
  if (lineCount(r.rejects) !== n('rejected')) p.push(`rejects file has ${lineCount(r.rejects)} lines, rejected = ${n('rejected')}`);
  let last = 0;
  for (const l of r.rejects.toString('latin1').split('\n').slice(0, -1)) {
    const no = Number(l.slice(0, l.indexOf('\t')));
    if (!(no > last && no <= lines) || l.split('\t').length < 3) {
      p.push(`bad rejects line: ${JSON.stringify(l.slice(0, 80))}`);
      break;
    }
    last = no;
  }
  return p;
}

/** The case with `--threads n` in place of any it had. */
export function withThreads(c: FuzzCase, n: number): FuzzCase {
  const args: string[] = [];
  for (let i = 0; i < c.args.length; i++) {
    if (c.args[i] === '--threads') i++;
    else args.push(c.args[i]!);
  }
  return { ...c, args: [...args, '--threads', String(n)] };
}

/**
 * The summary's fields but its timing, peak RSS and sort_runs: what must not depend on the threads.
 * (Where a spill falls depends on where the batches end, which follows how the pipe's
 * reads happened to fall: one input gave 27 runs and 28 with the same --threads.)
 */
function summaryCounts(stderr: string): string {
  const l = stderr.split('\n').find((x) => x.startsWith('{') && jsonLogLine(x)?.summary);
  if (!l) return '';
  const { ms: _ms, time: _time, pid: _pid, sort_runs: _runs, peak_rss_mib: _rss, ...rest } = jsonLogLine(l)!;
  return JSON.stringify(rest);
}

/** Where two runs of one input with other --threads differ (empty: the same records, rejects and counts). */
export function differences(a: RunResult, b: RunResult): string[] {
  const p: string[] = [];
  if (a.status !== b.status) p.push(`exit status ${a.status} against ${b.status}`);
  if (a.stdout !== b.stdout) p.push('records differ');
  if (!a.rejects.equals(b.rejects)) p.push('rejects differ');
  const ca = summaryCounts(a.stderr);
  const cb = summaryCounts(b.stderr);
  if (ca !== cb) p.push(`summaries differ: ${ca} against ${cb}`);
  return p;
}

interface FuzzOptions {
  iterations?: number;
  seconds?: number;
  seed?: number;
  maxRssMb: number;
  maxSize: number;
}

async function main(o: FuzzOptions): Promise<void> {
  const iterations = o.iterations ?? Infinity;
  // --iterations alone means that many runs, however long they take.
  const seconds = o.seconds ?? (iterations === Infinity ? 60 : Infinity);
  const seed = o.seed ?? Date.now() % 1_000_000;
  const maxRssKb = o.maxRssMb * 1024;
  const maxSize = o.maxSize;
  const hash = await loadUrlHasher();
  const r = prng(seed);
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-fuzz-'));
  const deadline = Date.now() + seconds * 1000;
  const byKind: Record<string, number> = {};
  let runs = 0;
  let bytes = 0;
  let peak = 0;
  let failures = 0;
  console.log(
    `fuzz: seed ${seed}, ${seconds === Infinity ? 'no time limit' : `${seconds} s`}, max ${iterations} runs, inputs up to ${maxSize} bytes (about one in 7 up to 8 times that), RSS bound ${maxRssKb / 1024} MiB`,
  );
  // Big inputs now and then: the memory bound matters there.
  while (Date.now() < deadline && runs < iterations) {
    // Several 1 MiB batches now and then: worker threads start only past the first.
    const size = r() < 0.05 ? maxSize * 8 : r() < 0.1 ? maxSize * (2 + int(r, 4)) : 1 + int(r, maxSize);
    let c = genCase(r, size);
    // Worker threads start past the first batch (a smaller input is parsed inline); one
    // worker most often, as then the main thread parses every other batch or so.
    const threaded = c.bytes.length > 1 << 20;
    if (threaded) c = withThreads(c, pick(r, [1, 1, 2, 3]));
    const res = await runCase(c, base);
    runs++;
    bytes += c.bytes.length;
    peak = Math.max(peak, res.peakKb);
    byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
    const p = problems(c, res, hash, maxRssKb);
    if (threaded && p.length === 0) {
      const alone = withThreads(c, 0);
      const again = await runCase(alone, base);
      p.push(...problems(alone, again, hash, maxRssKb).map((x) => `${x} (--threads 0)`), ...differences(res, again).map((d) => `${d} with --threads 0`));
    }
    if (p.length) {
      failures++;
      const dir = path.join(process.cwd(), 'fuzz-failures', `seed${seed}-run${runs}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'stdin'), c.bytes);
      fs.writeFileSync(path.join(dir, 'args'), c.args.join('\n') + '\n');
      fs.writeFileSync(path.join(dir, 'problems'), p.join('\n') + '\n' + res.stderr);
      console.log(`FAIL run ${runs} (${c.kind}, ${c.bytes.length} bytes): ${p.join('; ')} -> ${dir}`);
    }
  }
  fs.rmSync(base, { recursive: true, force: true });
  console.log(
    `fuzz: ${runs} runs, ${(bytes / 1048576).toFixed(1)} MiB in, peak RSS ${(peak / 1024).toFixed(0)} MiB, ` +
      `${failures} failing; by kind ${JSON.stringify(byKind)}`,
  );
  process.exit(failures ? 1 : 0);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  void runAdmin('fuzz', (p) =>
    p
      .description('Fuzzes analyze-dump with random and mutated reflogs; exit 1 if any run fails a check.')
      .option('--seconds <S>', 'stop after S seconds (default 60, none with --iterations alone)', intOption('--seconds', 1))
      .option('--iterations <N>', 'stop after N runs', intOption('--iterations', 1))
      .option('--seed <S>', 'seed (default: from the clock; printed first)', intOption('--seed', 0))
      .option('--max-rss-mb <M>', 'peak RSS bound of each run, MiB', intOption('--max-rss-mb', 1), 400)
      .option(
        '--max-size <BYTES>',
        'inputs up to this size, bytes, but for about one run in 7: 2 to 5 times it (one in 10), 8 times it (one in 20)',
        intOption('--max-size', 1),
        1 << 20,
      )
      .action((o: FuzzOptions) => main(o)),
  );
}
