// join-current: its core and its binary against the naive full outer join of
// the contract (docs/formats-and-rules.md), on random sorted inputs (fast-check, fixed seed). Golden cases:
// fixtures/join-current/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { BIN, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import { TextSink } from './lib/bytes.js';
import { SEED, lineOf, recArb, text, uniqueSorted, type Rec } from './lib/model.js';
import { FAST_SUITE } from './lib/pg.js';
import { writeJoined } from '../src/core/records.js';
import { COPY_PREFIX, regularFileFor } from '../src/core/fifos.js';
import { HOST_TAG, ownedTempPrefix } from '../src/core/temps.js';
import { isValidTimestamp, timestampKey } from '../src/core/time.js';

const ROOT_DIR = scratch('ms-join-');
let dirNo = 0;
const freshDir = () => fs.mkdtempSync(path.join(ROOT_DIR, `${dirNo++}-`));

/** The naive full outer join of the contract (docs/formats-and-rules.md), by looking every id up in both sides. */
function naiveJoin(cur: Rec[], inc: Rec[]): string {
  const c = new Map(cur.map((r) => [r.id, r]));
  const i = new Map(inc.map((r) => [r.id, r]));
  return [...new Set([...c.keys(), ...i.keys()])]
    .sort()
    .map((id) => {
      const a = c.get(id);
      const b = i.get(id);
      const k = b ?? a!;
      return [id, k.domain, k.url, a?.ts ?? '-', b?.ts ?? '-', a?.tag ?? '', b?.tag ?? '', a?.hits ?? '-', b?.hits ?? '-'].join('\t') + '\n';
    })
    .join('');
}

test('join-current core (joinedLine) equals the naive record for every pair of sides', () => {
  fc.assert(
    fc.property(fc.option(recArb), fc.option(recArb), (c, i) => {
      fc.pre(c !== null || i !== null);
      if (c && i) i.id = c.id;
      const out = new TextSink();
      writeJoined(out, c ? lineOf(c) : null, i ? lineOf(i) : null);
      const got = out.take();
      assert.equal(got, naiveJoin(c ? [c] : [], i ? [i] : []));
    }),
    { seed: SEED, numRuns: 500 },
  );
});

test('join-current binary equals the naive full outer join on random sorted inputs', () => {
  fc.assert(
    fc.property(uniqueSorted(20), uniqueSorted(20), fc.boolean(), (cur, inc, missing) => {
      const dir = freshDir();
      if (!missing) fs.writeFileSync(path.join(dir, 'current_log'), text(cur));
      const r = runBin('join-current', ['--current', 'current_log'], text(inc), dir);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, naiveJoin(missing ? [] : cur, inc));
    }),
    // A representative few in the fast suite, all 12 in npm run test:all.
    { seed: SEED, numRuns: FAST_SUITE ? 4 : 12 },
  );
});

test('--current as a FIFO: joined like the file, and a signal still stops the stage while the writer is slow or never comes', { timeout: 60_000 }, async () => {
  const dir = freshDir();
  const cur = [0, 1, 2].map((n) => `${n.toString(16).padStart(16, '0')}\t20110101000000\t\t1\ta.com\thttp://a.com/${n}\n`).join('');
  const inc = cur.split('\n')[1]! + '\n';
  fs.writeFileSync(path.join(dir, 'current_log'), cur);
  const want = runBin('join-current', ['--current', 'current_log'], inc, dir);
  assert.equal(want.status, 0, want.stderr);
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  const start = (): { child: ChildProcess; done: Promise<{ code: number | null; out: string; err: string }> } => {
    const child = spawn(path.join(BIN, 'join-current'), ['--current', 'fifo'], { cwd: dir, env: testEnv() });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (err += d));
    child.stdin!.end(inc);
    return { child, done: new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err }))) };
  };
  // A writer comes: the same output as from the file, and no copy left behind.
  const a = start();
  fs.writeFileSync(path.join(dir, 'fifo'), cur); // blocks until the stage opens the FIFO
  const ra = await a.done;
  assert.equal(ra.code, 0, ra.err);
  assert.equal(ra.out, want.stdout);
  assert.deepEqual(
    fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(`.master-server-${a.child.pid}-`)),
    [],
  );
  // No writer ever: SIGTERM ends it at once (it waited for the writer before).
  // Signalled once it waits for the writer: its copy of the FIFO exists (its signal handlers
  // are in place by then). A fixed 500 ms sleep was shorter than a loaded machine's Node start,
  // and a SIGTERM before the handlers killed it (signal, no status, no summary).
  const b = start();
  const copy = path.join(os.tmpdir(), `${COPY_PREFIX}${b.child.pid}-${HOST_TAG}-fifo.copy`);
  for (const deadline = Date.now() + 30_000; !fs.existsSync(copy) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
  if (!fs.existsSync(copy)) {
    b.child.kill('SIGKILL');
    assert.fail(`join-current never started waiting for the FIFO's writer (no ${copy} after 30 s)`);
  }
  b.child.kill('SIGTERM');
  const rb = await b.done;
  assert.equal(rb.code, 143, rb.err);
  assert.match(rb.err, /"status":"interrupted"/);
  assert.deepEqual(
    fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(`.master-server-${b.child.pid}-`)),
    [],
    'copy removed',
  );
});

test('a FIFO --current whose line outgrows the 1 MiB line limit fails the copy at once, naming the line, and leaves no copy', { timeout: 90_000 }, async () => {
  // `--current <(cat /dev/zero)` once filled the temp directory: the copy had no bound.
  // Here the writer sends a good line, 2 MiB without LF, and then keeps the FIFO open
  // (no EOF): only a copy that checks the lines as they come can fail.
  const dir = freshDir();
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  const child = spawn(path.join(BIN, 'join-current'), ['--current', 'fifo'], { cwd: dir, env: testEnv({ TMPDIR: tmp }), stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout!.resume();
  const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const writer = fs.createWriteStream(path.join(dir, 'fifo'));
  writer.on('error', () => undefined); // EPIPE once the stage has gone
  writer.write(`${'0'.repeat(16)}\t20110727200841\t\t1\ta.com\thttp://a.com/\n`);
  writer.write(Buffer.alloc(2 << 20, 'x'));
  // The guard is cleared once the stage ended: left pending, it kept this file's process
  // alive a minute after its last test, one of the suite's two slots held idle.
  let guard: NodeJS.Timeout | undefined;
  const code = await Promise.race([done, new Promise<'hung'>((r) => (guard = setTimeout(() => r('hung'), 60_000)))]);
  clearTimeout(guard);
  writer.destroy();
  if (code === 'hung') {
    child.kill('SIGKILL');
    await done;
  }
  assert.equal(code, 1, `the copy ended by itself with status 1 (it waited for the FIFO's end): ${err}`);
  assert.match(err, /^join-current: fifo:2: line longer than 1048576 bytes$/m);
  assert.deepEqual(fs.readdirSync(tmp), [], 'no copy left');
});

test('a signal just as the copy of a FIFO --current starts leaves no copy behind', { timeout: 60_000 }, async () => {
  // The exit hooks (what a signal runs before exiting) run at the first moment they can: right
  // after the copy's hook was registered. The copy was once created by the write stream's open
  // on a libuv thread, after the hooks had found nothing to remove: a SIGTERM in that moment left
  // it in the temp directory (6 of 103 handled SIGTERMs at random instants, on a loaded machine).
  const fifo = path.join(freshDir(), 'early-fifo');
  execFileSync('mkfifo', [fifo]);
  const copy = path.join(os.tmpdir(), `${ownedTempPrefix(COPY_PREFIX)}early-fifo.copy`);
  let registered = false;
  const copied = regularFileFor(fifo, (fn) => {
    registered = true;
    queueMicrotask(fn);
  });
  try {
    for (const deadline = Date.now() + 30_000; !registered && Date.now() < deadline; ) await new Promise((r) => setImmediate(r));
    assert.ok(registered, 'regularFileFor registered its exit hook');
    // Its FIFO is open by now: a writer comes and goes, and the copy ends, as it would have had the process lived on.
    fs.writeFileSync(fifo, 'x\n');
    assert.equal(await copied, copy);
    assert.equal(fs.existsSync(copy), false, `${copy} left behind`);
  } finally {
    fs.rmSync(copy, { force: true });
  }
});

test('a copy of a FIFO --current that a SIGKILLed run left behind is removed by the next run; live, foreign and unrelated names stay', {
  timeout: 60_000,
}, async () => {
  const dir = freshDir();
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  // A temp dir of this test's own: in the shared one, any other join-current starting
  // meanwhile (another test file of the suite, another checkout's tests) removes the
  // killed run's copy first, and the run below has nothing to remove.
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  // No writer ever comes: the stage waits with its copy made, and is SIGKILLed (its cleanup cannot run).
  const child = spawn(path.join(BIN, 'join-current'), ['--current', 'fifo'], { cwd: dir, env: testEnv({ TMPDIR: tmp }), stdio: ['pipe', 'ignore', 'ignore'] });
  const ended = new Promise((r) => child.on('close', r));
  child.stdin!.end();
  const copy = path.join(tmp, `${COPY_PREFIX}${child.pid}-${HOST_TAG}-fifo.copy`);
  for (const deadline = Date.now() + 30_000; !fs.existsSync(copy) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
  child.kill('SIGKILL');
  await ended;
  assert.ok(fs.existsSync(copy), `the killed run left ${copy}`);
  // Not to be touched: this (live) process's, another host's, and a name of another scheme.
  const keep = [
    `${ownedTempPrefix(COPY_PREFIX)}kept.copy`,
    `${COPY_PREFIX}${child.pid}-${HOST_TAG === '00000000' ? '11111111' : '00000000'}-other-host.copy`,
    `${COPY_PREFIX}${child.pid}-notahost.copy`,
  ].map((f) => path.join(tmp, f));
  try {
    for (const f of keep) fs.writeFileSync(f, 'x');
    fs.writeFileSync(path.join(dir, 'current_log'), '');
    const r = runBin('join-current', ['--current', 'current_log'], '', dir, { TMPDIR: tmp });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fs.existsSync(copy), false, `${copy} removed`);
    assert.ok(r.stderr.includes(`removed ${copy}, left by a run that was killed`), r.stderr);
    for (const f of keep) assert.ok(fs.existsSync(f), `${f} kept`);
  } finally {
    for (const f of [copy, ...keep]) fs.rmSync(f, { force: true });
  }
});

test('a long run of current-only records before one incoming record waits for a slow reader instead of piling up in memory', { timeout: 120_000 }, async () => {
  const dir = freshDir();
  const file = path.join(dir, 'current_log');
  const fd = fs.openSync(file, 'w');
  for (let b = 0; b < 60; b++) {
    let chunk = '';
    for (let i = b * 10_000; i < (b + 1) * 10_000; i++) chunk += `${i.toString(16).padStart(16, '0')}\t20110727200841\t\t1\ta.com\thttp://a.com/${i}\n`;
    fs.writeSync(fd, chunk);
  }
  fs.closeSync(fd);
  const size = fs.statSync(file).size;
  const child = spawn(path.join(BIN, 'join-current'), ['--current', 'current_log'], { cwd: dir, env: testEnv(), stdio: ['pipe', 'pipe', 'ignore'] });
  child.stdin!.end('ffffffffffffffff\t20110727200841\t\t1\ta.com\thttp://a.com/x\n');
  child.stdout!.pause(); // a reader that does not read yet
  const done = new Promise<number | null>((resolve) => child.on('close', resolve));
  // How far it read current_log: its descriptor's offset, or null once it closed it.
  const readPos = (): number | null => {
    for (const n of fs.readdirSync(`/proc/${child.pid}/fd`)) {
      let target = '';
      try {
        target = fs.readlinkSync(`/proc/${child.pid}/fd/${n}`);
      } catch {
        continue;
      }
      if (target === file) return Number(/^pos:\s*(\d+)/m.exec(fs.readFileSync(`/proc/${child.pid}/fdinfo/${n}`, 'utf8'))![1]);
    }
    return null;
  };
  let pos: number | null = null;
  let seen = false;
  for (let stable = 0, deadline = Date.now() + 60_000; stable < 20 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    const p = readPos();
    if (p === null && seen) break; // read through to the end (and closed), the reader still not reading
    if (p !== null) seen = true;
    stable = p !== null && p === pos ? stable + 1 : 0;
    pos = p;
  }
  const stalledAt = pos;
  let out = 0;
  child.stdout!.on('data', (d: Buffer) => (out += d.length));
  child.stdout!.resume();
  assert.equal(await done, 0);
  assert.ok(out > size, `${out} bytes out`);
  // Before: it read the whole file and held its 600,000 joined records in memory.
  assert.ok(
    stalledAt !== null && stalledAt < size / 4,
    `read ${stalledAt === null ? 'all' : stalledAt} of ${size} bytes of current_log before its reader read anything`,
  );
});

test('--current /dev/zero (a device that never ends) is refused before any output; /dev/null is an empty log', () => {
  const dir = freshDir();
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const inc = '00000000000000a1\t20110727200841\t\t1\ta.com\thttp://a.com/\n';
  // Before: it copied /dev/zero into the temp directory until the disk was full (here the
  // file size limit, 16 MiB, ends it with SIGXFSZ).
  const r = spawnSync('bash', ['-c', `ulimit -f 16384 && exec join-current --current /dev/zero`], {
    input: inc,
    cwd: dir,
    env: testEnv({ TMPDIR: tmp }),
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(r.status, 1, `${r.signal} ${r.stderr}`);
  assert.match(r.stderr, /^join-current: \/dev\/zero: is a character device, not a log: give a file, a FIFO, or \/dev\/null for an empty one$/m);
  assert.equal(r.stdout, failedOutput('join-current'));
  assert.deepEqual(fs.readdirSync(tmp), [], 'nothing copied');
  const n = runBin('join-current', ['--current', '/dev/null'], inc, dir, { TMPDIR: tmp });
  assert.equal(n.status, 0, n.stderr);
  assert.equal(n.stdout, '00000000000000a1\ta.com\thttp://a.com/\t-\t20110727200841\t\t\t-\t1\n');
  assert.equal(summaryOf(n.stderr).current_missing, false);
});

test('a failed run counts so that incoming = both + incoming_only (an incoming line whose join failed is in none)', () => {
  const dir = freshDir();
  const rec = (id: string) => `${id}\t20110727200841\t\t1\ta.com\thttp://a.com/${id}\n`;
  fs.writeFileSync(path.join(dir, 'current_log'), rec('00000000000000a2') + 'bad\n');
  // a3 writes the current-only a2 first, whose next line is bad: a3 is never joined.
  const r = runBin('join-current', ['--current', 'current_log'], rec('00000000000000a1') + rec('00000000000000a3'), dir);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^join-current: current_log:2: /m);
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  assert.deepEqual([s.incoming, s.both, s.incoming_only, s.current, s.current_only, s.records_out], [1, 0, 1, 1, 1, 2]);
});

test('a timestamp that is not a real time is refused where it is (current_log or stdin line), not passed on for filter-url to name its own stdin', () => {
  const dir = freshDir();
  const rec = (id: string, ts: string) => `${id}\t${ts}\t\t1\ta.com\thttp://a.com/${id}\n`;
  const good = rec('00000000000000a1', '20110727200841');
  // Feb 31, Feb 29 of a common year, hour 24, minute 60, second 60, month 13, day 0, 13 digits
  for (const [k, ts] of [
    '20110231000000',
    '20110229120000',
    '20110727240000',
    '20110727206000',
    '20110727200860',
    '20111327200841',
    '20110700200841',
    '2011072720084',
  ].entries()) {
    // Each in both places in npm run test:all; in the fast suite, each in one of them, in turn
    // (timestampKey's own test below checks every kind of time).
    if (!FAST_SUITE || k % 2 === 0) {
      fs.writeFileSync(path.join(dir, 'current_log'), good + rec('00000000000000a2', ts));
      const c = runBin('join-current', ['--current', 'current_log'], rec('00000000000000a3', '20110727200841'), dir);
      assert.equal(c.status, 1, `${ts}: ${c.stderr}`);
      assert.match(c.stderr, new RegExp(`^join-current: current_log:2: bad timestamp '${ts}'`, 'm'), ts);
    }
    if (!FAST_SUITE || k % 2 === 1) {
      fs.writeFileSync(path.join(dir, 'current_log'), good);
      const i = runBin('join-current', ['--current', 'current_log'], rec('00000000000000a0', '20110727200841') + rec('00000000000000a2', ts), dir);
      assert.equal(i.status, 1, `${ts}: ${i.stderr}`);
      assert.match(i.stderr, new RegExp(`^join-current: -:2: bad timestamp '${ts}'`, 'm'), ts);
    }
  }
  // Leap days and the last second of a day are real.
  fs.writeFileSync(path.join(dir, 'current_log'), rec('00000000000000a1', '20120229235959') + rec('00000000000000a2', '20000229000000'));
  assert.equal(runBin('join-current', ['--current', 'current_log'], '', dir).status, 0);
});

test('timestampKey (the check every record gets, with its cache of real hours) agrees with a calendar from Date, as isValidTimestamp does', () => {
  // Proleptic Gregorian, as the project's own: setUTCFullYear, not Date.UTC (which reads years below 100 as 19xx).
  const real = (t: string) => {
    if (!/^[0-9]{14}$/.test(t)) return false;
    const [y, mo, d, h, mi, s] = [t.slice(0, 4), t.slice(4, 6), t.slice(6, 8), t.slice(8, 10), t.slice(10, 12), t.slice(12, 14)].map(Number) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const dt = new Date(0);
    dt.setUTCFullYear(y, mo - 1, d);
    return dt.getUTCFullYear() === y && dt.getUTCMonth() === mo - 1 && dt.getUTCDate() === d && h <= 23 && mi <= 59 && s <= 59;
  };
  const digits = (n: number) => fc.integer({ min: 0, max: 10 ** n - 1 }).map((v) => String(v).padStart(n, '0'));
  const ts = fc.oneof(
    fc
      .tuple(
        fc.integer({ min: 1999, max: 2101 }),
        fc.integer({ min: 0, max: 13 }),
        fc.integer({ min: 0, max: 32 }),
        fc.integer({ min: 0, max: 25 }),
        fc.integer({ min: 55, max: 61 }),
        fc.integer({ min: 55, max: 61 }),
      )
      .map((p) => p.map((v, k) => String(v).padStart(k === 0 ? 4 : 2, '0')).join('')),
    digits(14),
    fc.constantFrom('2011072720084', '201107272008411', '2011072720084x', ' 0110727200841'),
  );
  fc.assert(
    fc.property(fc.array(ts, { maxLength: 50 }), (list) => {
      for (const t of list) {
        const b = Buffer.from('x' + t + 'y', 'latin1');
        assert.equal(timestampKey(b, 1, 1 + t.length) >= 0, real(t), t);
        assert.equal(isValidTimestamp(t), real(t), t);
      }
    }),
    { seed: SEED, numRuns: 300 },
  );
});

test('an incoming line that spans two reads and waits behind many current-only records is joined as read, not as the next line carried over', () => {
  // stdin a file: read in 1 MiB chunks. The line across the first boundary waits (over
  // 0x3fff current-only records come before it); the second chunk ends inside a line,
  // which the splitter carries over into the buffer the waiting line was handed in.
  const dir = freshDir();
  const id = (n: number) => n.toString(16).padStart(16, '0');
  const lines: string[] = [];
  let size = 0;
  let crossing = -1;
  for (let i = 1; size < 2.5 * (1 << 20); i++) {
    const l = `${id(i * 100000)}\t20110728060000\t\t1\tx.com\thttp://x.com/${String(i).repeat(30).slice(0, 150)}\n`;
    if (crossing < 0 && size + l.length > 1 << 20) crossing = i;
    lines.push(l);
    size += l.length;
  }
  const cur: string[] = [];
  for (let k = 1; k <= 20000; k++) cur.push(`${id((crossing - 1) * 100000 + k)}\t20110728050000\t\t1\ty.com\thttp://y.com/${k}\n`);
  fs.writeFileSync(path.join(dir, 'in.tsv'), lines.join(''));
  fs.writeFileSync(path.join(dir, 'cur.tsv'), cur.join(''));
  const r = spawnSync('bash', ['-c', 'join-current --current cur.tsv < in.tsv'], { cwd: dir, env: testEnv(), encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  const want = lines[crossing - 1]!.split('\t');
  const got = r.stdout.split('\n').find((l) => l.startsWith(want[0]!));
  assert.equal(got, `${want[0]}\t${want[4]}\t${want[5]!.slice(0, -1)}\t-\t20110728060000\t\t\t-\t1`, 'the waiting line joined with its own bytes');
});
