// A short, seeded fuzz pass over analyze-dump (the long one is `npm run fuzz`):
// arbitrary bytes, mutated and mixed reflogs, over-long lines and URLs, CRLF files,
// spilling sorts; a few MB in all. See scripts/fuzz.ts for what each run must satisfy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { loadUrlHasher } from '../src/core/url.js';
import { differences, genCase, lineCount, problems, runCase, withThreads, type FuzzCase } from '../scripts/fuzz.js';
import { prng } from '../scripts/prng.js';
import { scratch } from './lib/run.js';

/** Peak RSS bound for these inputs: the Node baseline plus --memory plus slack. */
const MAX_RSS_KB = 300 * 1024;

test('fuzz: 28 seeded inputs (a few MB) through analyze-dump: no crash, no hang, counts add up, memory bounded', async () => {
  const hash = await loadUrlHasher();
  const base = scratch('ms-fuzz-');
  const r = prng(6);
  const failures: string[] = [];
  const kinds = new Set<string>();
  let bytes = 0;
  for (let i = 0; i < 28; i++) {
    const c = genCase(r, 1 + Math.floor(r() * 140_000));
    kinds.add(c.kind);
    bytes += c.bytes.length;
    const res = await runCase(c, base);
    const p = problems(c, res, hash, MAX_RSS_KB);
    if (p.length) failures.push(`case ${i} (${c.kind}, ${c.args.join(' ')}): ${p.join('; ')}`);
  }
  assert.deepEqual(failures, []);
  assert.ok(kinds.size >= 6, `generator covers the input kinds: ${[...kinds].join(' ')}`);
  assert.ok(bytes > 1_500_000, `${bytes} bytes fuzzed`);
});

test('fuzz: a 24 MB input with a 16 MB line and no LF anywhere stays within the memory bound', async () => {
  const hash = await loadUrlHasher();
  const base = scratch('ms-fuzz-');
  const big = Buffer.alloc(24 << 20, 0x61);
  big.write('b\t1\t20110727200841\tp\thttp://x.com/', 8 << 20);
  const c: FuzzCase = { kind: 'huge', bytes: big, args: ['--max-reject-ratio', '1', '--rejects', 'rejects', '--memory', '4M'] };
  assert.equal(lineCount(big), 1);
  const res = await runCase(c, base);
  assert.deepEqual(problems(c, res, hash, MAX_RSS_KB), []);
  if (fs.existsSync('/proc/self/status')) assert.ok(res.peakKb > 0, 'peak RSS was measured');
  assert.ok(res.peakKb < MAX_RSS_KB);
});

test('fuzz: 16 MB of tiny lines, every one rejected, stays within the memory bound with worker threads', async () => {
  // Rejects once crossed threads as an object and a Buffer each: this input took 1.1 GiB.
  const hash = await loadUrlHasher();
  const base = scratch('ms-fuzz-');
  const c: FuzzCase = {
    kind: 'rejects',
    bytes: Buffer.from('a\tb\n'.repeat(4 << 20)),
    args: ['--max-reject-ratio', '1', '--rejects', 'rejects', '--threads', '2'],
  };
  const res = await runCase(c, base);
  assert.deepEqual(problems(c, res, hash, MAX_RSS_KB), []);
  assert.equal(lineCount(res.rejects), 4 << 20);
  if (fs.existsSync('/proc/self/status')) assert.ok(res.peakKb > 0 && res.peakKb < MAX_RSS_KB, `peak RSS ${res.peakKb} KiB`);
});

test('fuzz: a flood of 2-byte rejected lines kept with --rejects stays within twice --memory plus 100 MiB at --memory 128M --threads 3', async () => {
  // A batch once held each reject with its reason copied (48 bytes for a 2-byte line,
  // 24 MiB a batch): this input peaked at 430-480 MiB.
  const hash = await loadUrlHasher();
  const base = scratch('ms-fuzz-');
  const n = 4 << 20;
  const c: FuzzCase = {
    kind: 'rejects',
    bytes: Buffer.from('\t\n'.repeat(n)),
    args: ['--max-reject-ratio', '1', '--rejects', 'rejects', '--memory', '128M', '--threads', '3'],
  };
  const res = await runCase(c, base);
  const boundKb = (2 * 128 + 100) * 1024;
  assert.deepEqual(problems(c, res, hash, boundKb), []);
  if (fs.existsSync('/proc/self/status')) assert.ok(res.peakKb > 0 && res.peakKb < boundKb, `peak RSS ${res.peakKb} KiB`);
  // Every line, in order, as it was written before.
  let at = 0;
  for (let from = 1; from <= n; from += 65536) {
    let want = '';
    for (let k = from; k < from + 65536 && k <= n; k++) want += `${k}\tbad field count: 2 fields, want 6 or 7\t\t\n`;
    const w = Buffer.from(want);
    assert.ok(res.rejects.subarray(at, at + w.length).equals(w), `rejects lines ${from}..${from + 65535}`);
    at += w.length;
  }
  assert.equal(at, res.rejects.length);
});

test('fuzz checker catches a broken run (it can fail)', async () => {
  const hash = await loadUrlHasher();
  const c: FuzzCase = { kind: 'x', bytes: Buffer.from('a\tb\nc\n'), args: [] };
  const bad = {
    status: 1,
    signal: null,
    stdout: '0000000000000000\t20110727200841\t\t1\tx.com\thttp://x.com/\n',
    stderr: '    at foo (file.js:1:2)\n{"summary":true,"lines_in":2,"records_out":1,"rejected":1,"skipped":1}\n',
    peakKb: 999_999,
    rejects: Buffer.alloc(0),
    leftovers: ['run-000000'],
  };
  const p = problems(c, bad, hash, MAX_RSS_KB).join('\n');
  for (const want of [
    'exit status 1',
    'stack trace',
    'peak RSS',
    'spill files',
    'is not XXH64',
    'records_out + rejected + skipped',
    'rejects file has 0 lines',
  ]) {
    assert.ok(p.includes(want), `checker misses "${want}":\n${p}`);
  }
});

test('fuzz checker tells runs with other --threads apart (it can fail)', () => {
  const run = (stdout: string, rejects: string, lines: number) => ({
    status: 0,
    signal: null,
    stdout,
    stderr: `{"level":30,"time":1,"summary":true,"lines_in":${lines},"rejected":1,"ms":${lines}}\n`,
    peakKb: 0,
    rejects: Buffer.from(rejects),
    leftovers: [],
  });
  const a = run('r1\n', '2\tbad hits\tx\n', 2);
  assert.deepEqual(
    differences(a, {
      ...run('r1\n', '2\tbad hits\tx\n', 2),
      stderr: a.stderr.replace('"ms":2', '"ms":9').replace('"time":1', '"time":5').replace('"rejected"', '"sort_runs":3,"rejected"'),
    }),
    [],
    'timing and spills are no difference',
  );
  assert.deepEqual(differences(a, { ...a, stderr: a.stderr.replace('"ms":2', '"peak_rss_mib":81.5,"ms":2') }), [], 'peak RSS is no difference');
  const p = differences(a, run('r2\n', '3\tbad hits\tx\n', 3)).join('\n');
  for (const want of ['records differ', 'rejects differ', 'summaries differ']) assert.ok(p.includes(want), `checker misses "${want}":\n${p}`);
  const c: FuzzCase = { kind: 'x', bytes: Buffer.alloc(0), args: ['--threads', '2', '--rejects', 'r'] };
  assert.deepEqual(withThreads(c, 0).args, ['--rejects', 'r', '--threads', '0']);
});
