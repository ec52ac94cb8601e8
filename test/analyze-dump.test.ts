// analyze-dump through the real binary: Public Suffix List vectors, ids, counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { BIN, ROOT, awaitWithLateFifoEnd, hasStackTrace, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import { UrlResolver, canonicalize, globMatch, parseParamGlobs, loadUrlHash, loadUrlHasher, type UrlOptions } from '../src/core/url.js';
import { prng } from '../scripts/prng.js';
import { FAST_SUITE } from './lib/pg.js';
import { generateReflog } from '../scripts/gen-reflog.js';
import { watchPeakRss } from '../scripts/peak-rss.js';
import { SPILL_PREFIX } from '../src/core/sorter.js';
import { MAX_RECORD_BYTES, analyzeLine } from '../src/core/reflog.js';
import { HOST_TAG, ownedTempPrefix } from '../src/core/temps.js';
import { parseBudget, parseSize } from '../src/core/size.js';

const reflogLine = (url: string, hits: number, ts = '20110727200841', tag = '') => ['b', '5', ts, '1', url, String(hits), tag].join('\t');

test('Public Suffix List vectors: every domain field matches', () => {
  // The authoritative copy in ../shared when this checkout has it beside it; else the copy kept here.
  const shared = path.join(ROOT, '..', 'shared', 'test-data', 'psl-domains.tsv');
  const file = fs.existsSync(shared) ? shared : path.join(ROOT, 'fixtures', 'psl', 'psl-domains.tsv');
  const vectors = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.split('\t') as [string, string]);
  assert.equal(vectors.length, 71);
  // hits carries the vector's index, so each output record finds its vector.
  const input = vectors.map(([url], i) => reflogLine(url, i)).join('\n') + '\n';
  const r = runBin('analyze-dump', ['--max-reject-ratio', '0'], input);
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout.trimEnd().split('\n');
  assert.equal(out.length, 71);
  const failures: string[] = [];
  for (const l of out) {
    const f = l.split('\t');
    const [url, want] = vectors[Number(f[3])]!;
    if (f[4] !== want) failures.push(`${url}: got ${f[4]}, want ${want}`);
  }
  assert.deepEqual(failures, []);
});

test('XXH64 ids: known vectors and id = XXH64(url) for every output record', async () => {
  const hash = await loadUrlHasher();
  // Reference values of XXH64 with seed 0 from the xxHash specification's test suite.
  assert.equal(hash(''), 'ef46db3751d8e999');
  assert.equal(hash('a'), 'd24ec4f1a98c6e5b');
  assert.equal(hash('abc'), '44bc2cf5ad770999');
  const urls = Array.from({ length: 500 }, (_, i) => `http://h${i % 37}.example.com/p/${i}?q=${i * 7}`);
  const r = runBin('analyze-dump', [], urls.map((u, i) => reflogLine(u, i)).join('\n') + '\n');
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split('\t'));
  assert.equal(out.length, 500);
  for (const f of out) assert.equal(f[0], hash(f[5]!), `id of ${f[5]}`);
  const keys = out.map((f) => `${f[0]}\t${f[1]}`);
  assert.deepEqual(keys, [...keys].sort(), 'sorted by (id, timestamp)');
});

test('hostile reflog: exit 0, clean 6-field output, one reject per bad record, counts add up', () => {
  const work = scratch();
  // Every byte value but LF, so the noise is one line holding TABs and invalid UTF-8.
  const noise = Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 7919 + 13) % 256).map((b) => (b === 10 ? 32 : b)));
  const parts: Buffer[] = [
    Buffer.from('header without tabs\n'),
    Buffer.from(reflogLine('http://ok.example.org/1', 1) + '\r\n'),
    noise,
    Buffer.from('\n'),
    Buffer.from(reflogLine('http://x.example.org/', 1).replace('x.example', 'x\xffexample') + '\n', 'latin1'),
    Buffer.from(reflogLine('http://long.example.org/' + 'a'.repeat(20_000), 1) + '\n'),
    Buffer.from(reflogLine('http://ok.example.org/2', 1, '20110231000000') + '\n'),
    Buffer.from(reflogLine('http://ok.example.org/3', -5) + '\n'),
    Buffer.from(reflogLine('http://ok.example.org/3', 1).replace(/\t1\t$/, '\tten\t') + '\n'),
    Buffer.from(reflogLine('javascript:void(0)', 1) + '\n'),
    Buffer.from(reflogLine('../relative', 1) + '\n'),
    Buffer.from('\n\n'),
    Buffer.from(reflogLine('http://ok.example.org/last', 2)),
  ];
  const input = Buffer.concat(parts);
  const linesIn = input.toString('latin1').split('\n').length;
  const rejects = path.join(work, 'rejects.tsv');
  const r = runBin('analyze-dump', ['--max-reject-ratio', '1', '--rejects', rejects], input, work);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(!hasStackTrace(r.stderr));
  const out = r.stdout.trimEnd().split('\n');
  for (const l of out) assert.equal(l.split('\t').length, 6, l);
  assert.deepEqual(out.map((l) => l.split('\t')[5]).sort(), ['http://ok.example.org/1', 'http://ok.example.org/last']);
  const s = summaryOf(r.stderr);
  assert.equal(s.lines_in, linesIn);
  assert.equal(s.last_line_unterminated, true, 'the input ends without LF');
  assert.match(r.stderr, /"line":\d+,"msg":"the last line has no newline/);
  const ended = runBin('analyze-dump', ['--max-reject-ratio', '1'], Buffer.concat([input, Buffer.from('\n')]), work);
  assert.equal(summaryOf(ended.stderr).last_line_unterminated, undefined, 'the same input ending in LF');
  assert.equal((s.records_out as number) + (s.rejected as number) + (s.skipped as number), s.lines_in);
  const rejectLines = fs.readFileSync(rejects, 'latin1').trimEnd().split('\n');
  assert.equal(rejectLines.length, s.rejected);
  for (const l of rejectLines) assert.match(l, /^\d+\t[a-zA-Z-][^\t]*\t/);
  const reasons = rejectLines.map((l) => l.split('\t')[1]!.replace(/:.*/, '')).sort();
  assert.deepEqual(reasons, ['URL too long', 'bad URL', 'bad hits', 'bad hits', 'bad timestamp', 'invalid UTF-8', 'invalid UTF-8', 'unsupported scheme']);
});

test('the rejects file holds each rejected line with its own reason and detail, whatever the mix of reasons in a batch', async () => {
  // A batch stores each distinct reason once and remembers only so many: thousands of
  // distinct details (non-ASCII ones too) among repeated ones, over several batches.
  const work = scratch();
  const hash = await loadUrlHash();
  const opts: UrlOptions = { maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode: 'registrable' };
  const lines: Buffer[] = [];
  for (let i = 0; i < 140_000; i++) {
    const kind = i % 7;
    if (kind === 0) lines.push(Buffer.from('\t'));
    else if (kind === 1) lines.push(Buffer.from(reflogLine('http://a.org/', 1, `2011\u00e9${i}`)));
    else if (kind === 2) lines.push(Buffer.from(reflogLine('http://a.org/', -i)));
    else if (kind === 3) lines.push(Buffer.from('\xff\t', 'latin1'));
    else if (kind === 4) lines.push(Buffer.from(reflogLine(`http://a.org/${i}`, 1)));
    else if (kind === 5) lines.push(Buffer.from('x\ty\r'));
    else lines.push(Buffer.from(reflogLine(`ftp${i % 5000}://x/`, 1)));
  }
  const want: Buffer[] = [];
  // Each distinct line's verdict once (analyzeLine makes a resolver for every call): 65,000 calls, not 140,000.
  const verdicts = new Map<string, ReturnType<typeof analyzeLine>>();
  lines.forEach((l, k) => {
    const key = l.toString('latin1');
    let v = verdicts.get(key);
    if (v === undefined) verdicts.set(key, (v = analyzeLine(l, 0, l.length, false, opts, hash)));
    if (v.kind === 'reject') want.push(Buffer.from(`${k + 1}\t${v.reason}${v.detail ? `: ${v.detail}` : ''}\t`), l, Buffer.from('\n'));
  });
  const input = Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
  assert.ok(input.length > 3 << 20, 'several batches');
  // On worker threads in the fast suite; on the main thread too in npm run test:all.
  for (const threads of FAST_SUITE ? ['2'] : ['0', '2']) {
    const r = runBin('analyze-dump', ['--max-reject-ratio', '1', '--rejects', 'rj', '--threads', threads], input, work);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(fs.readFileSync(path.join(work, 'rj')).equals(Buffer.concat(want)), `--threads ${threads}: rejects file as predicted`);
  }
});

test('--max-url-bytes is honoured and --max-reject-ratio 0 fails on one reject, with no output', () => {
  const input = [reflogLine('http://a.org/' + 'x'.repeat(100), 1), reflogLine('http://a.org/', 1)].join('\n') + '\n';
  const ok = runBin('analyze-dump', ['--max-url-bytes', '200'], input);
  assert.equal(ok.status, 0, ok.stderr);
  assert.equal(ok.stdout.trimEnd().split('\n').length, 2);
  const bad = runBin('analyze-dump', ['--max-url-bytes', '50', '--max-reject-ratio', '0'], input);
  assert.equal(bad.status, 1);
  assert.equal(bad.stdout, failedOutput('analyze-dump'));
  assert.match(bad.stderr, /analyze-dump: -: rejected 1 of 2 records/);
  // --input-name names stdin (the runner hands the reflog over on stdin).
  const named = runBin('analyze-dump', ['--max-url-bytes', '50', '--max-reject-ratio', '0', '--input-name', 'inbox/h.reflog'], input);
  assert.equal(named.status, 1);
  assert.match(named.stderr, /^analyze-dump: inbox\/h\.reflog: rejected 1 of 2 records/m);
  const usage = (args: string[], want: RegExp) => {
    const r = runBin('analyze-dump', args, input);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, want);
  };
  usage(['--input-name', 'x', 'some.reflog'], /^analyze-dump: --input-name names stdin; the input is the file some\.reflog\n/);
  usage(['--input-name', ''], /^analyze-dump: --input-name wants a name\n/);
  // A name may hold control characters (a file name can): shown escaped, the message stays one line.
  const odd = runBin('analyze-dump', ['--max-url-bytes', '50', '--max-reject-ratio', '0', '--input-name', 'in\tbox/a\nb\x1b.reflog'], input);
  assert.equal(odd.status, 1, odd.stderr);
  assert.match(odd.stderr, /^analyze-dump: in\\tbox\/a\\nb\\x1b\.reflog: rejected 1 of 2 records/m);
});

test('a --rejects file that cannot be written (ENOSPC) fails the run with counts that still add up', () => {
  // 6000 rejects of about 60 bytes overflow the rejects file's 256 KiB buffer mid-input; records among them.
  const lines = Array.from({ length: 6000 }, (_, i) => reflogLine(`http://a.org/${i}`, i, i % 3 === 0 ? '20110727200841' : '20110231000000'));
  const r = runBin('analyze-dump', ['--rejects', '/dev/full', '--max-reject-ratio', '1'], ['hdr', ...lines, ''].join('\n') + '\n');
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /analyze-dump: \/dev\/full: cannot write: ENOSPC/);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const s = summaryOf(r.stderr) as Record<string, number>;
  // Before: records_out, rejected and skipped counted the failing batch and lines_in did not (2000 + 4000 + 2 against 0).
  assert.equal(s.records_out! + s.rejected! + s.skipped!, s.lines_in, JSON.stringify(s));
});

test('--rejects naming a FIFO: its rejects go to a reader that comes late, and a signal stops the stage while none comes', { timeout: 60_000 }, async () => {
  const work = scratch();
  const fifo = path.join(work, 'rj');
  spawnSync('mkfifo', [fifo]);
  const input = [reflogLine('http://a.org/', 1), reflogLine('ftp://a.org/', 1)].join('\n') + '\n';
  const start = () => {
    const child = spawn(path.join(BIN, 'analyze-dump'), ['--rejects', fifo, '--max-reject-ratio', '1'], {
      cwd: work,
      env: testEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let err = '';
    child.stdout!.resume();
    child.stderr!.on('data', (d: Buffer) => (err += d));
    child.stdin!.end(input);
    const done = new Promise<{ code: number | null; err: string }>((resolve) => child.on('close', (code) => resolve({ code, err })));
    return { child, done, err: () => err };
  };
  const a = start();
  await new Promise((r) => setTimeout(r, 300));
  const got = await fs.promises.readFile(fifo, 'utf8'); // the reader comes late
  const ra = await a.done;
  assert.equal(ra.code, 0, ra.err);
  assert.equal(got, `2\tunsupported scheme: ftp\t${reflogLine('ftp://a.org/', 1)}\n`);

  const b = start();
  // Its handlers are in place, and it waits for a reader (a fixed 1 s was too short for a busy machine's start-up).
  for (let i = 0; i < 600 && !b.err().includes('waiting for a reader of the --rejects FIFO'); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(b.err(), /waiting for a reader of the --rejects FIFO/);
  b.child.kill('SIGTERM');
  // Before: blocked in open(2) for a reader, it handled no signal until one came.
  const { result: rb, endCame: readerCame } = await awaitWithLateFifoEnd(b.done, fifo, fs.constants.O_RDONLY);
  assert.ok(!readerCame, `exited only when a reader came 10 s later: ${rb.err}`);
  assert.equal(rb.code, 143, rb.err);
  assert.equal(summaryOf(rb.err).status, 'interrupted');
});

test('--rejects naming a FIFO whose reader stops reading: the stage waits for it without reading on, and a signal still stops it', {
  timeout: 60_000,
}, async () => {
  const work = scratch();
  const tmp = path.join(work, 'tmp');
  fs.mkdirSync(tmp);
  const fifo = path.join(work, 'rj');
  spawnSync('mkfifo', [fifo]);
  // A reader that opens the FIFO, takes a little and then reads no more (its 64 KiB fill up).
  const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  // Records (so that --memory 1M spills) among two rejects each: 32 MiB of input, about 50 MiB of rejects.
  const group = `${reflogLine('http://a.org/p', 1)}\nx\ty\nx\tz\n`;
  const input = Buffer.from(group.repeat(Math.ceil((32 << 20) / group.length)));
  const child = spawn(path.join(BIN, 'analyze-dump'), ['--rejects', fifo, '--max-reject-ratio', '1', '--memory', '1M', '--tmp', tmp], {
    cwd: work,
    env: testEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stdout!.resume();
  child.stderr!.on('data', (d: Buffer) => (err += d));
  child.stdin!.on('error', () => undefined); // EPIPE once it is stopped
  // One piece at a time, the next once the last was taken: `fed` is what the stage could read.
  let fed = 0;
  const feed = () => {
    const piece = input.subarray(fed, fed + (1 << 16));
    if (piece.length > 0)
      child.stdin!.write(piece, (e) => {
        if (e) return;
        fed += piece.length;
        feed();
      });
  };
  feed();
  const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  try {
    let got = 0;
    const some = Buffer.alloc(4096);
    for (let tries = 0; got === 0 && tries < 1500; tries++) {
      await new Promise((r) => setTimeout(r, 20));
      try {
        got = fs.readSync(reader, some);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
      }
    }
    assert.ok(got > 0, `no rejects came: ${err}`);
    // Megabytes of rejects against a pipe of 64 KiB: wait until the stage reads no more input.
    for (let was = -1, still = 0; still < 4 && fed < input.length; ) {
      await new Promise((r) => setTimeout(r, 250));
      still = fed === was ? still + 1 : 0;
      was = fed;
    }
    // Memory stays bounded: the stage read only a few of the 32 MiB while its rejects could not go out.
    assert.ok(fed < 16 << 20, `took ${fed} bytes of input while the rejects reader stalled`);
    assert.notDeepEqual(fs.readdirSync(tmp), [], 'it spilled');
    child.kill('SIGTERM');
    // Before: blocked in write(2) to the FIFO, it handled no signal while the reader read nothing.
    let killed = false;
    const late = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, 10_000);
    const code = await done;
    clearTimeout(late);
    assert.ok(!killed, `SIGTERM did not stop it; SIGKILL 10 s later did: ${err}`);
    assert.equal(code, 143, err);
    assert.ok(!hasStackTrace(err), err);
    const s = summaryOf(err) as Record<string, number>;
    assert.equal(s.status as unknown, 'interrupted');
    assert.equal(s.records_out! + s.rejected! + s.skipped!, s.lines_in, JSON.stringify(s));
    assert.deepEqual(fs.readdirSync(tmp), [], 'spill files removed');
  } finally {
    child.kill('SIGKILL');
    fs.closeSync(reader);
  }
});

test('--rejects naming a FIFO whose reader stalls on a flood of tiny rejected lines: peak RSS within twice --memory plus 100 MiB, and every reject comes', {
  timeout: 120_000,
  skip: FAST_SUITE && 'a flood of 4 Mi rejects against a stalling reader (npm run test:all)',
}, async () => {
  const work = scratch();
  const fifo = path.join(work, 'rj');
  spawnSync('mkfifo', [fifo]);
  const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const n = 4 << 20;
  const input = Buffer.from('\t\n'.repeat(n));
  const child = spawn(path.join(BIN, 'analyze-dump'), ['--rejects', fifo, '--max-reject-ratio', '1', '--memory', '128M', '--threads', '3'], {
    cwd: work,
    env: testEnv({ MASTER_SERVER_WORKER_BYTES: '0' }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stdout!.resume();
  child.stderr!.on('data', (d: Buffer) => (err += d));
  child.stdin!.on('error', () => undefined);
  let fed = 0;
  const feed = () => {
    const piece = input.subarray(fed, fed + (1 << 16));
    if (piece.length > 0)
      child.stdin!.write(piece, (e) => {
        if (e) return;
        fed += piece.length;
        feed();
      });
    else child.stdin!.end();
  };
  feed();
  const rss = watchPeakRss(child.pid);
  let exited = false;
  const done = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      exited = true;
      resolve(code);
    }),
  );
  // Each wait below gives up by this time, so that the stage is killed (finally) and the test fails, not hangs.
  const deadline = Date.now() + 90_000;
  try {
    // The reader takes nothing until the stage reads no more input: it has taken several
    // batches (a slow start is no stall) and then nothing for a second.
    for (let was = -1, still = 0; (still < 4 || fed < 4 << 20) && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 250));
      still = fed === was ? still + 1 : 0;
      was = fed;
    }
    // Then it reads everything: each line once, in order. (End of file is no writer: before
    // the stage has opened the FIFO too, so only its exit ends the reading.)
    const some = Buffer.alloc(1 << 20);
    let lines = 0;
    let tail = Buffer.alloc(0);
    for (let wasExited = false; Date.now() < deadline; ) {
      let got = 0;
      try {
        got = fs.readSync(reader, some);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
      }
      if (got === 0) {
        if (wasExited) break;
        wasExited = exited; // one more read once it has exited: what it wrote last
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      for (let i = some.indexOf(10); i !== -1 && i < got; i = some.indexOf(10, i + 1)) lines++;
      tail = Buffer.concat([tail, some.subarray(Math.max(0, got - 64), got)]).subarray(-64);
    }
    const code = await done;
    assert.equal(code, 0, err);
    assert.equal(lines, n);
    assert.match(
      tail.toString('latin1'),
      new RegExp(`\\n${n}\\tbad field count: 2 fields, want 6 or 7\\t\\t\\n$`),
      'the last line written is the last line of input',
    );
    const s = summaryOf(err) as Record<string, number>;
    assert.equal(s.rejected, n);
    if (fs.existsSync('/proc/self/status')) assert.ok(rss.kb > 0 && rss.kb < (2 * 128 + 100) * 1024, `peak RSS ${rss.kb} KiB`);
  } finally {
    rss.stop();
    child.kill('SIGKILL');
    fs.closeSync(reader);
  }
});

test('--rejects naming a FIFO whose reader goes away: the run fails naming it, with counts that add up', { timeout: 60_000 }, async () => {
  const work = scratch();
  const fifo = path.join(work, 'rj');
  spawnSync('mkfifo', [fifo]);
  const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const child = spawn(path.join(BIN, 'analyze-dump'), ['--rejects', 'rj', '--max-reject-ratio', '1'], {
    cwd: work,
    env: testEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stdout!.resume();
  child.stderr!.on('data', (d: Buffer) => (err += d));
  child.stdin!.on('error', () => undefined);
  child.stdin!.end('x\ty\n'.repeat(100_000));
  const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  for (let tries = 0; tries < 1500; tries++) {
    await new Promise((r) => setTimeout(r, 20));
    try {
      if (fs.readSync(reader, Buffer.alloc(100)) > 0) break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
    }
  }
  fs.closeSync(reader);
  const code = await done;
  assert.equal(code, 1, err);
  assert.match(err, /^analyze-dump: rj: cannot write: EPIPE: broken pipe\n/m);
  assert.ok(!hasStackTrace(err), err);
  const s = summaryOf(err) as Record<string, number>;
  assert.equal(s.records_out! + s.rejected! + s.skipped!, s.lines_in, JSON.stringify(s));
});

test('a record too long for a joined line to hold two of its updatetags is a reject, so the chain runs hour after hour', () => {
  const work = scratch();
  // Records of the URL http://a.b/ (domain a.b): 50 bytes plus the updatetag.
  const longest = MAX_RECORD_BYTES - 50;
  const line = (hour: string, tag: string) => ['1', '1', `20110728${hour}0000`, 'p', 'http://a.b/', '1', tag].join('\t') + '\n';
  fs.writeFileSync(path.join(work, '06.reflog'), line('06', 'x'.repeat(longest)));
  // The 1000 bytes longer tag made a joined line of 1,049,416 bytes: filter-url refused it.
  fs.writeFileSync(path.join(work, '07.reflog'), line('07', 'y'.repeat(longest)) + line('07', 'z'.repeat(longest + 1000)));
  for (const hour of ['06', '07']) {
    const script = `set -euo pipefail
analyze-dump --max-url-bytes 1048576 --max-reject-ratio 1 --rejects rj ${hour}.reflog 2>ad.log | group-sum | join-current --current cl \\
  | filter-url --current-out cl.next --now 20110728${hour}3000 > out
mv cl.next cl`;
    const r = spawnSync('bash', ['-c', script], { cwd: work, env: testEnv(), encoding: 'utf8' });
    assert.equal(r.status, 0, `hour ${hour}: ${r.stderr.slice(0, 500)}`);
    const out = fs.readFileSync(path.join(work, 'out'), 'utf8');
    assert.equal(out.length, MAX_RECORD_BYTES + 1, `hour ${hour}: the longest record is sent whole`);
    assert.ok(out.includes(hour === '06' ? 'x'.repeat(longest) : 'y'.repeat(longest)));
  }
  const s = summaryOf(fs.readFileSync(path.join(work, 'ad.log'), 'utf8'));
  assert.deepEqual([s.records_out, s.rejected, s.rejected_by_reason], [1, 1, { 'record too long': 1 }]);
  assert.match(
    fs.readFileSync(path.join(work, 'rj'), 'utf8'),
    new RegExp(`^2\\trecord too long: ${MAX_RECORD_BYTES + 1000} bytes, max ${MAX_RECORD_BYTES}\\t1\\t`),
  );
});

test("the URL limit counts the reflog's UTF-8 bytes: an IDN URL of 8193 bytes (4191 characters, 4676 bytes as punycode) is too long", () => {
  const opts: UrlOptions = { maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode: 'registrable' };
  const host = Array.from({ length: 80 }, () => 'я'.repeat(50)).join('.') + '.рф';
  for (const bytes of [8192, 8193]) {
    const bare = `http://${host}/`;
    const raw = bare + 'p'.repeat(bytes - Buffer.byteLength(bare));
    assert.equal(Buffer.byteLength(raw), bytes);
    assert.ok(raw.length < 4200, 'far fewer characters than bytes');
    const r = canonicalize(raw, opts);
    if (bytes === 8192) {
      assert.ok('url' in r, JSON.stringify(r));
      assert.ok(Buffer.byteLength(r.url) < 5000, 'the canonical form is shorter');
    } else assert.deepEqual(r, { reason: 'URL too long', detail: '8193 bytes, max 8192' });
  }
});

test('a host with and without its one trailing dot has one domain, also where no registrable domain exists', () => {
  const opts: UrlOptions = { maxUrlBytes: 8192, dropParams: null, sortQuery: false, domainMode: 'registrable' };
  // Registrable, public suffix itself, single label, empty label (leading or inside), IP.
  for (const host of ['www.example.com', 'co.uk', 'localhost', 'a..example.com', '.example.com', '10.0.0.1']) {
    const plain = canonicalize(`http://${host}/x`, opts);
    const dotted = canonicalize(`http://${host}./x`, opts);
    assert.ok('domain' in plain && 'domain' in dotted, host);
    assert.equal(dotted.domain, plain.domain, host);
    assert.ok(!plain.domain.endsWith('.'), host);
  }
  // Two trailing dots are an empty label, not a spelling of the host with one.
  const two = canonicalize('http://example.com../x', opts);
  assert.ok('domain' in two && two.domain === 'example.com..', JSON.stringify(two));
});

test('globMatch agrees with the anchored RegExp of the glob on random globs and names', () => {
  const next = prng(5);
  const pick = (alphabet: string, max: number) =>
    Array.from({ length: Math.floor(next() * (max + 1)) }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
  const asRegExp = (g: string) => new RegExp(`^${g.replace(/[.+^${}()|[\]\\*?]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`))}$`);
  let matched = 0;
  for (let n = 0; n < 20000; n++) {
    const glob = pick('ab*?.', 6);
    const name = pick('ab.*?', 8);
    const want = asRegExp(glob).test(name);
    assert.equal(globMatch(glob, name), want, `${glob} on ${name}`);
    if (want) matched++;
  }
  assert.ok(matched > 2000 && matched < 18000, `both outcomes are exercised (${matched} matches)`);
});

test('globMatch on a hostile name: many stars against 8 KiB ends without backtracking blow-up', { timeout: 60_000 }, () => {
  // A backtracking RegExp of '*u*u*u*x' needs about n^4 steps here; the matcher n x 8.
  assert.equal(globMatch('*u*u*u*x', 'u'.repeat(8100)), false);
  assert.equal(globMatch('*u*u*u*x', 'u'.repeat(8100) + 'x'), true);
  const out = runBin('analyze-dump', ['--drop-params', '*u*u*u*x', '--threads', '0'], reflogLine(`http://a.com/?${'u'.repeat(8100)}=1&k=2`, 1));
  assert.equal(out.status, 0, out.stderr);
  assert.match(out.stdout, /\thttp:\/\/a\.com\/\?u{8100}=1&k=2\n$/);
});

test('UrlResolver: every answer, first or remembered, across start-overs, equals canonicalize and XXH64', async () => {
  const hash = await loadUrlHasher();
  const raw64 = await loadUrlHash();
  const opts: UrlOptions = { maxUrlBytes: 200, dropParams: parseParamGlobs('utm_*'), sortQuery: true, domainMode: 'registrable' };
  const pool = [
    'http://a.example.com/x?b=2&a=1&utm_x=3#f',
    'HTTP://WWW.Example.CO.UK:80/%7euser/../p',
    'https://bücher.example/straße',
    'https://host.example/' + 'y'.repeat(250),
    'ftp://files.example/x',
    'not a url',
    'http://[::1]:8080/v6',
    'http://192.168.0.1/ip',
  ];
  for (let i = 0; i < 40; i++) pool.push(`http://s${i % 13}.example.org/p/${i}?q=${i}`);
  const next = prng(17);
  // No memory, and small limits: it starts over every few entries, by count, by bytes of keys, by bytes of answers.
  for (const [maxEntries, maxBytes] of [
    [0, 0],
    [3, 1 << 20],
    [16, 1 << 20],
    [1 << 16, 1 << 20],
    [1 << 16, 300],
    [1 << 16, 1000],
  ] as const) {
    const u = new UrlResolver(opts, raw64, maxEntries, maxBytes);
    for (let n = 0; n < 2000; n++) {
      const raw = pool[Math.floor(next() * pool.length)]!;
      const bytes = Buffer.from(`\t${raw}\t`);
      const k = u.resolve(bytes, 1, bytes.length - 1, /[^\x00-\x7f]/.test(raw));
      const want = canonicalize(raw, opts);
      const bad = u.rejected(k);
      if ('reason' in want) {
        assert.deepEqual(bad, want, raw);
        continue;
      }
      assert.equal(bad, undefined, raw);
      const got = u.bytes.toString('latin1', u.start[k]!, u.end[k]!);
      const id = hash(want.url);
      assert.equal(got, `${id}${want.domain}\t${want.url}`, raw);
      assert.equal(u.hi[k], parseInt(id.slice(0, 8), 16));
      assert.equal(u.lo[k], parseInt(id.slice(8), 16));
    }
  }
});

test('a line longer than the limit is a header when it has no TAB at all, else a reject (TAB before or after the cut)', () => {
  const good = 'b\t5\t20110727200841\t1\thttp://e.com/\t1\n';
  // Well past the 73,728-byte limit and past one read, so the reader cuts it; the
  // input is over one 1 MiB batch, so with --threads 2 the workers see the lines. The
  // lines of 1.5 MiB fill a whole batch buffer (a file is read straight into them).
  const big = 400_000;
  const huge = 1_500_000;
  const lines = ['H'.repeat(big), 'H'.repeat(big) + '\tx', 'x\t' + 'H'.repeat(big), 'H'.repeat(80_000), 'H'.repeat(huge) + '\tx', 'H'.repeat(huge)];
  const input = lines.map((l) => l + '\n' + good).join('');
  for (const [threads, from] of [
    ['0', 'pipe'],
    ['2', 'pipe'],
    ['0', 'file'],
    ['2', 'file'],
  ] as const) {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'in.reflog'), input);
    const args = ['--threads', threads, '--max-reject-ratio', '1', '--rejects', 'rj', ...(from === 'file' ? ['in.reflog'] : [])];
    const r = spawnSync(path.join(BIN, 'analyze-dump'), args, { cwd: dir, input: from === 'pipe' ? input : '', env: testEnv(), maxBuffer: 1 << 26 });
    const what = `threads ${threads}, from a ${from}`;
    assert.equal(r.status, 0, r.stderr.toString());
    const s = summaryOf(r.stderr.toString());
    assert.equal(s.skipped_header, 3, what);
    assert.equal(s.rejected, 3, what);
    assert.equal(s.records_out, 6, what);
    const rj = fs.readFileSync(path.join(dir, 'rj'), 'latin1').split('\n').filter(Boolean);
    assert.deepEqual(
      rj.map((l) => l.split('\t').slice(0, 2).join('\t')),
      ['3\tline too long: more than 73728 bytes', '5\tline too long: more than 73728 bytes', '9\tline too long: more than 73728 bytes'],
      what,
    );
    // The rejects file keeps such a line only up to the limit, exactly.
    assert.deepEqual(
      rj.map((l) => l.slice(l.indexOf('\t', l.indexOf('\t') + 1) + 1)),
      [lines[1]!.slice(0, 73728), lines[2]!.slice(0, 73728), lines[4]!.slice(0, 73728)],
      what,
    );
  }
});

test('--rejects naming the file stdout goes to is a usage error: the records and the rejects would overwrite each other', () => {
  const dir = scratch();
  fs.writeFileSync(path.join(dir, 'in.reflog'), 'b\tp\t20110101000000\tp\thttp://a.com/\t1\nb\tp\tbad\tp\thttp://a.com/\t1\n');
  const run = (out: string) =>
    spawnSync('bash', ['-c', `${path.join(BIN, 'analyze-dump')} --max-reject-ratio 1 --rejects out.tsv < in.reflog > ${out}`], {
      cwd: dir,
      env: testEnv(),
      encoding: 'utf8',
    });
  const same = run('out.tsv');
  assert.equal(same.status, 2, same.stderr);
  assert.match(same.stderr, /^analyze-dump: --rejects out\.tsv is stdout itself/);
  const other = run('records.tsv');
  assert.equal(other.status, 0, other.stderr);
  assert.equal(fs.readFileSync(path.join(dir, 'out.tsv'), 'utf8').split('\n').length - 1, 1, 'one reject');
  assert.equal(fs.readFileSync(path.join(dir, 'records.tsv'), 'utf8').split('\n').length - 1, 1, 'one record');
});

test("the line limit is on the line without its CR, wherever the line falls in the input's chunks", () => {
  const dir = scratch();
  const maxLine = 16 + 65536; // --max-url-bytes 16
  const head = 'b\tp\t20110101000000\tp\thttp://a.com/\t1\t';
  /** A valid reflog line of `n` bytes before its line end (a long updatetag). */
  const lineOf = (n: number) => head + 'u'.repeat(n - head.length);
  const cases: [number, string, 'record' | 'line too long'][] = [
    [maxLine, '\n', 'record'],
    [maxLine, '\r\n', 'record'], // was "line too long": the CR was counted
    [maxLine + 1, '\n', 'line too long'],
    [maxLine + 1, '\r\n', 'line too long'],
    [maxLine - 1, '\r\r\n', 'line too long'], // a CR inside updatetag is a reject of its own
  ];
  // Across chunks (the line that crosses a read) in the fast suite; inside a chunk too in npm run test:all.
  for (const where of FAST_SUITE ? ['across chunks'] : ['inside a chunk', 'across chunks']) {
    for (const [n, end, want] of cases) {
      // Reading a file goes 1 MiB at a time: a filler puts the line across the first boundary.
      const filler = where === 'across chunks' ? 'x'.repeat((1 << 20) - 1000) + '\n' : '';
      const file = path.join(dir, 'in.reflog');
      fs.writeFileSync(file, filler + lineOf(n) + end);
      const r = runBin('analyze-dump', ['--max-url-bytes', '16', '--max-reject-ratio', '1', file], '', dir);
      assert.equal(r.status, 0, r.stderr);
      const s = summaryOf(r.stderr);
      const what = `${where}: ${n} bytes + ${JSON.stringify(end)}`;
      if (want === 'record') assert.equal(s.records_out, 1, what);
      else if (n > maxLine) assert.deepEqual(s.rejected_by_reason, { 'line too long': 1 }, what);
      else assert.equal(s.rejected, 1, what);
    }
  }
});

test('option values are read strictly: --threads only as digits, --memory from 1M up to the machine', () => {
  for (const [args, want] of [
    [['--threads', ''], /--threads wants an integer from 0 to 64, got ''/],
    [['--threads', '0x2'], /--threads wants an integer from 0 to 64, got '0x2'/],
    [['--threads', '1e1'], /--threads wants an integer from 0 to 64/],
    [['--threads', '65'], /--threads wants an integer from 0 to 64/],
    [['--memory', '512K'], /--memory wants a size of at least 1M/],
    [['--memory', '1T'], /--memory wants a size in bytes, K, M or G \(e.g. 64M, 1G\), got '1T'/],
    [['--memory', '99999999G'], /--memory 99999999G is more than this machine's memory \(\d+M\)/],
  ] as const) {
    const r = runBin('analyze-dump', [...args], '');
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, want);
  }
});

test('--threads N must fit --memory (about 40 MiB per worker thread, at most as much as the budget): else a usage error saying how many fit', () => {
  for (const [threads, memory, fit] of [
    ['64', '64M', 1],
    ['2', '64M', 1],
    ['1', '1M', 0],
    ['5', '160M', 4],
    ['64', '1G', 25],
  ] as const) {
    const r = runBin('analyze-dump', ['--threads', threads, '--memory', memory], '');
    assert.equal(r.status, 2, `--threads ${threads} --memory ${memory}: ${r.stderr}`);
    assert.equal(
      r.stderr,
      `analyze-dump: --threads ${threads} does not fit --memory ${memory}: each worker thread takes about 40M beyond it, and together they may take at most as much; at most ${fit} fit${fit === 1 ? 's' : ''} (0 parses on the main thread)\nTry 'analyze-dump --help' for more information.\n`,
    );
  }
  for (const [threads, memory] of [
    ['1', '64M'],
    ['4', '160M'],
    ['0', '1M'],
  ] as const) {
    const r = runBin('analyze-dump', ['--threads', threads, '--memory', memory], reflogLine('http://a.org/', 1));
    assert.equal(r.status, 0, `--threads ${threads} --memory ${memory}: ${r.stderr}`);
  }
});

test('a CR inside the URL field is a reject, not a URL that WHATWG silently joins together', () => {
  const cases: [string, string][] = [
    [reflogLine('http://a.com/x\ry', 1), 'bad URL: contains CR'],
    [reflogLine('http://a.\rcom/', 1), 'bad URL: contains CR'],
    [reflogLine('\rhttp://a.com/', 1, '20110727200841', 'tag'), 'bad URL: contains CR'],
    [reflogLine('http://a.com/x\ry', 1, '20110727200841', 't\rg'), 'bad updatetag: contains CR'],
    // A CR before the URL, in a field that is not read, leaves the URL alone.
    [['b', '5', '20110727200841', 'p\rq', 'http://a.com/xy', '1'].join('\t'), 'record'],
  ];
  const dir = scratch();
  const rejects = path.join(dir, 'rj');
  const input = cases.map(([l]) => l).join('\n') + '\n';
  const r = runBin('analyze-dump', ['--max-reject-ratio', '1', '--rejects', rejects], input, dir);
  assert.equal(r.status, 0, r.stderr);
  const got = fs
    .readFileSync(rejects, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'));
  const want = cases.flatMap(([, w], i) => (w === 'record' ? [] : [[String(i + 1), w]]));
  assert.deepEqual(
    got.map((f) => f.slice(0, 2)),
    want,
  );
  assert.deepEqual(r.stdout.split('\t').slice(4), ['a.com', 'http://a.com/xy\n']);
});

test('sizes (--memory of analyze-dump and the runner) are binary units in either case, with or without i/B, and no spaces', () => {
  const cases: [string, number | null][] = [
    ['65536', 65536],
    ['64K', 64 << 10],
    ['1024k', 1 << 20],
    ['256M', 256 << 20],
    ['256m', 256 << 20],
    ['64MiB', 64 << 20],
    ['64mb', 64 << 20],
    ['1G', 1 << 30],
    ['2gib', 2 * 2 ** 30],
    [' 64M ', null],
    ['64M ', null],
    ['100B', 100],
    ['64 M', null],
    ['1.5G', null],
    ['-1M', null],
    ['M', null],
    // The documented rule exactly (docs/formats-and-rules.md): K, M or G with i, B or iB after it or not, any case; B or nothing is bytes.
    ['64Mi', 64 << 20],
    ['64mI', 64 << 20],
    ['64KB', 64 << 10],
    ['64kib', 64 << 10],
    ['1048576b', 1 << 20],
    ['064M', 64 << 20],
    ['0', 0],
    ['', null],
    ['1e6', null],
    ['0x100', null],
    ['+1M', null],
    ['1_000M', null],
    ['1T', null],
    ['64iB', null],
    ['64Bi', null],
    ['64MiBB', null],
  ];
  for (const [text, want] of cases) assert.equal(parseSize(text), want, JSON.stringify(text));
  // The lower bound is 1 MiB exactly, however it is written.
  assert.equal(parseBudget('1024K'), 1 << 20);
  assert.equal(parseBudget('1048576'), 1 << 20);
  assert.deepEqual(parseBudget('1048575'), { error: "wants a size of at least 1M (e.g. 64M, 1G), got '1048575'" });
  assert.deepEqual(parseBudget('0'), { error: "wants a size of at least 1M (e.g. 64M, 1G), got '0'" });
  assert.deepEqual(parseBudget('1T'), { error: "wants a size in bytes, K, M or G (e.g. 64M, 1G), got '1T'" });
  assert.equal(parseBudget('64MB'), 64 << 20, 'MB is binary, as M');
});

test('URL options reach the worker threads: over one 1 MiB batch, --threads 2 drops, sorts and maps as --threads 0 does', () => {
  // 3 MiB of lines: the workers parse every batch but the last.
  const lines: string[] = [];
  for (let i = 0, bytes = 0; bytes < 3 << 20; i++) {
    lines.push(`b\t5\t20110727200841\t${i}\thttp://www${i % 7}.shop${i % 13}.co.uk/p${i}?z=1&utm_source=news&a=${i}\t1\n`);
    bytes += lines[i]!.length;
  }
  const input = lines.join('');
  const args = ['--drop-params', 'utm_*', '--sort-query', '--domain-mode', 'host'];
  const out = (threads: string) => {
    const r = runBin('analyze-dump', ['--threads', threads, ...args], input);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const inline = out('0');
  assert.doesNotMatch(inline, /utm_source/);
  assert.match(inline, /\twww3\.shop3\.co\.uk\thttp:\/\/www3\.shop3\.co\.uk\/p3\?a=3&z=1\n/);
  assert.equal(out('2'), inline);
});

test('--log-level debug counts every batch where it was parsed: with --threads 0, or an input of one batch, all on the main thread', () => {
  const where = (args: string[], input: string) => {
    const r = runBin('analyze-dump', [...args, '--log-level', 'debug'], input);
    assert.equal(r.status, 0, r.stderr);
    const l = r.stderr.split('\n').find((x) => x.includes('"batches_on_workers"'));
    assert.ok(l, r.stderr);
    const j = JSON.parse(l) as Record<string, number>;
    return { workers: j.batches_on_workers, main: j.batches_on_main_thread };
  };
  // Over 2 MiB of lines: more than one batch (a batch is 1 MiB or more, as the reads cut it).
  const lines: string[] = [];
  for (let i = 0, bytes = 0; bytes < (2 << 20) + 4096; i++) {
    lines.push(`b\t5\t20110727200841\t${i}\thttp://a${i % 97}.example.com/p${i}\t1\n`);
    bytes += lines[i]!.length;
  }
  const none = where(['--threads', '0'], lines.join(''));
  assert.equal(none.workers, 0);
  assert.ok(none.main !== undefined && none.main >= 2, `every batch on the main thread: ${JSON.stringify(none)}`);
  // A small input is parsed here before a worker could start.
  assert.deepEqual(where(['--threads', '1'], lines.slice(0, 3).join('')), { workers: 0, main: 1 });
  assert.deepEqual(where(['--threads', '0'], ''), { workers: 0, main: 0 });
});

test('a spill directory that a SIGKILLed run left in --tmp is removed by the next run; live, foreign and unrelated names stay', {
  timeout: 120_000,
}, async () => {
  const work = scratch('ms-ad-stale-');
  const tmp = path.join(work, 'tmp');
  fs.mkdirSync(tmp);
  const reflog = path.join(work, 'big.reflog');
  const fd = fs.openSync(reflog, 'w');
  generateReflog(fd, { lines: 60_000, hour: 1, seed: 5 });
  fs.closeSync(fd);
  // --memory 1M spills every few thousand lines; killed once a run file is on disk (its cleanup cannot run).
  const child = spawn(path.join(BIN, 'analyze-dump'), ['--memory', '1M', '--tmp', tmp], {
    cwd: work,
    env: testEnv(),
    stdio: [fs.openSync(reflog, 'r'), 'ignore', 'ignore'],
  });
  const ended = new Promise((r) => child.on('close', r));
  const mine = `${SPILL_PREFIX}${child.pid}-${HOST_TAG}-`;
  const spilled = () => fs.readdirSync(tmp).some((d) => d.startsWith(mine) && fs.readdirSync(path.join(tmp, d)).length > 0);
  for (const deadline = Date.now() + 60_000; !spilled() && child.exitCode === null && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 5));
  child.kill('SIGKILL');
  await ended;
  const left = fs.readdirSync(tmp).filter((d) => d.startsWith(mine));
  assert.equal(left.length, 1, 'the killed run left its spill directory');
  const keep = [
    `${ownedTempPrefix(SPILL_PREFIX)}live01`,
    `${SPILL_PREFIX}${child.pid}-${HOST_TAG === '00000000' ? '11111111' : '00000000'}-host01`,
    `${SPILL_PREFIX}Ab12Cd`,
  ];
  for (const d of keep) fs.mkdirSync(path.join(tmp, d));
  const r = runBin('analyze-dump', ['--tmp', tmp], '1\t0\t20110728060000\tp\thttp://a.com/\t1\n', work);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`removed ${path.join(tmp, left[0]!)}, left by a run that was killed`), r.stderr);
  assert.deepEqual(fs.readdirSync(tmp).sort(), [...keep].sort(), "only the dead run's directory was removed");
});
