// RecordSorter and LineBatcher: the same bytes with and without spilling or worker
// threads, stable ties, and no temp files left behind after success, failure or a signal.
// The native copy of a sorted group into the output, the same bytes as one put per line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataError } from '../src/core/errors.js';
import { RecordBatch, RecordSorter, type PackedRecords, type RecordSink } from '../src/core/sorter.js';
import { LineBatcher } from '../src/core/lines.js';
import { SinkOut, nativeGather } from '../src/core/runs.js';
import type { ByteSink } from '../src/core/bytes.js';
import { generateReflog } from '../scripts/gen-reflog.js';
import { BIN, ROOT, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import { prng } from '../scripts/prng.js';
import { FAST_SUITE } from './lib/pg.js';

/** The specification: a stable sort by the first 31 characters (`id TAB timestamp`). */
function reference(lines: string[]): string[] {
  return lines
    .map((l, i) => ({ l, key: l.slice(0, 31), i }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.i - b.i))
    .map((x) => x.l);
}

/** Writes one record line (no LF) into a sink with the key it carries. */
function addLine(sink: RecordSink, line: string): void {
  const bytes = Buffer.from(line + '\n');
  sink.reserve(bytes.length);
  sink.buf.set(bytes, sink.pos);
  sink.commit(sink.pos + bytes.length, parseInt(line.slice(0, 8), 16), parseInt(line.slice(8, 16), 16), Number(line.slice(17, 31)));
}

async function drained(s: RecordSorter): Promise<string[]> {
  const chunks: Buffer[] = [];
  await s.drain((c) => {
    chunks.push(Buffer.from(c));
  });
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? [] : text.slice(0, -1).split('\n');
}

/** Adds the lines to the sorter in packed batches of 1 to `most` records (sizes from `seed`). */
function addAll(s: RecordSorter, lines: string[], most = 500, seed = 1): void {
  const r = prng(seed);
  const b = new RecordBatch(64, 4); // small: it must grow
  for (let i = 0; i < lines.length; ) {
    const end = Math.min(lines.length, i + 1 + Math.floor(r() * most));
    for (; i < end; i++) addLine(b, lines[i]!);
    s.addPacked(b.take());
  }
}

async function sorted(lines: string[], memoryBytes: number, tmpDir: string): Promise<{ out: string[]; runs: number }> {
  const s = new RecordSorter({ memoryBytes, tmpDir });
  addAll(s, lines);
  const runs = s.spilledRuns;
  return { out: await drained(s), runs };
}

/** A few timestamps that differ in the first digit, the last one, and every one between. */
const TIMESTAMPS = ['19991231235959', '20000101000000', '20110720060000', '20110720060001', '20110721060000', '20110720060002', '20991231235959'];

/** Every second of one hour, as a reflog's timestamps are: one id's records are then counting-sorted by them. */
const HOUR = Array.from({ length: 3600 }, (_, s) => `2011072806${String(Math.floor(s / 60)).padStart(2, '0')}${String(s % 60).padStart(2, '0')}`);

/** Records with ids from a pool of `ids` (repeats make ties), timestamps from `stamps`, and tails of any length. */
function randomRecords(n: number, ids: number, seed: number, stamps: readonly string[] = TIMESTAMPS): string[] {
  const r = prng(seed);
  const hex = (x: number) => Math.floor(x).toString(16).padStart(8, '0');
  const pool = Array.from({ length: ids }, () => {
    // Some ids share their top 16 or 32 bits: one big bucket, and equal halves.
    const hi = r() < 0.3 ? 0xabcd0000 + Math.floor(r() * 4) : r() * 2 ** 32;
    return hex(hi) + hex(r() * 2 ** 32);
  });
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = pool[Math.floor(r() * ids)]!;
    const ts = stamps[Math.floor(r() * stamps.length)]!;
    lines.push(`${id}\t${ts}\t${'x'.repeat(Math.floor(r() * 40))}\tline-${i}`);
  }
  return lines;
}

test('in memory and spilled, the output is the stable sort by (id, timestamp)', async () => {
  const tmp = scratch('ms-sorter-');
  for (const [n, ids, stamps] of [
    [5000, 50_000, TIMESTAMPS],
    [5000, 40, TIMESTAMPS], // long stretches of one id: big buckets
    [3000, 1, TIMESTAMPS],
    [5000, 40, HOUR], // big buckets of one id over an hour's seconds (a counting sort), and ties within them
    [3000, 1, HOUR.slice(0, 500)],
    [1, 1, TIMESTAMPS],
    [0, 1, TIMESTAMPS],
  ] as const) {
    const lines = randomRecords(n, ids, n + ids, stamps);
    const want = reference(lines);
    const mem = await sorted(lines, 1 << 30, tmp);
    assert.equal(mem.runs, 0);
    assert.deepEqual(mem.out, want, `in memory, n=${n} ids=${ids}`);
    if (n < 1000) continue;
    // Groups read back and sorted in memory, and groups too big for it (few ids) sorted by runs.
    const spilled = await sorted(lines, 4_000, tmp);
    assert.ok(spilled.runs > 0, `expected spills (n=${n} ids=${ids})`);
    assert.deepEqual(spilled.out, want, `spilled, n=${n} ids=${ids}`);
  }
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill directory removed after drain');
});

test('a group too big to sort in memory is sorted by runs, merged in rounds that remove the runs they merged', async () => {
  const tmp = scratch('ms-sorter-');
  // One id: every record in one group, 2.4 MB against a 1.2 KB budget for a group.
  const lines = randomRecords(40_000, 1, 77);
  const s = new RecordSorter({ memoryBytes: 4_000, tmpDir: tmp });
  addAll(s, lines);
  assert.ok(s.spilledRuns > 0);
  const filesUnder = (d: string): string[] =>
    fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(d, e.name)) : [e.name]));
  let runsSeen = -1;
  const chunks: Buffer[] = [];
  await s.drain((c) => {
    if (runsSeen < 0) runsSeen = filesUnder(tmp).filter((f) => f.startsWith('run-')).length;
    chunks.push(Buffer.from(c));
  });
  // About 580 runs of 4 KiB, merged 64 at a time into one before the last merge, which
  // hands out its first MiB while its runs are still on disk.
  assert.ok(runsSeen >= 2 && runsSeen <= 64, `${runsSeen} runs on disk in the last merge`);
  assert.deepEqual(Buffer.concat(chunks).toString('utf8').slice(0, -1).split('\n'), reference(lines));
  assert.deepEqual(fs.readdirSync(tmp), []);
});

test("a packed batch holds its records grouped by the id's top byte, input order within a group", () => {
  const lines = randomRecords(3000, 400, 7);
  const b = new RecordBatch(64, 4);
  let prev: PackedRecords | undefined;
  for (let round = 0; round < 3; round++) {
    // Later rounds reuse the buffers of the one before (smaller, then bigger): nothing of it may show through.
    const part = lines.slice(1000 * round, 1000 * round + [1000, 500, 1500][round]!);
    for (const l of part) addLine(b, l);
    const p = (prev = b.take(prev));
    assert.equal(p.n, part.length);
    const got: string[] = [];
    for (let k = 0; k < p.n; k++) got.push(Buffer.from(p.bytes.subarray(p.starts[k]!, p.starts[k + 1]! - 1)).toString());
    const group = (l: string) => parseInt(l.slice(0, 2), 16);
    const want = part
      .map((l, i) => ({ l, i }))
      .sort((x, y) => group(x.l) - group(y.l) || x.i - y.i)
      .map((x) => x.l);
    assert.deepEqual(got, want, `round ${round}`);
    for (let g = 0; g < 256; g++) {
      assert.equal(p.parts[g + 1]! - p.parts[g]!, part.filter((l) => group(l) === g).length, `group ${g}`);
    }
    for (let k = 0; k < p.n; k++) assert.equal(p.hi[k], parseInt(got[k]!.slice(0, 8), 16));
  }
});

test('batches of any size, a record at a time or many, add up to the same sort', async () => {
  const tmp = scratch('ms-sorter-');
  const lines = randomRecords(4000, 300, 7);
  const want = reference(lines);
  for (const memory of [1 << 30, 300_000, 20_000]) {
    for (const most of [1, 50, 4000]) {
      const s = new RecordSorter({ memoryBytes: memory, tmpDir: tmp });
      addAll(s, lines, most, memory + most);
      assert.deepEqual(await drained(s), want, `memory ${memory}, batches of up to ${most}`);
    }
  }
});

test('records longer than a chunk, among short ones, at every budget size: the same stable sort', async () => {
  const tmp = scratch('ms-sorter-');
  const r = prng(99);
  // Ids spread over all partitions; a few records far longer than a chunk (4-64 KiB).
  const lines = randomRecords(3000, 2000, 11).map((l) => (r() < 0.01 ? `${l}\t${'y'.repeat(Math.floor(5000 + r() * 70_000))}` : l));
  const want = reference(lines);
  // 1 GiB: 256 partitions, 64 KiB chunks; 4M: 256 partitions, small chunks, spills; 1M: 32 partitions; 300k: 2; 20k: 1.
  for (const memory of [1 << 30, 4 << 20, 1 << 20, 300_000, 20_000]) {
    const { out } = await sorted(lines, memory, tmp);
    assert.equal(out.length, want.length, `memory ${memory}`);
    assert.ok(
      out.every((l, i) => l === want[i]),
      `memory ${memory}: sorted and stable`,
    );
  }
});

test('ties keep input order across runs', async () => {
  const tmp = scratch('ms-sorter-');
  const lines: string[] = [];
  const a = '00000000000000aa\t20110728060000';
  const b = '00000000000000bb\t20110728060000';
  for (let i = 0; i < 3000; i++) lines.push(`${i % 3 === 0 ? b : a}\t${i}`);
  const { out, runs } = await sorted(lines, 20_000, tmp);
  assert.ok(runs > 2);
  const nums = (p: string) => out.filter((l) => l.startsWith(p)).map((l) => Number(l.split('\t')[2]));
  const an = nums(a);
  const bn = nums(b);
  assert.equal(an.length + bn.length, 3000);
  assert.deepEqual(
    an,
    [...an].sort((x, y) => x - y),
  );
  assert.deepEqual(
    bn,
    [...bn].sort((x, y) => x - y),
  );
  assert.equal(out.indexOf(`${b}\t0`), an.length);
});

test('the spill directory is removed when draining fails and on dispose', async () => {
  const tmp = scratch('ms-sorter-');
  const s = new RecordSorter({ memoryBytes: 20_000, tmpDir: tmp });
  addAll(s, randomRecords(2000, 500, 3));
  assert.ok(s.spilledRuns > 0);
  assert.equal(fs.readdirSync(tmp).length, 1, 'one private spill directory while sorting');
  await assert.rejects(
    s.drain(() => {
      throw new Error('reader failed');
    }),
    /reader failed/,
  );
  assert.deepEqual(fs.readdirSync(tmp), []);

  const d = new RecordSorter({ memoryBytes: 20_000, tmpDir: tmp });
  addAll(d, randomRecords(2000, 500, 4));
  assert.ok(d.spilledRuns > 0);
  d.dispose();
  assert.deepEqual(fs.readdirSync(tmp), []);
});

test('a spill to a missing --tmp directory is an error naming it', () => {
  const s = new RecordSorter({ memoryBytes: 20_000, tmpDir: '/nonexistent/ms-tmp' });
  assert.throws(
    () => {
      addAll(s, randomRecords(2000, 10, 5));
    },
    (err: DataError) => err instanceof DataError && err.place?.file === '/nonexistent/ms-tmp' && /ENOENT/.test(err.message),
  );
});

test("LineBatcher: any chunking gives back the input's lines, long lines cut to maxLine + 2 bytes", () => {
  const r = prng(11);
  for (let round = 0; round < 200; round++) {
    const maxLine = 1 + Math.floor(r() * 30);
    const lines: string[] = [];
    for (let i = Math.floor(r() * 20); i > 0; i--) lines.push('x'.repeat(Math.floor(r() * 60)));
    const lastHasLf = r() < 0.5;
    const input = Buffer.from(lines.join('\n') + (lastHasLf && lines.length ? '\n' : ''));
    const b = new LineBatcher(1 + Math.floor(r() * 100), maxLine);
    const batches: Buffer[] = [];
    for (let at = 0; at < input.length; ) {
      const len = 1 + Math.floor(r() * 50);
      batches.push(...b.push(Buffer.from(input.subarray(at, at + len))));
      at += len;
    }
    const last = b.end();
    if (last) batches.push(last);
    for (const x of batches.slice(0, -1)) assert.equal(x[x.length - 1], 10, 'every batch but the last ends a line');
    const got = Buffer.concat(batches).toString();
    const cut = (text: string) =>
      text
        .split('\n')
        .map((l) => l.slice(0, maxLine + 2))
        .join('\n');
    const want = lines.join('\n') + (lastHasLf && lines.length ? '\n' : '');
    assert.equal(cut(got), cut(want), `round ${round}: the same lines, each to maxLine + 2 bytes at least`);
    const gotLines = got.split('\n');
    for (const [i, l] of want.split('\n').entries())
      assert.ok(gotLines[i] === l || (l.length > maxLine && l.startsWith(gotLines[i]!)), `round ${round} line ${i}`);
  }
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

  // Worker threads or none, spilling or not: the same records, rejects and counts. With
  // one worker the main thread parses the batches it would otherwise wait for (the input,
  // 3 x 2.6 MiB, is 8 batches: the worker cannot keep up with a thread that only reads).
  const noisy = Buffer.concat([
    input,
    Buffer.from('b\t5\tnot-a-time\t1\thttp://x.example/\t1\n'),
    input,
    input,
    input.subarray(0, 3000),
    Buffer.from('\nlast\tline\twithout LF'),
  ]);
  const where: Record<string, unknown>[] = [];
  const runs = [
    ['--threads', '0'],
    ['--threads', '2'],
    ['--threads', '1', '--log-level', 'debug'],
    ['--threads', '3', '--memory', '1M', '--tmp', tmp],
  ].map((args) => {
    const rej = path.join(dir, `rejects-${args[1]}.tsv`);
    // --threads 3 under --memory 1M: the workers' cost (40 MiB each) left out of the check, so that it spills.
    const r = runBin('analyze-dump', [...args, '--rejects', rej], noisy, ROOT, { MASTER_SERVER_WORKER_BYTES: '0' });
    assert.equal(r.status, 0, r.stderr);
    const { ms: _ms, time: _time, sort_runs: _runs, peak_rss_mib: _rss, ...counts } = summaryOf(r.stderr);
    where.push(
      ...r.stderr
        .split('\n')
        .filter((l) => l.includes('batches_on_workers'))
        .map((l) => JSON.parse(l)),
    );
    return { out: r.stdoutBytes, rejects: fs.readFileSync(rej, 'utf8'), counts };
  });
  assert.equal(where.length, 1, 'one --log-level debug run');
  assert.ok(Number(where[0]!.batches_on_main_thread) > 0 && Number(where[0]!.batches_on_workers) > 0, JSON.stringify(where[0]));
  assert.ok(runs[0]!.rejects.includes('bad timestamp'));
  for (const r of runs.slice(1)) {
    assert.ok(r.out.equals(runs[0]!.out), 'same records with and without worker threads');
    assert.equal(r.rejects, runs[0]!.rejects);
    assert.deepEqual(r.counts, runs[0]!.counts);
  }

  // A failing run (reject ratio) after spilling removes its runs too.
  const bad = Buffer.concat([input, Buffer.from('x\ty\n'.repeat(5000))]);
  const failed = runBin('analyze-dump', ['--memory', '1M', '--tmp', tmp], bad);
  assert.equal(failed.status, 1);
  assert.equal(failed.stdout, failedOutput('analyze-dump'));
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill files removed after failure');
});

test('analyze-dump: a spill prepared ahead (workers given batches to last it, then the spill) keeps the records, rejects and counts of one without workers', {
  skip: FAST_SUITE && 'a 63 MiB input, twice (npm run test:all)',
}, () => {
  const dir = scratch('ms-sorter-ahead-');
  const reflog = path.join(dir, 'h.reflog');
  writeReflog(reflog, 40_000, 3);
  const one = fs.readFileSync(reflog);
  // 63 MiB (about 60 batches, four or five runs), with rejects between copies and a last line without LF.
  const bad = Buffer.from('b\t5\tnot-a-time\t1\thttp://x.example/\t1\nx\ty\n');
  const input = Buffer.concat([...Array.from({ length: 24 }, () => [one, bad]).flat(), one.subarray(0, 5000), Buffer.from('\nlast\tline\twithout LF')]);
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const run = (args: string[], env: Record<string, string>) => {
    const rej = path.join(dir, `rejects-${args[1]}.tsv`);
    const r = runBin('analyze-dump', [...args, '--max-reject-ratio', '1', '--rejects', rej, '--log-level', 'debug'], input, ROOT, env);
    assert.equal(r.status, 0, r.stderr);
    const { ms: _ms, time: _time, sort_runs: runs, peak_rss_mib: _rss, ...counts } = summaryOf(r.stderr);
    const where = JSON.parse(r.stderr.split('\n').find((l) => l.includes('batches_on_workers'))!) as Record<string, number>;
    return { out: r.stdoutBytes, rejects: fs.readFileSync(rej, 'utf8'), counts, runs: Number(runs), where };
  };
  const plain = run(['--threads', '0'], {});
  // Spills are prepared at --memory 192M and up, with runs of 96 MiB spilled in 24 MiB
  // steps; here runs of 19 MiB in 5 MB steps (five batches queued).
  const ahead = run(['--threads', '1', '--memory', '32M', '--tmp', tmp], { MASTER_SERVER_WORKER_BYTES: '0', MASTER_SERVER_SPILL_BYTES: '5000000' });
  assert.equal(plain.runs, 0);
  assert.ok(ahead.runs >= 2, `spilled runs: ${ahead.runs}`);
  assert.ok(ahead.where.runs_spilled_ahead! >= 1 && ahead.where.batches_on_workers! > 0, JSON.stringify(ahead.where));
  assert.equal(plain.where.runs_spilled_ahead, 0);
  assert.ok(ahead.out.equals(plain.out), 'the same records');
  assert.equal(ahead.rejects, plain.rejects);
  assert.ok(plain.rejects.includes('bad timestamp') && plain.rejects.includes('bad field count'));
  assert.deepEqual(ahead.counts, plain.counts);
  assert.deepEqual(fs.readdirSync(tmp), [], 'spill files removed');
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

/** A ByteSink whose buffer holds `size` bytes, handing each full one to `out`. */
function smallSink(size: number, out: Buffer[]): ByteSink {
  const sink: ByteSink = {
    buf: Buffer.alloc(size),
    pos: 0,
    reserve(n: number): void {
      if (sink.pos + n <= sink.buf.length) return;
      out.push(Buffer.from(sink.buf.subarray(0, sink.pos)));
      sink.buf = Buffer.alloc(Math.max(size, n));
      sink.pos = 0;
    },
  };
  return sink;
}

test('the native copy of a group in order (SinkOut.putSorted) puts the bytes put() puts, through any output buffer size', () => {
  assert.ok(nativeGather.fn, 'the scan addon is built (npm install)');
  const rnd = prng(7);
  for (let round = 0; round < 200; round++) {
    const sources = Array.from({ length: 1 + Math.floor(rnd() * 70) }, () =>
      Buffer.from(Array.from({ length: 1 + Math.floor(rnd() * 300) }, () => Math.floor(rnd() * 256))),
    );
    const n = Math.floor(rnd() * 400);
    const at = new Float64Array(n);
    const len = new Uint32Array(n);
    for (let k = 0; k < n; k++) {
      const src = Math.floor(rnd() * sources.length);
      const s = Math.floor(rnd() * sources[src]!.length);
      at[k] = src * 2 ** 32 + s;
      len[k] = Math.floor(rnd() * (sources[src]!.length - s + 1));
    }
    const order = Uint32Array.from(Array.from({ length: n }, (_, k) => k).sort(() => rnd() - 0.5));
    const size = 1 + Math.floor(rnd() * 600);
    const viaPut: Buffer[] = [];
    const a = smallSink(size, viaPut);
    const put = new SinkOut(a);
    for (let j = 0; j < n; j++) {
      const k = order[j]!;
      const src = Math.floor(at[k]! / 2 ** 32);
      put.put(sources[src]!, at[k]! - src * 2 ** 32, at[k]! - src * 2 ** 32 + len[k]!);
    }
    const viaNative: Buffer[] = [];
    const b = smallSink(size, viaNative);
    assert.equal(new SinkOut(b).putSorted(sources, at, len, order, n), true);
    assert.ok(Buffer.concat([...viaNative, b.buf.subarray(0, b.pos)]).equals(Buffer.concat([...viaPut, a.buf.subarray(0, a.pos)])), `round ${round}`);
  }
});

test('the native copy refuses a record outside its source, a source that is not one, and bad arguments', () => {
  const gather = nativeGather.fn as unknown as (...args: unknown[]) => number;
  assert.ok(gather, 'the scan addon is built (npm install)');
  const dst = Buffer.alloc(64);
  const src = [Buffer.from('abcdef'), Buffer.from('gh')];
  const end = new Int32Array(1);
  const one = (at: number, len: number) => [dst, 0, src, Float64Array.of(at), Uint32Array.of(len), Uint32Array.of(0), 0, 1, end];
  assert.equal(gather(...one(2 ** 32 + 1, 1)), 1);
  assert.deepEqual([end[0], dst[0]], [1, 'h'.charCodeAt(0)]);
  for (const [at, len] of [
    [4, 3],
    [2 ** 32 + 1, 2],
    [2 * 2 ** 32, 1],
    [-1, 1],
    [0.5, 1],
    [2 ** 53, 1],
  ])
    assert.throws(() => gather(...one(at!, len!)), RangeError, `${at} ${len}`);
  assert.throws(() => gather(dst, 0, src, Float64Array.of(0), Uint32Array.of(1), Uint32Array.of(1), 0, 1, end), RangeError, 'a record number past its arrays');
  assert.throws(() => gather(dst, 0, [Buffer.from('a'), 'text'], Float64Array.of(2 ** 32), Uint32Array.of(1), Uint32Array.of(0), 0, 1, end), TypeError);
  const good = one(0, 1);
  for (const [i, bad] of [
    [0, 'x'],
    [1, 65],
    [2, {}],
    [3, new Uint32Array(1)],
    [4, new Int32Array(1)],
    [5, [0]],
    [6, 2],
    [7, 2],
    [8, new Uint32Array(1)],
  ] as const) {
    const args: unknown[] = [...good];
    args[i] = bad;
    assert.throws(() => gather(...args), TypeError, `argument ${i}`);
  }
  assert.equal(gather(Buffer.alloc(3), 0, src, Float64Array.of(0), Uint32Array.of(4), Uint32Array.of(0), 0, 1, end), 0, 'no room for the line: none copied');
});
