// Long work reports progress on stderr (SPEC "Runs"): the runner's info line every
// 10 s (MASTER_SERVER_PROGRESS_MS here) with the stage, the reflog's lines read and their
// share of its bytes; a terminal line on a TTY; the stages' own progress lines, which the
// runner reads; the re-key's. Nothing on stdout; --log-level warn silences it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BIN, RUNNER, runBin, testEnv } from './lib/run.js';
import { freshBig, sub } from './lib/runner.js';
import { generateReflog } from '../scripts/gen-reflog.js';
import { RunProgress } from '../src/runner/run/progress.js';
import { sayTo } from '../src/runner/say.js';
import { rekeyLog } from '../src/runner/run/rekey-log.js';
import { loadUrlHash } from '../src/core/url.js';
import { progressEveryMs } from '../src/cli/progress.js';

// Short enough that a fast machine's run of 60k lines still gets lines while analyze-dump
// reads (at 400 ms it had none there, and the run's only lines came before and after).
const EVERY = 100;

/** Runs the cron runner in `dir` with `args`; its exit status, stdout and stderr. */
function runnerOut(dir: string, args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(RUNNER, args, { cwd: dir, env: testEnv({ MASTER_SERVER_PROGRESS_MS: String(EVERY), ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The JSON lines of `text` whose msg is `msg`. */
function logLines(text: string, msg: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((o) => o.msg === msg);
}

test('progressEveryMs: 10 s, or MASTER_SERVER_PROGRESS_MS when it is a positive count', () => {
  assert.equal(progressEveryMs({}), 10_000);
  assert.equal(progressEveryMs({ MASTER_SERVER_PROGRESS_MS: '250' }), 250);
  for (const bad of ['0', '-5', '1e3', 'soon', '']) assert.equal(progressEveryMs({ MASTER_SERVER_PROGRESS_MS: bad }), 10_000, bad);
});

test('a run logs progress at info every interval: stage, lines read, share of the bytes, elapsed; nothing on stdout', async () => {
  const dir = freshBig(60_000);
  const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
  const size = fs.statSync(reflog).size;
  const r = await runnerOut(dir, ['--now', '20110728070000']);
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /progress/);
  const lines = logLines(r.stderr, 'progress');
  assert.ok(lines.length >= 2, `progress lines: ${lines.length}\n${r.stderr}`);
  const start = logLines(r.stderr, 'run start')[0]!;
  const end = logLines(r.stderr, 'run committed')[0]!;
  // Never longer between two lines than the interval and the timer's own step (plus a loaded machine's slack).
  let last = start.time as number;
  for (const l of lines) {
    assert.ok((l.time as number) - last <= 2 * EVERY + 2100, `a gap of ${(l.time as number) - last} ms`);
    last = l.time as number;
  }
  assert.ok((end.time as number) - last <= 2 * EVERY + 2100 + 3000, 'the last line shortly before the commit');
  const all = lines.map((l) => l.progress as Record<string, unknown>);
  for (const x of all.filter((y) => y.stage === 'commit')) assert.equal(typeof x.step, 'string', 'the commit names its step');
  const p = all.filter((x) => x.stage !== 'commit');
  for (const x of p) {
    assert.equal(x.run, '2011072806');
    assert.equal(typeof x.elapsed_s, 'number');
    assert.equal(x.bytes, size);
    if (x.stage !== null) assert.ok(['analyze-dump', 'group-sum', 'join-current', 'filter-url', 'upload-domains', 'logsaver'].includes(x.stage as string));
  }
  const read = p.filter((x) => typeof x.lines_read === 'number').map((x) => x.lines_read as number);
  assert.ok(read.length > 0, 'analyze-dump said how many lines it read');
  assert.deepEqual(
    read,
    [...read].sort((a, b) => a - b),
    'lines read only grow',
  );
  assert.ok(read.at(-1)! <= 60_001);
  const after = p.filter((x) => x.read_percent === 100);
  for (const x of after) assert.notEqual(x.phase, 'reading', 'once read whole, it says what goes on');
});

test('--log-level warn: no progress line, no terminal line', async () => {
  const dir = freshBig(60_000);
  const r = await runnerOut(dir, ['--now', '20110728070000', '--log-level', 'warn']);
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /progress|\r/);
});

const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

test('on a terminal: one line on stderr, redrawn in place and cleared at the end; stdout has none of it', { skip: !hasScript && 'no script(1)' }, () => {
  const dir = freshBig(60_000);
  const typescript = path.join(dir, 'typescript');
  const out = path.join(dir, 'stdout');
  const cmd = `${RUNNER} --now 20110728070000 > ${out}`;
  const r = spawnSync('script', ['-qec', cmd, typescript], { cwd: dir, env: testEnv({ MASTER_SERVER_PROGRESS_MS: String(EVERY) }), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const tty = fs.readFileSync(typescript, 'utf8');
  assert.match(tty, /\r\x1b\[K2011072806: analyze-dump[^\r\n]*, \d+ s/);
  const rest = tty.slice(tty.lastIndexOf('\r\x1b[K2011072806: ') + 1);
  const cleared = rest.indexOf('\r\x1b[K');
  assert.ok(cleared >= 0 && cleared < rest.indexOf('reflog-to-yacobot-queue: 2011072806: 60001 lines'), 'the line is cleared before the summary');
  assert.doesNotMatch(fs.readFileSync(out, 'utf8'), /\r|2011072806: analyze-dump/);
});

test('a stage logs its counts so far every interval (nested under progress); its output is unchanged', () => {
  const dir = sub('progress-stage-');
  const reflog = path.join(dir, 'h.reflog');
  const fd = fs.openSync(reflog, 'w');
  generateReflog(fd, { lines: 60_000, hour: 1, seed: 5 });
  fs.closeSync(fd);
  const args = [reflog, '--tmp', dir];
  const quiet = runBin('analyze-dump', args, '', dir, { MASTER_SERVER_PROGRESS_MS: '1000000' });
  const often = runBin('analyze-dump', args, '', dir, { MASTER_SERVER_PROGRESS_MS: '20' });
  assert.equal(often.status, 0, often.stderr);
  assert.equal(often.stdout, quiet.stdout);
  const lines = logLines(often.stderr, 'progress');
  assert.ok(lines.length >= 1, often.stderr);
  for (const l of lines) {
    assert.equal(l.stage, 'analyze-dump');
    assert.equal(l.assigned_by_us, undefined, 'no count at the top level, where the runner looks for commits');
    const p = l.progress as Record<string, unknown>;
    for (const k of ['elapsed_s', 'lines_in', 'bytes_in', 'bytes_out']) assert.equal(typeof p[k], 'number', k);
  }
  assert.equal(logLines(quiet.stderr, 'progress').length, 0);
  assert.ok(fs.existsSync(BIN));
});

test('RunProgress reads the stages as their stderr goes by: lines cut anywhere, the phase after the read, the commit', () => {
  const p = new RunProgress('R', sayTo(null));
  p.size = 1000;
  let at = 400;
  p.read = () => at;
  p.chain(['analyze-dump', 'group-sum', 'upload-domains']);
  const line = (o: object) => `${JSON.stringify(o)}\n`;
  const text = line({ level: 30, progress: { lines_in: 123, bytes_out: 0 }, msg: 'progress' }) + 'plain words\n';
  for (let i = 0; i < text.length; i += 7) p.feed(0, Buffer.from(text.slice(i, i + 7)));
  let n = p.now();
  assert.deepEqual([n.fields.stage, n.fields.phase, n.fields.lines_read, n.fields.read_percent], ['analyze-dump', 'reading', 123, 40]);
  assert.match(n.text, /^R: analyze-dump: 123 lines, 0\.0 MiB of 0\.0 MiB \(40%\)$/);
  at = 1000;
  assert.equal(p.now().fields.phase, 'sorting');
  p.feed(0, Buffer.from(line({ level: 30, progress: { lines_in: 200, bytes_out: 10 }, msg: 'progress' })));
  assert.equal(p.now().fields.phase, 'writing');
  p.feed(0, Buffer.from(line({ level: 30, summary: true, lines_in: 200, msg: 'summary' })));
  p.feed(1, Buffer.from(line({ level: 30, summary: true, records_in: 190, msg: 'summary' })));
  p.feed(2, Buffer.from(line({ level: 30, progress: { records_in: 50 }, msg: 'progress' })));
  n = p.now();
  assert.deepEqual(
    [n.fields.stage, n.fields.phase, n.fields.stages],
    ['upload-domains', 'running', { 'analyze-dump': 200, 'group-sum': 190, 'upload-domains': 50 }],
  );
  p.feed(2, Buffer.from(line({ level: 30, committing: 7, msg: 'committing new domains' })));
  n = p.now();
  assert.deepEqual([n.fields.phase, n.text], ['committing', 'R: upload-domains: committing 7 new domains']);
  p.feed(2, Buffer.from(line({ level: 30, assigned_by_us: 7, msg: 'new domains committed' })));
  assert.equal(p.now().fields.phase, 'running');
  p.step = 'publish:queue';
  assert.deepEqual(p.now(), { fields: { run: 'R', stage: 'commit', step: 'publish:queue' }, text: 'R: committing (publish:queue)' });
});

test('the re-key says how far it got, once per batch of entries read and per chunk written', async () => {
  const dir = sub('progress-rekey-');
  const hash = await loadUrlHash();
  const n = 140_000;
  const rows: string[] = [];
  for (let i = 0; i < n; i++) {
    const url = `http://h${i % 97}.com/p${i}`;
    rows.push([hash(url).toString(16).padStart(16, '0'), '20110728050000', '', '1', `h${i % 97}.com`, url].join('\t'));
  }
  rows.sort();
  const input = path.join(dir, 'current_log');
  fs.writeFileSync(input, rows.join('\n') + '\n');
  const ticks: [string, number][] = [];
  const c = await rekeyLog(input, path.join(dir, 'out'), new Map(), hash, 1 << 20, dir, 'current_log', (step, urls) => ticks.push([step, urls]));
  assert.equal(c.urls, n);
  const reading = ticks.filter(([s]) => s === 'reading').map(([, u]) => u);
  assert.deepEqual(reading, [65_536, 131_072]);
  const writing = ticks.filter(([s]) => s === 'writing').map(([, u]) => u);
  assert.ok(writing.length >= 2 && writing.at(-1)! < n && writing.at(-1)! > 0, `${writing}`);
  const p = new RunProgress('R', sayTo(null));
  p.rekey = { file: 'current_log', step: 'reading', urls: 65_536 };
  assert.equal(p.now().text, 'R: re-keying current_log: 65,536 URLs read');
});

test('partner-db import and copy say how far they got on stderr, as plain lines off a terminal; stdout keeps its one answer', () => {
  const dir = sub('progress-admin-');
  const db = path.join(dir, 'a.db');
  const csv = path.join(dir, 'd.csv');
  fs.writeFileSync(csv, Array.from({ length: 25_000 }, (_, i) => `d${i}.com,1\n`).join(''));
  const env = testEnv({ MASTER_SERVER_PROGRESS_MS: '1' });
  const pdb = (...args: string[]) => spawnSync(path.join(BIN, 'partner-db'), args, { cwd: dir, env, encoding: 'utf8' });
  assert.equal(pdb('--db', db, 'init').status, 0);
  assert.equal(pdb('--db', db, 'add', 'y1').status, 0);
  const imp = pdb('--db', db, 'import', csv);
  assert.equal(imp.status, 0, imp.stderr);
  assert.equal(imp.stdout, `imported 25000 domain(s) from ${csv}: 25000 new, 0 moved, 0 unchanged\n`);
  const said = imp.stderr.split('\n').filter(Boolean);
  // First the reading of the file (every 4096 rows), then the writing.
  const reading = said.filter((l) => l.includes(': reading '));
  assert.ok(reading.length >= 2, imp.stderr);
  for (const l of reading) assert.match(l, /^partner-db: import: reading \S+d\.csv: [\d,]+ of 313,890 bytes \(\d+%\), \d+ s$/);
  assert.ok(
    reading.some((l) => !/ \(0%\)/.test(l)),
    'the reading goes on past its start',
  );
  const writing = said.slice(reading.length);
  assert.ok(writing.length >= 2, imp.stderr);
  for (const l of writing) assert.match(l, /^partner-db: import: [\d,]+ of 25,000 domains \(\d+%\), \d+ s$/);
  const cp = pdb('copy', db, path.join(dir, 'b.db'));
  assert.equal(cp.status, 0, cp.stderr);
  assert.match(cp.stdout, /^copied 1 Yacobot\(s\) and 25000 domain\(s\) from /);
  const copied = cp.stderr.split('\n').filter(Boolean);
  for (const l of copied) assert.match(l, /^partner-db: copy: [\d,]+ of 25,000 domains \(\d+%\), \d+ s$/);
  assert.ok(
    copied.some((l) => l.startsWith('partner-db: copy: 20,000 of 25,000 domains (80%)')),
    cp.stderr,
  );
  const quiet = spawnSync(path.join(BIN, 'partner-db'), ['copy', '--force', db, path.join(dir, 'b.db')], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  assert.equal(quiet.stderr, '', 'nothing before 10 s');
});
