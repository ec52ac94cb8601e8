// LineSorter: the same bytes with and without spilling, stable ties, and no temp
// files left behind after success, failure or a signal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataError } from '../src/core/errors.js';
import { LineSorter, sortOrder } from '../src/core/sorter.js';
import { generateReflog } from '../scripts/gen-reflog.js';
import { BIN, runBin, scratch, summaryOf, testEnv } from './lib/run.js';

/** A deterministic PRNG for test data. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

/** The specification: a stable sort by the first k characters. */
function reference(lines: string[], k: number): string[] {
  return lines
    .map((l, i) => ({ l, key: l.slice(0, k), i }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.i - b.i))
    .map((x) => x.l);
}

async function sorted(lines: string[], k: number, memoryBytes: number, tmpDir: string): Promise<{ out: string[]; runs: number }> {
  const s = new LineSorter({ keyLength: k, memoryBytes, tmpDir });
  for (const l of lines) s.add(l);
  const runs = s.spilledRuns;
  const out: string[] = [];
  await s.drain((l) => {
    out.push(l);
  });
  return { out, runs };
}

function randomLines(n: number, k: number, alphabet: string, seed: number): string[] {
  const r = rng(seed);
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    let key = '';
    const len = r() < 0.05 ? Math.floor(r() * k) : k; // some lines shorter than the key
    for (let j = 0; j < len; j++) key += alphabet[Math.floor(r() * alphabet.length)];
    lines.push(`${key}\tline-${i}`);
  }
  return lines;
}

test('in memory and spilled, the output is the stable sort by key prefix', async () => {
  const tmp = scratch('ms-sorter-');
  for (const [k, alphabet] of [
    [31, '0123456789abcdef'],
    [31, 'ab'], // long stretches of equal heads
    [5, 'xyz\u00e9\u007f~'], // characters the packed keys clamp
    [4, 'ab~'],
    [3, '01'],
    [12, '0123456789'],
  ] as const) {
    const lines = randomLines(5000, k, alphabet, k * 7 + alphabet.length);
    const want = reference(lines, k);
    const mem = await sorted(lines, k, 1 << 30, tmp);
    assert.equal(mem.runs, 0);
    assert.deepEqual(mem.out, want, `in memory, k=${k} alphabet=${alphabet}`);
    const spilled = await sorted(lines, k, 5_000, tmp); // ~100 runs: a two-level merge
    assert.ok(spilled.runs > 64, `expected many runs, got ${spilled.runs}`);
    assert.deepEqual(spilled.out, want, `spilled, k=${k} alphabet=${alphabet}`);
  }
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill directory removed after drain');
});

test('ties keep input order across runs', async () => {
  const tmp = scratch('ms-sorter-');
  const lines: string[] = [];
  for (let i = 0; i < 3000; i++) lines.push(`${i % 3 === 0 ? 'bbbb' : 'aaaa'}\t${i}`);
  const { out, runs } = await sorted(lines, 4, 10_000, tmp);
  assert.ok(runs > 2);
  const nums = (p: string) => out.filter((l) => l.startsWith(p)).map((l) => Number(l.split('\t')[1]));
  const a = nums('aaaa');
  const b = nums('bbbb');
  assert.deepEqual(a, [...a].sort((x, y) => x - y));
  assert.deepEqual(b, [...b].sort((x, y) => x - y));
  assert.equal(out.indexOf(`bbbb\t0`), a.length);
  assert.deepEqual(Array.from(sortOrder([], 31)), []);
});

test('the spill directory is removed when draining fails and on dispose', async () => {
  const tmp = scratch('ms-sorter-');
  const s = new LineSorter({ keyLength: 4, memoryBytes: 5_000, tmpDir: tmp });
  for (let i = 0; i < 1000; i++) s.add(`${(i * 7919) % 1000}`.padStart(4, '0') + `\t${i}`);
  assert.ok(s.spilledRuns > 0);
  assert.equal(fs.readdirSync(tmp).length, 1, 'one private spill directory while sorting');
  let n = 0;
  await assert.rejects(
    s.drain(() => {
      if (++n === 10) throw new Error('reader failed');
    }),
    /reader failed/,
  );
  assert.deepEqual(fs.readdirSync(tmp), []);

  const d = new LineSorter({ keyLength: 4, memoryBytes: 5_000, tmpDir: tmp });
  for (let i = 0; i < 1000; i++) d.add(`k${i % 10}xx\t${i}`);
  assert.ok(d.spilledRuns > 0);
  d.dispose();
  assert.deepEqual(fs.readdirSync(tmp), []);
});

test('a spill to a missing --tmp directory is an error naming it', () => {
  const s = new LineSorter({ keyLength: 4, memoryBytes: 1_000, tmpDir: '/nonexistent/ms-tmp' });
  assert.throws(
    () => {
      for (let i = 0; i < 100; i++) s.add(`abcd\t${i}`);
    },
    (err: DataError) => err instanceof DataError && err.place?.file === '/nonexistent/ms-tmp' && /ENOENT/.test(err.message),
  );
});

function writeReflog(file: string, lines: number, hour: number): void {
  const fd = fs.openSync(file, 'w');
  generateReflog(fd, { lines, hour, seed: 5 });
  fs.closeSync(fd);
}

test('analyze-dump: byte-identical output with --memory 1M (spilling) and without', () => {
  const dir = scratch('ms-sorter-bin-');
  const reflog = path.join(dir, 'h.reflog');
  writeReflog(reflog, 40_000, 1);
  const input = fs.readFileSync(reflog);
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const big = runBin('analyze-dump', [], input);
  assert.equal(big.status, 0, big.stderr);
  const small = runBin('analyze-dump', ['--memory', '1M', '--tmp', tmp], input);
  assert.equal(small.status, 0, small.stderr);
  assert.ok(Number(summaryOf(small.stderr).sort_runs) > 1, 'the small budget spilled');
  assert.equal(Number(summaryOf(big.stderr).sort_runs), 0);
  assert.ok(big.stdoutBytes.length > 1 << 20);
  assert.ok(small.stdoutBytes.equals(big.stdoutBytes), 'same bytes with and without spilling');
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill files removed after success');

  // A failing run (reject ratio) after spilling removes its runs too.
  const bad = Buffer.concat([input, Buffer.from('x\ty\n'.repeat(5000))]);
  const failed = runBin('analyze-dump', ['--memory', '1M', '--tmp', tmp], bad);
  assert.equal(failed.status, 1);
  assert.equal(failed.stdout, '');
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill files removed after failure');
});

test('analyze-dump: spill files removed when killed by SIGTERM', async () => {
  const dir = scratch('ms-sorter-sig-');
  const reflog = path.join(dir, 'h.reflog');
  writeReflog(reflog, 20_000, 2);
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const child = spawn(path.join(BIN, 'analyze-dump'), ['--memory', '1M', '--tmp', tmp], { env: testEnv(), stdio: ['pipe', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.stdin.on('error', () => undefined); // EPIPE once it is killed
  child.stdin.write(fs.readFileSync(reflog)); // stdin stays open: the stage waits for more
  const deadline = Date.now() + 30_000;
  const hasRun = () => fs.readdirSync(tmp).some((d) => fs.readdirSync(path.join(tmp, d)).length > 0);
  while (!hasRun() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(hasRun(), 'a run was spilled');
  child.kill('SIGTERM');
  const code = await exited;
  assert.equal(code, 143);
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill directory removed on SIGTERM');
});
