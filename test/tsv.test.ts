// The byte-level line readers (src/core/lines.ts), file writers (writers.ts) and
// temporary files (temps.ts), and the byte helpers the streaming stages build their
// output with: same lines as a plain split for any chunking or block size, errors
// naming the line, exact sums and times.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataError } from '../src/core/errors.js';
import { addHits, addHitsAt } from '../src/core/hits.js';
import { IdOrder, LineRef } from '../src/core/records.js';
import { checkUrlRecordAt, scanUrlRecord } from '../src/core/record-checks.js';
import { timestampMsAt, timestampToMs } from '../src/core/time.js';
import { copyBytes, findTab, putBytes, putHex32 } from '../src/core/bytes.js';
import { ByteLineSplitter, FileLineReader } from '../src/core/lines.js';
import { FileWriter } from '../src/core/writers.js';
import { HOST_TAG, removeStaleTemps } from '../src/core/temps.js';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { BytesIndex } from '../src/core/bytesindex.js';
import { ROOT, scratch } from './lib/run.js';
import { prng } from '../scripts/prng.js';

process.env.TZ = 'UTC';

/**
 * Random lines without LF, some empty: UTF-8 text (ASCII with TABs, and 2-, 3- and
 * 4-byte characters, which chunking may cut), and with probability `bad` a line
 * with one byte overwritten at random (mostly invalid UTF-8 then).
 */
function randomLines(r: () => number, n: number, maxLen: number, bad = 0): Buffer[] {
  const lines: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    let text = '';
    const len = Math.floor(r() * maxLen);
    while (Buffer.byteLength(text) < len) {
      const k = r();
      const cp =
        k < 0.7
          ? r() < 0.1
            ? 9
            : 32 + Math.floor(r() * 95)
          : k < 0.8
            ? 0x80 + Math.floor(r() * 0x780)
            : k < 0.9
              ? 0xe000 + Math.floor(r() * 0x2000)
              : 0x10000 + Math.floor(r() * 0x100000);
      text += String.fromCodePoint(cp);
    }
    const b = Buffer.from(text);
    if (b.length > 0 && r() < bad) {
      const c = Math.floor(r() * 256);
      b[Math.floor(r() * b.length)] = c === 10 ? 0xff : c;
    }
    lines.push(b);
  }
  return lines;
}

/** The lines a reader gives back before it stops at the first line that is not UTF-8 (its index, or -1). */
function upToBadUtf8(lines: Buffer[]): { good: Buffer[]; bad: number } {
  const bad = lines.findIndex((l) => !isUtf8(l));
  return { good: bad < 0 ? lines : lines.slice(0, bad), bad };
}

const isBadUtf8At = (line: number) => (e: unknown) => e instanceof DataError && e.code === 'BAD_UTF8' && e.place?.line === line;

test('ByteLineSplitter: any chunking gives back the input lines, byte for byte, numbered, up to one that is not UTF-8', () => {
  const r = prng(5);
  let stopped = 0;
  for (let round = 0; round < 300; round++) {
    const lines = randomLines(r, Math.floor(r() * 30), 50, round % 2 ? 0.05 : 0);
    const { good, bad } = upToBadUtf8(lines);
    const input = Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
    const s = new ByteLineSplitter('in', 256);
    const got: Buffer[] = [];
    let at = 0;
    const run = () => {
      while (at < input.length) {
        const n = 1 + Math.floor(r() * 70);
        // A fresh chunk each time, overwritten after the call: lines must not be read later.
        const chunk = Buffer.from(input.subarray(at, at + n));
        s.push(chunk, (buf, start, end, lineNo) => {
          assert.equal(lineNo, got.length + 1);
          got.push(Buffer.from(buf.subarray(start, end)));
        });
        chunk.fill(0x21);
        at += n;
      }
      s.end();
    };
    if (bad < 0) run();
    else {
      assert.throws(run, isBadUtf8At(bad + 1));
      stopped++;
    }
    assert.deepEqual(got, good);
  }
  assert.ok(stopped > 20, `only ${stopped} rounds had a line that is not UTF-8`);
});

test('ByteLineSplitter: a 1 MiB line that comes one byte at a time is put together in linear work', { timeout: 10_000 }, async () => {
  // Each chunk used to be concatenated onto everything carried so far: 5 x 10^11 bytes
  // copied for this line (50 s here, against 0.1 s; the timeout is the check); as 64 KiB
  // pipe reads, 8 MiB of copies and garbage per line (logsaver on 600 such lines: 297 MB
  // peak RSS, 261 MB now).
  const size = 1 << 20;
  const s = new ByteLineSplitter('in', size);
  const line = Buffer.alloc(size, 0x61);
  line[0] = 0x62;
  line[size - 1] = 0x63;
  const got: string[] = [];
  const take = (buf: Buffer, start: number, end: number) => got.push(buf.toString('latin1', start, end));
  const one = Buffer.alloc(1);
  for (let i = 0; i < size; i++) {
    one[0] = line[i]!;
    s.push(one, take);
    if (i % 4096 === 0) await new Promise((resolve) => setImmediate(resolve)); // the timeout can end the test
  }
  s.push(Buffer.from('\nshort\n'), take);
  s.end();
  assert.equal(got.length, 2);
  assert.ok(got[0] === line.toString('latin1'), 'the long line, byte for byte');
  assert.equal(got[1], 'short');
});

test('ByteLineSplitter: a cut last line and an over-long line are errors naming the line', () => {
  const s = new ByteLineSplitter('in.tsv', 8);
  s.push(Buffer.from('a\nbc\nde'), () => undefined);
  assert.throws(
    () => s.end(),
    (e: unknown) => e instanceof DataError && e.code === 'TRUNCATED' && e.place?.line === 3,
  );
  const t = new ByteLineSplitter('in.tsv', 8);
  t.push(Buffer.from('ok\n12345'), () => undefined);
  assert.throws(
    () => t.push(Buffer.from('6789\n'), () => undefined),
    (e: unknown) => e instanceof DataError && e.code === 'LINE_TOO_LONG' && e.place?.line === 2,
  );
  // A line that never ends is refused once it passes the limit, not held to the end of input.
  const u = new ByteLineSplitter('in.tsv', 8);
  u.push(Buffer.from('ok\nxxxx'), () => undefined);
  u.push(Buffer.from('xxxx'), () => undefined);
  assert.throws(
    () => u.push(Buffer.from('x'), () => undefined),
    (e: unknown) => e instanceof DataError && e.code === 'LINE_TOO_LONG' && e.place?.line === 2,
  );
});

test('FileLineReader.next: any block size gives back the file lines; a cut last line is an error', () => {
  const dir = scratch('tsv');
  const r = prng(9);
  for (let round = 0; round < 60; round++) {
    const lines = randomLines(r, Math.floor(r() * 40), 40, round % 2 ? 0.05 : 0);
    const { good, bad } = upToBadUtf8(lines);
    const file = path.join(dir, `f${round}`);
    fs.writeFileSync(file, Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')])));
    const reader = new FileLineReader(file, 1 + Math.floor(r() * 50));
    const line = { buf: new Uint8Array(0), start: 0, end: 0 };
    const got: Buffer[] = [];
    const run = () => {
      while (reader.next(line)) got.push(Buffer.from(line.buf.subarray(line.start, line.end)));
    };
    if (bad >= 0) {
      assert.throws(run, isBadUtf8At(bad + 1));
      assert.deepEqual(got, good);
      continue;
    }
    run();
    assert.deepEqual(got, lines);
    assert.equal(reader.lineNo, lines.length);
    assert.equal(reader.next(line), false, 'stays at the end');
  }
  const cut = path.join(dir, 'cut');
  fs.writeFileSync(cut, 'a\nb\nc');
  const reader = new FileLineReader(cut, 3);
  const line = { buf: new Uint8Array(0), start: 0, end: 0 };
  assert.equal(reader.next(line), true);
  assert.equal(reader.next(line), true);
  assert.throws(
    () => reader.next(line),
    (e: unknown) => e instanceof DataError && e.code === 'TRUNCATED' && e.place?.line === 3,
  );
});

test('FileLineReader holds every line to the 1 MiB limit, also one that ends in a later block', () => {
  const dir = scratch('tsv');
  const MiB = 1 << 20;
  // [line lengths] -> the line that is too long (0: none): ends in the block it began in,
  // in the next block (the limit was not checked there), or exactly at the limit.
  for (const [lens, bad] of [
    [[10, MiB + 300_000], 2],
    [[MiB - 100, MiB + 1], 2],
    [[5, MiB, 7], 0],
  ] as const) {
    const file = path.join(dir, `long-${lens.join('-')}`);
    fs.writeFileSync(file, Buffer.concat(lens.map((n) => Buffer.from('x'.repeat(n) + '\n'))));
    const reader = new FileLineReader(file);
    const line = { buf: new Uint8Array(0), start: 0, end: 0 };
    const run = () => {
      while (reader.next(line)) assert.ok(line.end - line.start <= MiB);
    };
    if (bad === 0) run();
    else assert.throws(run, (e: unknown) => e instanceof DataError && e.code === 'LINE_TOO_LONG' && e.place?.line === bad);
  }
  // A last line that never ends: too long once past the limit, not "cut off" after reading it all.
  const endless = path.join(dir, 'endless');
  fs.writeFileSync(endless, 'a\n' + 'x'.repeat(3 * MiB));
  const reader = new FileLineReader(endless);
  const line = { buf: new Uint8Array(0), start: 0, end: 0 };
  assert.equal(reader.next(line), true);
  assert.throws(
    () => reader.next(line),
    (e: unknown) => e instanceof DataError && e.code === 'LINE_TOO_LONG' && e.place?.line === 2,
  );
});

test('putBytes copies short and long ranges exactly', () => {
  const src = Buffer.from(Array.from({ length: 200 }, (_, i) => i));
  for (const [from, to] of [
    [0, 0],
    [3, 20],
    [5, 44],
    [0, 200],
    [150, 199],
  ] as const) {
    const dst = Buffer.alloc(260, 0xff);
    assert.equal(putBytes(dst, 9, src, from, to), 9 + to - from);
    assert.deepEqual(dst.subarray(9, 9 + to - from), src.subarray(from, to));
    assert.equal(dst[8], 0xff);
    assert.equal(dst[9 + to - from], 0xff);
  }
});

test('copyBytes copies from a plain Uint8Array or a Buffer, and a copy past the end is an error, not a cut', () => {
  const bytes = Uint8Array.from({ length: 100 }, (_, i) => i);
  for (const src of [bytes, Buffer.from(bytes.buffer, 10, 90), new Uint8Array(bytes.buffer, 10, 90)]) {
    const dst = new Uint8Array(64).fill(0xff);
    assert.equal(copyBytes(src, 5, 55, dst, 7), 50);
    assert.deepEqual([...dst.subarray(7, 57)], [...src.subarray(5, 55)]);
    assert.equal(dst[6], 0xff);
    assert.equal(dst[57], 0xff);
    assert.throws(() => copyBytes(src, 0, 60, dst, 5), RangeError);
    assert.equal(dst[63], 0xff, 'nothing was copied past the end');
  }
});

test('findTab finds the first TAB in its range, near or far, as indexOf does, and none beyond the range', () => {
  const rand = prng(7);
  for (let n = 0; n < 2000; n++) {
    const len = Math.floor(rand() * 80);
    const b = Buffer.alloc(len, 0x61);
    for (let k = 0; k < 3; k++) if (len > 0 && rand() < 0.5) b[Math.floor(rand() * len)] = 9;
    const from = Math.floor(rand() * (len + 1));
    const to = from + Math.floor(rand() * (len - from + 1));
    const i = b.indexOf(9, from);
    const want = i !== -1 && i < to ? i : -1;
    assert.equal(findTab(b, from, to), want, `${JSON.stringify(b.toString('latin1'))} [${from}, ${to})`);
    assert.equal(findTab(new Uint8Array(b), from, to), want, 'the same on a plain Uint8Array');
  }
});

test('putHex32 writes 8 lower-case hex digits, leading zeros kept, and nothing around them', () => {
  for (const v of [0, 0xf, 0xa0, 0x0abc1234, 0x7fffffff, 0x80000000, 0xdeadbeef, 0xffffffff]) {
    const dst = Buffer.alloc(12, 0x2e);
    assert.equal(putHex32(dst, 2, v), 10);
    assert.equal(dst.toString('latin1'), `..${v.toString(16).padStart(8, '0')}..`);
  }
});

test('addHitsAt equals addHits, in canonical form, below and beyond 2^53', () => {
  const r = prng(3);
  const pick = () => {
    const kind = r();
    if (kind < 0.5) return String(Math.floor(r() * 1000));
    if (kind < 0.7) return '000' + String(Math.floor(r() * 100));
    if (kind < 0.85) return String(Number.MAX_SAFE_INTEGER - Math.floor(r() * 3));
    return '9'.repeat(1 + Math.floor(r() * 30));
  };
  const dst = new Uint8Array(32);
  for (let i = 0; i < 2000; i++) {
    const a = pick();
    const b = pick();
    const buf = Buffer.from(`x${a}\t${b}y`);
    const n = addHitsAt(buf, 1, 1 + a.length, 2 + a.length, 2 + a.length + b.length, dst);
    assert.equal(Buffer.from(dst.subarray(0, n)).toString(), addHits(a, b), `${a} + ${b}`);
    assert.equal(Buffer.from(dst.subarray(0, n)).toString(), (BigInt(a) + BigInt(b)).toString());
  }
});

test('timestampMsAt reads local time, from any offset, with years before 100 and Feb 29 of year 0', () => {
  for (const ts of ['20110728070000', '19700101000000', '20240229235959', '00500101000000', '00000229120000', '99991231235959']) {
    const buf = Buffer.from(`--${ts}--`, 'latin1');
    const d = new Date(0);
    d.setUTCFullYear(+ts.slice(0, 4), +ts.slice(4, 6) - 1, +ts.slice(6, 8));
    d.setUTCHours(+ts.slice(8, 10), +ts.slice(10, 12), +ts.slice(12, 14), 0);
    assert.equal(timestampMsAt(buf, 2), d.getTime(), ts);
    assert.equal(timestampToMs(ts), d.getTime(), ts);
  }
});

test('IdOrder: ascending ids pass; a repeat or a step back is named', () => {
  const o = new IdOrder();
  const id = (s: string) => Buffer.from(`..${s}`, 'latin1');
  assert.equal(o.check(id('0000000000000001'), 2), null);
  assert.equal(o.check(id('00000000000000ff'), 2), null);
  assert.match(o.check(id('00000000000000ff'), 2) ?? '', /^duplicate id 00000000000000ff/);
  assert.match(o.check(id('0000000000000010'), 2) ?? '', /^id 0000000000000010 is out of order after 00000000000000ff/);
});

test('BytesIndex numbers distinct byte strings densely, as a Map of their text would, through growth', () => {
  const r = prng(21);
  const index = new BytesIndex();
  // Twice over: the second time after clear(), which must forget every key and its bytes.
  for (let round = 0; round < 2; round++) {
    const model = new Map<string, number>();
    // Short keys from a small alphabet repeat often, yet thousands are distinct (the
    // key tables start at 1024); long ones outgrow the first arena, and one is over
    // four times its size (growth must reach the key, not just double).
    for (let i = 0; i < 15000; i++) {
      const len = i === 7 ? 300000 : r() < 0.995 ? Math.floor(r() * 7) : 70000 + Math.floor(r() * 10);
      const key = Array.from({ length: len }, () => 'ab\tç'[Math.floor(r() * 4)]).join('');
      const bytes = Buffer.from(`xx${key}yy`);
      const k = index.add(bytes, 2, bytes.length - 2);
      const want = model.get(key);
      assert.equal(index.added, want === undefined, key.slice(0, 20));
      if (want === undefined) {
        assert.equal(k, model.size);
        model.set(key, k);
      } else assert.equal(k, want);
    }
    assert.ok(model.size > 2048, `${model.size} distinct keys`);
    assert.equal(index.size, model.size);
    assert.equal(
      index.bytes,
      [...model.keys()].reduce((n, key) => n + Buffer.byteLength(key), 0),
    );
    for (const [key, k] of model) assert.equal(index.key(k), key);
    index.clear();
    assert.equal(index.size, 0);
    assert.equal(index.bytes, 0);
  }
});

test("removeStaleTemps leaves the temp of a live process in another pid namespace (a container with the host's name), whose pid means nothing here", {
  timeout: 60_000,
}, async (t) => {
  // A pid that no process of this namespace has: what the container's stage gets there.
  const pidMax = Number(fs.readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  let pid = Math.min(pidMax - 1, 30_000);
  const alive = (p: number) => {
    try {
      process.kill(p, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  while (pid > 300 && alive(pid)) pid--;
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'sh', '-c', `echo ${pid - 1} > /proc/sys/kernel/ns_last_pid && sh -c 'echo $$'`], {
    encoding: 'utf8',
  });
  if (probe.status !== 0 || probe.stdout.trim() !== String(pid)) {
    t.skip(`needs unshare --pid and ns_last_pid (root): ${probe.stderr.trim() || probe.stdout.trim()}`);
    return;
  }
  const dir = scratch('ms-stale-ns-');
  const tsv = path.join(ROOT, 'dist/src/core/temps.js');
  // In its own pid namespace (same host name, same directory): makes its temp, reports its name, stays alive until stdin closes.
  const script = `import(${JSON.stringify(tsv)}).then((m) => { const f = ${JSON.stringify(dir)} + '/' + m.ownedTempPrefix('.ns-test-') + 'x'; require('fs').writeFileSync(f, 'x'); process.stdout.write(process.pid + ' ' + f + '\\n'); process.stdin.resume(); })`;
  const child = spawn(
    'unshare',
    ['--pid', '--fork', '--mount-proc', 'sh', '-c', `echo ${pid - 1} > /proc/sys/kernel/ns_last_pid && ${JSON.stringify(process.execPath)} -e "$0"; :`, script],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const ended = new Promise((r) => child.on('close', r));
  try {
    const line = await new Promise<string>((resolve) => {
      let out = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('\n')) resolve(out.trim());
      });
    });
    const [nsPid, file] = line.split(' ');
    assert.equal(Number(nsPid), pid, 'the contained process has a pid that is free here');
    assert.equal(alive(pid), false, `pid ${pid} is not alive in this namespace`);
    assert.deepEqual(removeStaleTemps(dir, '.ns-test-'), [], "a live process's temp is not removed");
    assert.ok(fs.existsSync(file!), `${file} stays while its process runs`);
  } finally {
    child.stdin!.end();
    await ended;
  }
});

test("removeStaleTemps removes only this user's own entries of dead processes: not another user's, not a symbolic link", () => {
  const dir = scratch('ms-stale-own-');
  // A pid of no process here.
  let pid = 30_000;
  for (; ; pid--) {
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') break;
    }
  }
  const name = (what: string) => `.own-test-${pid}-${HOST_TAG}-${what}`;
  fs.mkdirSync(path.join(dir, name('mine')));
  fs.writeFileSync(path.join(dir, name('mine'), 'run0'), 'x');
  const target = path.join(dir, 'target');
  fs.writeFileSync(target, 'x');
  fs.symlinkSync(target, path.join(dir, name('link')));
  const keep = [name('link')];
  if (process.getuid?.() === 0) {
    // What another user (here: nobody) made under such a name, in a world-writable temp dir.
    fs.mkdirSync(path.join(dir, name('theirs')));
    fs.writeFileSync(path.join(dir, name('theirs'), 'precious'), 'x');
    fs.chownSync(path.join(dir, name('theirs')), 65534, 65534);
    fs.chownSync(path.join(dir, name('theirs'), 'precious'), 65534, 65534);
    keep.push(name('theirs'));
  }
  assert.deepEqual(removeStaleTemps(dir, '.own-test-'), [path.join(dir, name('mine'))]);
  assert.deepEqual(fs.readdirSync(dir).sort(), [...keep, 'target'].sort());
});

test('BytesIndex: keys built so that unseeded FNV-1a puts them all in one probe chain are spread out', () => {
  // A flood: at each of 12 places, two 3-byte chunks that leave FNV-1a's low 17 bits
  // alike (the low bits of FNV depend only on low bits), so all 2^12 URLs share one
  // slot in a table of up to 2^17 without a seed and a finalizer, and each add would
  // walk the whole chain.
  const fnv = (h: number, bytes: Iterable<number>) => {
    for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
    return h;
  };
  const MASK = (1 << 17) - 1;
  const prefix = Buffer.from('http://flood.example.com/?q=');
  const chars = Buffer.from('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_');
  let s = fnv(0x811c9dc5 | 0, prefix);
  const pairs: [number[], number[]][] = [];
  for (let pos = 0; pos < 12; pos++) {
    const seen = new Map<number, number[]>();
    let found: [number[], number[]] | null = null;
    for (let i = 0; i < chars.length ** 3 && !found; i++) {
      const c = [chars[i % 64]!, chars[(i >> 6) % 64]!, chars[i >> 12]!];
      const low = fnv(s, c) & MASK;
      const prev = seen.get(low);
      if (prev) found = [prev, c];
      else seen.set(low, c);
    }
    assert.ok(found, `a colliding pair at ${pos}`);
    s = fnv(s, found[1]);
    pairs.push(found);
  }
  const keys = Array.from({ length: 1 << 12 }, (_, i) => Buffer.concat([prefix, ...pairs.map((p, pos) => Buffer.from(p[(i >> pos) & 1]!))]));
  assert.equal(new Set(keys.map((k) => fnv(0x811c9dc5 | 0, k) & MASK)).size, 1, 'the keys do collide under unseeded FNV-1a');
  const index = new BytesIndex();
  for (const k of keys) index.add(k, 0, k.length);
  assert.equal(index.size, keys.length);
  assert.ok(index.probes / keys.length < 4, `${(index.probes / keys.length).toFixed(1)} slots examined per add`);
  // And a second pass finds each one where it was put.
  for (const [i, k] of keys.entries()) assert.equal(index.add(k, 0, k.length), i);
});

test('FileWriter: a close or abandon while a background fdatasync is under way leaves the descriptor to it (its number cannot go to another file first)', async () => {
  const cjsFs = createRequire(import.meta.url)('node:fs') as typeof fs;
  const original = cjsFs.fdatasync;
  // The fdatasyncs asked for, held until released: as on a busy disk.
  const held: (() => void)[] = [];
  const fds: number[] = [];
  cjsFs.fdatasync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
    fds.push(fd);
    held.push(() => original(fd, cb));
  }) as typeof fs.fdatasync;
  syncBuiltinESMExports();
  const isOpen = (fd: number) => {
    try {
      fs.fstatSync(fd);
      return true;
    } catch (err) {
      assert.equal((err as NodeJS.ErrnoException).code, 'EBADF');
      return false;
    }
  };
  try {
    const dir = scratch();
    for (const how of ['close', 'abandon'] as const) {
      held.length = 0;
      fds.length = 0;
      const file = path.join(dir, how);
      const w = new FileWriter(file, 'w', 1 << 10, 1 << 12);
      for (let i = 0; i < 8; i++) w.write(Buffer.alloc(1 << 10, 120));
      assert.equal(fds.length, 1, 'one background fdatasync asked for, held');
      const fd = fds[0]!;
      if (how === 'close') w.close(true);
      else w.abandon();
      assert.ok(isOpen(fd), `${how}: the descriptor stays open while its fdatasync waits`);
      w.close(); // a second close is a no-op, as before
      for (const release of held) release();
      for (let k = 0; k < 100 && isOpen(fd); k++) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.ok(!isOpen(fd), `${how}: closed once the fdatasync is done`);
      if (how === 'close') assert.equal(fs.statSync(file).size, 8 << 10);
    }
  } finally {
    cjsFs.fdatasync = original;
    syncBuiltinESMExports();
  }
});

test('FileWriter with syncAhead sends the file to the disk as it is written (an fdatasync every syncAhead bytes), and without it never', async () => {
  const cjsFs = createRequire(import.meta.url)('node:fs') as typeof fs;
  const original = cjsFs.fdatasync;
  const calls: number[] = [];
  cjsFs.fdatasync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
    calls.push(fd);
    original(fd, cb);
  }) as typeof fs.fdatasync;
  syncBuiltinESMExports();
  try {
    const dir = scratch();
    const line = Buffer.from('x'.repeat(1023) + '\n');
    for (const [syncAhead, want] of [
      [1 << 20, 2],
      [0, 0],
    ] as const) {
      calls.length = 0;
      const file = path.join(dir, `f${syncAhead}`);
      const w = new FileWriter(file, 'w', 1 << 16, syncAhead);
      // 10 MiB in 1 KiB lines, a pause after each MiB; one fdatasync at a time, so not one per MiB.
      for (let i = 0; i < 10 * 1024; i++) {
        w.write(line);
        if (i % 1024 === 1023) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      w.close(true);
      assert.equal(fs.statSync(file).size, 10 << 20);
      assert.ok(fs.readFileSync(file).equals(Buffer.concat(Array(10 * 1024).fill(line))), 'content');
      if (want === 0) assert.equal(calls.length, 0, 'no fdatasync without syncAhead');
      else assert.ok(calls.length >= want, `${calls.length} fdatasync(s) for 10 MiB at 1 MiB, want ${want} or more`);
    }
  } finally {
    cjsFs.fdatasync = original;
    syncBuiltinESMExports();
  }
});

test('with a scan, the splitter and the file reader give the same lines for any chunking or block size, each checked exactly when its check passes it', () => {
  const dir = scratch('tsv');
  const r = prng(51);
  const good = (k: number) =>
    `${(0x1000000000000000 + k * 7919).toString(16)}\t20110728064406\tv${k % 3 || ''}\t${k}\texample${k % 5}.com\thttp://example${k % 5}.com/${'p'.repeat(k % 90)}`;
  // Good records and bad ones (a CR, a TAB too many, a cut id, no fields), some long.
  const faults = [(l: string) => `${l}\r`, (l: string) => `${l}\tx`, (l: string) => l.slice(3), () => 'x', () => ''];
  let checked = 0;
  for (let round = 0; round < 200; round++) {
    const lines = Array.from({ length: Math.floor(r() * 40) }, (_, k) => {
      const l = good(round * 100 + k);
      return r() < 0.15 ? faults[Math.floor(r() * faults.length)]!(l) : l;
    }).map((l) => Buffer.from(l, 'latin1'));
    const input = Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
    const want = lines.map((l) => {
      const ref = new LineRef(5).set(l, 0, l.length);
      return checkUrlRecordAt(ref) === null;
    });
    const tabs = new Int32Array(5);
    const scan = (b: Uint8Array, s: number, limit: number) => scanUrlRecord(b, s, limit, tabs);
    /** Asserts that line `n` (from 1) came as `buf[start, end)`, checked or not as it should, with the check's TABs. */
    const agree = (buf: Uint8Array, start: number, end: number, n: number, isChecked: boolean) => {
      assert.deepEqual(Buffer.from(buf.subarray(start, end)), lines[n - 1], `round ${round} line ${n}`);
      if (!isChecked) return;
      checked++;
      assert.ok(want[n - 1], `round ${round} line ${n} passed by the scan, not by the check`);
      const ref = new LineRef(5).set(buf, start, end);
      checkUrlRecordAt(ref);
      assert.deepEqual([...tabs], [...ref.tabs]);
    };
    const s = new ByteLineSplitter('in');
    let at = 0;
    let n = 0;
    while (at < input.length) {
      const len = 1 + Math.floor(r() * 300);
      const chunk = Buffer.from(input.subarray(at, at + len));
      s.push(chunk, (buf, start, end, lineNo, isChecked) => agree(buf, start, end, (n = lineNo), isChecked), scan);
      at += len;
    }
    s.end();
    assert.equal(n, lines.length);
    const file = path.join(dir, `scan${round}`);
    fs.writeFileSync(file, input);
    const reader = new FileLineReader(file, 1 + Math.floor(r() * 400));
    const line = new LineRef(5);
    for (n = 1; reader.next(line, scan); n++) agree(line.buf, line.start, line.end, n, reader.checked);
    assert.equal(n - 1, lines.length);
    reader.close();
  }
  // Most good lines are found by the scan, not by a search after it.
  assert.ok(checked > 2000, `${checked} lines checked by the scan`);
});
