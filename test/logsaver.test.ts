// logsaver: per-Yacobot files hold exactly their records in order; nothing is
// published, and no temporary file is left, on bad input or a signal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BIN, listFiles, madeDb, runBin, scratch, summaryOf, testEnv } from './lib/run.js';
import { FAST_SUITE } from './lib/pg.js';
import { mkdirEach } from '../src/core/dirs.js';
import { HOST_TAG } from '../src/core/temps.js';
import { watchPeakRss } from '../scripts/peak-rss.js';

function routed(n: number, ids: number[]): string {
  let s = '';
  for (let i = 0; i < n; i++) {
    const id = ids[(i * 7) % ids.length]!;
    s += `${id}\t${i.toString(16).padStart(16, '0')}\t20110728060000\t\t${i}\td${i % 50}.com\thttp://d${i % 50}.com/${i}\n`;
  }
  return s;
}

test('each Yacobot file holds exactly its records, in input order', () => {
  const work = scratch('ms-ls-');
  const input = routed(30000, [1, 2, 3, 17, 100000000000000000]);
  const r = runBin('logsaver', ['--queue-dir', 'q', '--name', '2011072806'], input, work);
  assert.equal(r.status, 0, r.stderr);
  const want = new Map<string, string>();
  for (const l of input.split('\n').filter((x) => x)) {
    const tab = l.indexOf('\t');
    const id = l.slice(0, tab);
    want.set(id, (want.get(id) ?? '') + l.slice(tab + 1) + '\n');
  }
  assert.deepEqual(listFiles(path.join(work, 'q')), [...want.keys()].map((id) => `${id}/2011072806.tsv`).sort());
  for (const [id, text] of want) assert.equal(fs.readFileSync(path.join(work, 'q', id, '2011072806.tsv'), 'utf8'), text, id);
  const s = summaryOf(r.stderr);
  assert.equal(s.records_in, 30000);
  assert.equal(s.files, 5);
  // A rerun replaces the files with the same content (idempotent), other runs' files stay.
  fs.writeFileSync(path.join(work, 'q', '1', '2011072805.tsv'), 'earlier\n');
  assert.equal(runBin('logsaver', ['--queue-dir', 'q', '--name', '2011072806'], input, work).status, 0);
  for (const [id, text] of want) assert.equal(fs.readFileSync(path.join(work, 'q', id, '2011072806.tsv'), 'utf8'), text, id);
  assert.equal(fs.readFileSync(path.join(work, 'q', '1', '2011072805.tsv'), 'utf8'), 'earlier\n');
});

test('a record that fills the 256 KiB write buffer to its last byte keeps its LF', () => {
  const work = scratch('ms-ls-');
  // The first record is 64 bytes and every other 63 (each plus LF, without "1 TAB"), so
  // the buffer fills exactly: a reservation one byte short dropped an LF there.
  let input = '';
  for (let i = 0; i < 5000; i++) {
    const url = 'http://a.com/' + 'x'.repeat(i === 0 ? 10 : 9);
    const rec = `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\t${url}`;
    assert.equal(rec.length, i === 0 ? 64 : 63);
    input += `1\t${rec}\n`;
  }
  const r = runBin('logsaver', ['--queue-dir', 'q', '--name', 'n'], input, work);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fs.readFileSync(path.join(work, 'q', '1', 'n.tsv'), 'utf8'), input.replaceAll(/^1\t/gm, ''));
});

test('bad input publishes nothing and leaves no temporary file', () => {
  const work = scratch('ms-ls-');
  fs.mkdirSync(path.join(work, 'q', '2'), { recursive: true });
  fs.writeFileSync(path.join(work, 'q', '2', 'run.tsv'), 'previous content\n');
  const good = routed(5000, [1, 2, 3]);
  const bads: [string, RegExp][] = [
    [good + 'x\t0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n', /logsaver: -:5001: bad yacobot_id 'x'/],
    [good + '0\t0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n', /bad yacobot_id '0'/],
    [good + '-3\t0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n', /bad yacobot_id '-3'/],
    [good + '1234567890123456789\t0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/\n', /bad yacobot_id/],
    [good + '1\t0000000000000001\t20110728060000\t\t1\ta.com\n', /expected 7 fields \(yacobot_id id timestamp updatetag hits domain url\), got 6/],
    [good + '2\t0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.co', /-:5001: last line has no newline/],
  ];
  for (const [input, msg] of bads) {
    const r = runBin('logsaver', ['--queue-dir', 'q', '--name', 'run'], input, work);
    assert.equal(r.status, 1);
    assert.match(r.stderr, msg);
    assert.deepEqual(listFiles(path.join(work, 'q')), ['2/run.tsv'], 'nothing published, no temporary file');
    assert.equal(fs.readFileSync(path.join(work, 'q', '2', 'run.tsv'), 'utf8'), 'previous content\n');
    assert.deepEqual(fs.readdirSync(path.join(work, 'q')), ['2'], 'no directory left behind');
  }
});

test('a signal before the end of input publishes nothing and removes the temporary files; the status is 128 + its number', async () => {
  for (const [sig, want] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    const work = scratch('ms-ls-');
    const child = spawn(path.join(BIN, 'logsaver'), ['--queue-dir', 'q', '--name', 'run'], { cwd: work, env: testEnv() });
    child.stdin.write(routed(2000, [1, 2]));
    // Wait until the temporary files exist, then interrupt with stdin still open.
    for (let i = 0; i < 100 && listFiles(path.join(work, 'q')).length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(listFiles(path.join(work, 'q')).length, 2, 'temporary files were being written');
    assert.ok(
      listFiles(path.join(work, 'q')).every((f) => !f.endsWith('.tsv')),
      'temporary names never end in .tsv',
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
      child.on('close', (code, signal) => resolve([code, signal]));
      child.kill(sig);
    });
    assert.deepEqual([status, signal], [want, null], `${sig}: handled, exit ${want}`);
    assert.deepEqual(listFiles(path.join(work, 'q')), [], sig);
    // Its last line is still the summary, with the counts so far.
    const s = summaryOf(stderr);
    assert.equal(s.status, 'interrupted');
    assert.equal(s.signal, sig);
    assert.ok((s.records_in as number) > 0 && (s.records_in as number) <= 2000, String(s.records_in));
    assert.equal(typeof s.ms, 'number');
  }
});

test('--help does not say logsaver writes stdout: its output is the queue files', () => {
  const r = runBin('logsaver', ['--help'], '');
  assert.equal(r.status, 0);
  assert.match(r.stdout, /writes files, nothing\n {2}on stdout/);
  assert.doesNotMatch(r.stdout, /and writes stdout|A closed stdout/);
});

test('NAME must be one safe file name; usage errors exit 2', () => {
  const work = scratch('ms-ls-');
  for (const name of ['', 'a/b', '.hidden', '..', 'x\ty']) {
    const r = runBin('logsaver', ['--queue-dir', 'q', '--name', name], '', work);
    assert.equal(r.status, 2, JSON.stringify(name));
    assert.match(r.stderr, /Try 'logsaver --help'/);
  }
  assert.equal(runBin('logsaver', ['--name', 'x'], '', work).status, 2, '--queue-dir is required');
  // A control character in the name is quoted escaped, as every message shows one.
  assert.match(runBin('logsaver', ['--queue-dir', 'q', '--name', '.a\nb'], '', work).stderr, /^logsaver: --name '\.a\\nb' starts with '\.'\n/);
  assert.ok(!fs.existsSync(path.join(work, 'q')));
});

test('mkdirEach makes each missing level and reports the real reason a level cannot be made', () => {
  const dir = scratch();
  assert.deepEqual(mkdirEach(path.join(dir, 'a', 'b')), [path.join(dir, 'a'), path.join(dir, 'a', 'b')]);
  assert.deepEqual(mkdirEach(path.join(dir, 'a', 'b')), [], 'nothing to make');
  fs.writeFileSync(path.join(dir, 'file'), '');
  assert.throws(() => mkdirEach(path.join(dir, 'file', 'x', 'y')), { code: 'ENOTDIR' });
});

test("a SIGKILLed run's temporary queue files are removed by the next run of the same name; a live process's, another name's and another host's stay", async () => {
  const work = scratch('ms-ls-');
  const q = path.join(work, 'q');
  const child = spawn(path.join(BIN, 'logsaver'), ['--queue-dir', 'q', '--name', 'run'], { cwd: work, env: testEnv(), stdio: ['pipe', 'ignore', 'ignore'] });
  const ended = new Promise((r) => child.on('close', r));
  child.stdin.write(routed(2000, [1, 2]));
  const mine = [1, 2].map((y) => path.join(q, String(y), `.run.tsv.tmp-${child.pid}-${HOST_TAG}`));
  for (let i = 0; i < 600 && !mine.every((f) => fs.existsSync(f)); i++) await new Promise((r) => setTimeout(r, 50));
  child.kill('SIGKILL');
  await ended;
  assert.ok(
    mine.every((f) => fs.existsSync(f)),
    'the killed run left its temporary files',
  );
  const other = HOST_TAG === '00000000' ? '11111111' : '00000000';
  const keep = [`.run.tsv.tmp-${process.pid}-${HOST_TAG}`, `.other.tsv.tmp-${child.pid}-${HOST_TAG}`, `.run.tsv.tmp-${child.pid}-${other}`].map((f) =>
    path.join(q, '1', f),
  );
  for (const f of keep) fs.writeFileSync(f, 'x');
  const r = runBin('logsaver', ['--queue-dir', 'q', '--name', 'run'], routed(10, [1, 2]), work);
  assert.equal(r.status, 0, r.stderr);
  for (const f of mine) {
    assert.equal(fs.existsSync(f), false, `${f} removed`);
    assert.ok(r.stderr.includes(`removed ${path.relative(work, f)}, left by a run that was killed`), r.stderr); // named as --queue-dir was given
  }
  assert.deepEqual(listFiles(q).sort(), ['1/run.tsv', '2/run.tsv', ...keep.map((f) => path.relative(q, f))].sort());
});

test('in a shell chain, a stage that fails after it wrote output makes logsaver fail too: nothing is published from a cut stream', () => {
  const work = scratch('ms-ls-');
  madeDb(work, 'p.db', [
    ['add', 'a'],
    ['assign', 'x.com', 'a'],
  ]); // x.com known: its records stream out at once
  // 3000 good records (more than one 64 KiB block of routed output), then a bad one:
  // upload-domains fails at line 3001 after blocks of whole lines went down the pipe.
  let input = '';
  for (let i = 0; i < 3000; i++) input += `${(i + 1).toString(16).padStart(16, '0')}\t20110728060000\t\t1\tx.com\thttp://x.com/${'a'.repeat(50)}${i}\n`;
  fs.writeFileSync(path.join(work, 'in.tsv'), input + 'garbage\n');
  const r = spawnSync('bash', ['-c', 'upload-domains --db p.db < in.tsv 2>ud.err | logsaver --queue-dir q --name n 2>ls.err; echo "${PIPESTATUS[*]}"'], {
    cwd: work,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.stdout, '1 1\n', `upload-domains fails, and so does logsaver: ${fs.readFileSync(path.join(work, 'ls.err'), 'utf8')}`);
  assert.match(fs.readFileSync(path.join(work, 'ud.err'), 'utf8'), /^upload-domains: -:3001: expected 6 fields/m);
  // The cut mark follows the last record written, whose LF was held back: named all the same.
  assert.match(
    fs.readFileSync(path.join(work, 'ls.err'), 'utf8'),
    /^logsaver: -:\d+: input cut off: it ends in "upload-domains: failed, output incomplete" \(the stage that wrote it failed\)$/m,
  );
  assert.deepEqual(listFiles(path.join(work, 'q')), [], 'no queue file published');
  // The same stage run by hand at a terminal-less stdout that is a file: the file ends in a cut line too.
  const f = runBin('upload-domains', ['--db', 'p.db', 'in.tsv'], '', work);
  assert.equal(f.status, 1);
  assert.ok(f.stdout.length > 0 && !f.stdout.endsWith('\n'), 'the output of a failed run does not end in a whole line');
});

test('in a shell chain, a stage that fails before it wrote anything makes every later stage fail: no next current_log, no queue file; the next stage names the failed one, after records too', () => {
  // analyze-dump fails on its reject ratio with no output. Its stdout used to be empty,
  // which the rest of the chain took for an hour with no records: every stage exited 0,
  // and filter-url wrote the next current_log from current_log alone.
  const work = scratch('ms-ls-');
  madeDb(work, 'p.db', [['add', 'a']]);
  const current = '00000000000000a1\t20110728055000\t\t1\tx.com\thttp://x.com/\n';
  fs.writeFileSync(path.join(work, 'current'), current);
  fs.writeFileSync(path.join(work, 'hour.reflog'), 'hdr\n1\t5\t20110728060000\t2\thttp://x.com/a\t1\n1\t5\tnot-a-time\t2\thttp://x.com/b\t1\n');
  const chain = [
    'analyze-dump --max-reject-ratio 0 < hour.reflog 2>1.err',
    'group-sum 2>2.err',
    'join-current --current current 2>3.err',
    'filter-url --current-out next --now 20110728070000 2>4.err',
    'upload-domains --db p.db 2>5.err',
    'logsaver --queue-dir q --name n 2>6.err; echo "${PIPESTATUS[*]}"',
  ].join(' | ');
  const r = spawnSync('bash', ['-c', chain], { cwd: work, env: testEnv(), encoding: 'utf8' });
  const err = (i: number) => fs.readFileSync(path.join(work, `${i}.err`), 'utf8');
  assert.equal(r.stdout, '1 1 1 1 1 1\n', `every stage fails: ${[2, 3, 4, 5, 6].map(err).join('')}`);
  assert.match(err(1), /^analyze-dump: -: rejected 1 of 2 records/m);
  assert.match(err(2), /^group-sum: -:1: input cut off: it ends in "analyze-dump: failed, output incomplete" \(the stage that wrote it failed\)$/m);
  assert.match(err(3), /^join-current: -:1: input cut off: it ends in "group-sum: failed, output incomplete"/m);
  assert.match(err(6), /^logsaver: -:1: input cut off: it ends in "upload-domains: failed, output incomplete"/m);
  assert.equal(fs.existsSync(path.join(work, 'next')), false, 'no next current_log');
  assert.deepEqual(listFiles(path.join(work, 'q')), [], 'no queue file published');
  // A usage error refuses the command line and writes nothing: it is the chain's exit
  // status that fails (the runner reads every stage's; by hand, set -o pipefail).
  const u = spawnSync(
    'bash',
    ['-c', 'set -o pipefail; group-sum --bogus < /dev/null 2>/dev/null | join-current --current current 2>/dev/null; echo "status $?"'],
    {
      cwd: work,
      env: testEnv(),
      encoding: 'utf8',
    },
  );
  assert.equal(u.stdout, '00000000000000a1\tx.com\thttp://x.com/\t20110728055000\t-\t\t\t1\t-\nstatus 2\n', 'the current side alone, and the chain fails');
  // A stage that fails after it wrote records: its mark follows the last of them, whose LF it held back.
  const rec = (i: number) => `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\tx.com\thttp://x.com/${'p'.repeat(i * 40)}`;
  for (const cut of [`${rec(1)}\n${rec(2)}upload-domains: failed, output incomplete`, `${rec(1)}group-sum: failed, output incomplete`]) {
    const g = runBin('join-current', ['--current', 'current'], cut, work);
    assert.equal(g.status, 1, g.stderr);
    const stage = cut.includes('upload-domains') ? 'upload-domains' : 'group-sum';
    assert.match(
      g.stderr,
      new RegExp(`^join-current: -:\\d: input cut off: it ends in "${stage}: failed, output incomplete" \\(the stage that wrote it failed\\)$`, 'm'),
    );
  }
  // Text that only looks like a mark is not named as one.
  const odd = runBin('join-current', ['--current', 'current'], `${rec(1)}\n${rec(2)}-x: failed, output incomplete`, work);
  assert.match(odd.stderr, /^join-current: -:2: last line has no newline \(input cut off\?\)$/m);
  // Not for a stage whose output is files (logsaver), nor on a terminal-less stdout after a clean run.
  const l = runBin('logsaver', ['--queue-dir', 'q', '--name', 'n'], 'garbage\n', work);
  assert.equal(l.status, 1);
  assert.equal(l.stdout, '');
});

test('long records for many Yacobots: memory does not grow with ids times record length', {
  timeout: 120_000,
  skip: FAST_SUITE && 'a memory bound on 200 MB of records (npm run test:all)',
}, async (t) => {
  if (!fs.existsSync('/proc/self/status')) return t.skip('needs /proc to read the peak RSS');
  // Each Yacobot's write buffer used to grow to its longest record and stay so to the end
  // of the run: 600 ids with a 1 MiB record each peaked at 703 MB (297 MB once the line
  // splitter stopped concatenating a long line read by read, 261 MB with both fixed).
  const work = scratch('ms-ls-');
  const ids = 200;
  const url = `http://a.com/${'x'.repeat(1_000_000)}`;
  const child = spawn(path.join(BIN, 'logsaver'), ['--queue-dir', 'q', '--name', 'n'], { cwd: work, env: testEnv(), stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const rss = watchPeakRss(child.pid, 20);
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  for (let id = 1; id <= ids; id++) {
    const line = `${id}\t${id.toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\t${url}\n`;
    if (!child.stdin.write(line)) await new Promise((resolve) => child.stdin.once('drain', resolve));
  }
  child.stdin.end();
  const status = await closed;
  rss.stop();
  assert.equal(status, 0, stderr);
  assert.equal(summaryOf(stderr).records_in, ids);
  assert.equal(fs.statSync(path.join(work, 'q', String(ids), 'n.tsv')).size, url.length + 42); // the record and its LF, without "id TAB"
  // Measured: 120-139 MB; 266 MB with each Yacobot keeping a buffer of its longest record.
  assert.ok(rss.kb > 0 && rss.kb < 200 * 1024, `peak RSS ${rss.kb} KiB`);
});

test('a record as long as the streams allow is routed and saved: its routed line, with a yacobot_id of 18 digits before it, is accepted', () => {
  // upload-domains passes any record of up to 1 MiB; logsaver refused the routed line
  // ("line longer than 1048576 bytes"), so a chain that upload-domains finished failed here.
  const work = scratch('ms-ls-');
  const head = `0000000000000001\t20110728060000\t\t1\ta.com\thttp://a.com/`;
  const record = head + 'x'.repeat((1 << 20) - head.length);
  assert.equal(Buffer.byteLength(record), 1 << 20);
  const id = '123456789012345678';
  const r = runBin('logsaver', ['--queue-dir', 'q', '--name', 'n'], `${id}\t${record}\n`, work);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fs.readFileSync(path.join(work, 'q', id, 'n.tsv'), 'utf8'), `${record}\n`);
  // One byte more is over the limit, named as before.
  const over = runBin('logsaver', ['--queue-dir', 'q', '--name', 'm'], `${id}\t${record}x\n`, work);
  assert.equal(over.status, 1);
  assert.match(over.stderr, /logsaver: -:1: line longer than 1048595 bytes/);
});
