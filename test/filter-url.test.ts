// The rule table of filter-url (docs/formats-and-rules.md), branch by branch, at its boundaries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decide, type FilterParams } from '../src/stages/filter-url.js';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseDuration, timestampToMs } from '../src/core/time.js';
import { BIN, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import { checkJoinedAt } from '../src/core/record-checks.js';
import { HOST_TAG } from '../src/core/temps.js';
import { TextSink, lineRef } from './lib/bytes.js';

process.env.TZ = 'UTC';
const H = 3600_000;
const p = (now: string, resend = H, keep = H): FilterParams => ({ nowMs: timestampToMs(now), resendAfterMs: resend, keepMs: keep });
const joined = (c: [string, string, string] | null, i: [string, string, string] | null) => [
  '00000000000000ab',
  'd.com',
  'http://d.com/',
  c ? c[0] : '-',
  i ? i[0] : '-',
  c ? c[1] : '',
  i ? i[1] : '',
  c ? c[2] : '-',
  i ? i[2] : '-',
];
const rec = (ts: string, tag: string, hits: string) => `00000000000000ab\t${ts}\t${tag}\t${hits}\td.com\thttp://d.com/`;
const NOW = '20110727210000';

const cases: [string, ReturnType<typeof joined>, FilterParams, string, string | null, string | null][] = [
  [
    'incoming only: send, current gets incoming',
    joined(null, ['20110727205000', 'v', '3']),
    p(NOW),
    'new',
    rec('20110727205000', 'v', '3'),
    rec('20110727205000', 'v', '3'),
  ],
  [
    'incoming only, older than keep: still sent and kept',
    joined(null, ['20110720000000', '', '1']),
    p(NOW),
    'new',
    rec('20110720000000', '', '1'),
    rec('20110720000000', '', '1'),
  ],
  ['current only, 1s younger than keep: kept', joined(['20110727200001', 'k', '4'], null), p(NOW), 'kept', null, rec('20110727200001', 'k', '4')],
  ['current only, exactly keep old: dropped', joined(['20110727200000', 'k', '4'], null), p(NOW), 'expired', null, null],
  ['current only, in the future: kept', joined(['20110727220000', '', '4'], null), p(NOW), 'kept', null, rec('20110727220000', '', '4')],
  [
    'both, exactly resend-after apart: due',
    joined(['20110727190000', 't', '1'], ['20110727200000', 't', '2']),
    p(NOW),
    'due',
    rec('20110727200000', 't', '2'),
    rec('20110727200000', 't', '3'),
  ],
  [
    'both, 1s short of resend-after: held',
    joined(['20110727190001', 't', '1'], ['20110727200000', 't', '2']),
    p(NOW),
    'held',
    null,
    rec('20110727190001', 't', '3'),
  ],
  [
    'both, updatetag changed: sent',
    joined(['20110727200000', 'v1', '1'], ['20110727200100', 'v2', '2']),
    p(NOW),
    'changed',
    rec('20110727200100', 'v2', '2'),
    rec('20110727200100', 'v2', '3'),
  ],
  [
    'both, incoming updatetag empty: not a change, current keeps its tag',
    joined(['20110727200000', 'v1', '1'], ['20110727200100', '', '2']),
    p(NOW),
    'held',
    null,
    rec('20110727200000', 'v1', '3'),
  ],
  [
    'both, current tag empty, incoming non-empty: a change',
    joined(['20110727200000', '', '1'], ['20110727200100', 'v', '2']),
    p(NOW),
    'changed',
    rec('20110727200100', 'v', '2'),
    rec('20110727200100', 'v', '3'),
  ],
  [
    'both, due with empty incoming tag: current keeps c tag',
    joined(['20110727180000', 'v1', '7'], ['20110727200000', '', '8']),
    p(NOW),
    'due',
    rec('20110727200000', '', '8'),
    rec('20110727200000', 'v1', '15'),
  ],
  [
    'both, incoming older than current, other tag: a late sighting is no news, the tag stays',
    joined(['20110727203000', 'v2', '10'], ['20110727190000', 'v1', '20']),
    p(NOW),
    'held',
    null,
    rec('20110727203000', 'v2', '30'),
  ],
  [
    'both, incoming 1s older than current, other tag: held',
    joined(['20110727203000', 'v2', '10'], ['20110727202959', 'v1', '20']),
    p(NOW),
    'held',
    null,
    rec('20110727203000', 'v2', '30'),
  ],
  [
    'both, same timestamp, other tag: a change',
    joined(['20110727203000', 'v1', '10'], ['20110727203000', 'v2', '20']),
    p(NOW),
    'changed',
    rec('20110727203000', 'v2', '20'),
    rec('20110727203000', 'v2', '30'),
  ],
  [
    'both, incoming older than current, same tag: held (negative gap is never due)',
    joined(['20110727203000', 'v1', '10'], ['20110727190000', 'v1', '20']),
    p(NOW),
    'held',
    null,
    rec('20110727203000', 'v1', '30'),
  ],
  [
    'both, 20m resend: 20m apart is due',
    joined(['20110727200000', '', '1'], ['20110727202000', '', '1']),
    p(NOW, 20 * 60_000),
    'due',
    rec('20110727202000', '', '1'),
    rec('20110727202000', '', '2'),
  ],
  [
    'both, huge hits: exact sum',
    joined(['20110727200000', '', '9007199254740993'], ['20110727200100', '', '9007199254740993']),
    p(NOW),
    'held',
    null,
    rec('20110727200000', '', '18014398509481986'),
  ],
];

for (const [name, f, params, outcome, send, keep] of cases) {
  test(`decide: ${name}`, () => {
    const line = lineRef(f.join('\t'), 8);
    assert.equal(checkJoinedAt(line), null, 'a valid joined record');
    const sendSink = new TextSink();
    const keepSink = new TextSink();
    assert.equal(decide(line, params, sendSink, keepSink), outcome);
    assert.equal(sendSink.take(), send === null ? '' : send + '\n');
    assert.equal(keepSink.take(), keep === null ? '' : keep + '\n');
  });
}

// The hour cache of timestampMsAt must read every timestamp as new Date() does, also
// in zones whose clock changes off the hour (St John's in 2011: 00:01) or by 30
// minutes (Lord Howe). Each zone runs in its own process: the zone is read once.
for (const zone of ['America/St_Johns', 'Australia/Lord_Howe', 'America/New_York', 'Europe/Moscow']) {
  test(`timestamps match new Date() for every minute of 2011 in ${zone}, and format as the local clock`, () => {
    const timeJs = new URL('../src/core/time.js', import.meta.url).href;
    const script = `
      import { formatTimestamp, timestampMsAt } from ${JSON.stringify(timeJs)};
      const b = Buffer.alloc(14);
      let bad = 0, first = '';
      // --now's default and the runner's hours: the local wall clock, as Intl shows it in the zone.
      const f = new Intl.DateTimeFormat('en-CA', { timeZone: ${JSON.stringify(zone)}, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
      for (let t = Date.UTC(2010, 11, 31); t < Date.UTC(2012, 0, 2); t += 17 * 60_000 + 1000) {
        const want = f.formatToParts(t).filter((x) => x.type !== 'literal').map((x) => x.value).join('');
        if (formatTimestamp(new Date(t)) !== want) { bad++; first ||= 'format ' + want; }
      }
      for (let t = Date.UTC(2010, 11, 31); t < Date.UTC(2012, 0, 2); t += 60_000) {
        const d = new Date(t);
        const s = (t / 60_000) % 60; // a second that moves with the minute
        const ts = String(d.getUTCFullYear()) + [d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), s].map((n) => String(n).padStart(2, '0')).join('');
        b.write(ts, 'latin1');
        const want = new Date(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), s).getTime();
        if (timestampMsAt(b, 0) !== want) { bad++; first ||= ts; }
      }
      console.log(bad + ' ' + first);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, TZ: zone }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), '0', `${zone}: timestamps read differently from new Date(), first: ${r.stdout}`);
  });
}

test('a timestamp that is not a real time is an error, not a number (no hour shares its cache slot with a month 14)', () => {
  process.env.TZ = 'UTC';
  const ok = timestampToMs('20120101000000');
  assert.equal(ok, Date.UTC(2012, 0, 1));
  for (const bad of ['20111401000000', '20110230000000', '20110101240000', '20110101006000', '20110101000060', '20110100000000']) {
    assert.throws(() => timestampToMs(bad), { code: 'BAD_TIMESTAMP' }, bad);
  }
  assert.equal(timestampToMs('20120101003000'), Date.UTC(2012, 0, 1, 0, 30));
});

test('years below 100 are those years, not 19xx as new Date(y, ...) reads them: the years 9, 10, 99 and 100 follow one another', () => {
  process.env.TZ = 'UTC';
  const utc = (y: number, mo: number, d: number) => {
    const t = new Date(0);
    t.setUTCFullYear(y, mo - 1, d);
    return t.getTime();
  };
  assert.equal(timestampToMs('00500101000000'), utc(50, 1, 1));
  assert.equal(timestampToMs('00100101000000') - timestampToMs('00091231235959'), 1000);
  assert.equal(timestampToMs('01000101000000') - timestampToMs('00991231235959'), 1000);
});

test('--current-out: a symlink is written through, a FIFO or directory is refused before any output, an empty name is a usage error', () => {
  const work = scratch();
  const line = '0000000000000001\ta.com\thttp://a.com/\t-\t20110101000000\t\t\t-\t1\n';
  const args = (out: string) => ['--now', '20110101010000', '--current-out', out];
  fs.writeFileSync(path.join(work, 'target.tsv'), 'old\n');
  fs.symlinkSync('target.tsv', path.join(work, 'link.tsv'));
  const l = runBin('filter-url', args('link.tsv'), line, work);
  assert.equal(l.status, 0, l.stderr);
  assert.ok(fs.lstatSync(path.join(work, 'link.tsv')).isSymbolicLink(), 'the link stays a link');
  assert.equal(fs.readFileSync(path.join(work, 'target.tsv'), 'utf8'), '0000000000000001\t20110101000000\t\t1\ta.com\thttp://a.com/\n');
  // A dangling link (the first run, before current_log exists) is made where it points.
  fs.mkdirSync(path.join(work, 'state'));
  fs.symlinkSync('state/current_log', path.join(work, 'dangling'));
  assert.equal(runBin('filter-url', args('dangling'), line, work).status, 0);
  assert.ok(fs.lstatSync(path.join(work, 'dangling')).isSymbolicLink(), 'the dangling link stays a link');
  assert.match(fs.readFileSync(path.join(work, 'state', 'current_log'), 'utf8'), /^0000000000000001\t/);
  // A relative link reached through a linked directory: '..' is taken from where the link
  // really is (it was resolved as text: linked/../shared/cl, which does not exist).
  fs.mkdirSync(path.join(work, 'real', 'state'), { recursive: true });
  fs.mkdirSync(path.join(work, 'real', 'shared'));
  fs.symlinkSync('real/state', path.join(work, 'linked'));
  fs.symlinkSync('../shared/cl', path.join(work, 'real', 'state', 'current_log'));
  const viaDir = runBin('filter-url', args('linked/current_log'), line, work);
  assert.equal(viaDir.status, 0, viaDir.stderr);
  assert.match(fs.readFileSync(path.join(work, 'real', 'shared', 'cl'), 'utf8'), /^0000000000000001\t/);
  execFileSync('mkfifo', [path.join(work, 'fifo')]);
  fs.mkdirSync(path.join(work, 'dir'));
  for (const bad of ['fifo', 'dir']) {
    const r = runBin('filter-url', args(bad), line, work);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, failedOutput('filter-url'));
    assert.match(r.stderr, new RegExp(`^filter-url: ${bad}: is not a regular file: refusing to replace it\\n`));
  }
  assert.ok(!fs.statSync(path.join(work, 'fifo')).isFile(), 'the FIFO is still a FIFO');
  // A link to itself (or any loop) is refused, not followed forever.
  fs.symlinkSync('loop', path.join(work, 'loop'));
  const loop = runBin('filter-url', args('loop'), line, work);
  assert.equal(loop.status, 1, loop.stderr);
  assert.equal(loop.stdout, failedOutput('filter-url'));
  assert.match(loop.stderr, /^filter-url: loop: too many levels of symbolic links\n/);
  const e = runBin('filter-url', args(''), line, work);
  assert.equal(e.status, 2);
  assert.match(e.stderr, /^filter-url: --current-out wants a file name\nTry 'filter-url --help'/);
  const m = runBin('filter-url', args('nodir/next'), line, work);
  assert.equal(m.status, 1);
  assert.match(m.stderr, /^filter-url: nodir\/next: cannot open for writing: ENOENT/, 'names the given file, not its temporary one');
});

test('stdout failing at the last write leaves current_log as it was: what was not sent must not be remembered as sent', () => {
  const work = scratch();
  fs.writeFileSync(path.join(work, 'in'), '0000000000000001\ta.com\thttp://a.com/\t-\t20110101000000\t\t\t-\t1\n');
  fs.writeFileSync(path.join(work, 'cl'), 'old\n');
  // One line: all of stdout is written by the final flush, after the input has ended.
  const r = spawnSync('bash', ['-c', `${path.join(BIN, 'filter-url')} --now 20110101010000 --current-out cl < in > /dev/full`], {
    cwd: work,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^filter-url: stdout: cannot write output: ENOSPC/);
  assert.equal(fs.readFileSync(path.join(work, 'cl'), 'utf8'), 'old\n');
  assert.deepEqual(fs.readdirSync(work).sort(), ['cl', 'in'], 'no temporary file left');
});
test('durations: the units, and nothing above ten years (400 digits of days used to read as Infinity)', () => {
  assert.equal(parseDuration('90s'), 90_000);
  assert.equal(parseDuration('30m'), 1_800_000);
  assert.equal(parseDuration('10h'), 36_000_000);
  assert.equal(parseDuration('3650d'), 3650 * 86_400_000);
  assert.equal(parseDuration('3651d'), null);
  assert.equal(parseDuration('9'.repeat(400) + 'd'), null);
  assert.equal(parseDuration('1.5h'), null);
  // The documented rule exactly (docs/formats-and-rules.md): digits alone are seconds; units in lower case only.
  assert.equal(parseDuration('90'), 90_000);
  assert.equal(parseDuration('0'), 0);
  for (const bad of ['90S', '1H', '90 s', '1w', 's', '', '-1s', '1h30m']) assert.equal(parseDuration(bad), null, bad);
});

test("--current-out: the temporary file a SIGKILLed run left beside it is removed by the next run; a live process's, another file's and another host's stay", async () => {
  const work = scratch('ms-fu-');
  const child = spawn(path.join(BIN, 'filter-url'), ['--now', NOW, '--current-out', 'current_log'], {
    cwd: work,
    env: testEnv(),
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  const ended = new Promise((r) => child.on('close', r));
  child.stdin.write(`${joined(null, ['20110727200841', '', '1']).join('\t')}\n`);
  const left = path.join(work, `current_log.tmp-${child.pid}-${HOST_TAG}`);
  for (let i = 0; i < 600 && !fs.existsSync(left); i++) await new Promise((r) => setTimeout(r, 50));
  child.kill('SIGKILL');
  await ended;
  assert.ok(fs.existsSync(left), 'the killed run left its temporary file');
  const other = HOST_TAG === '00000000' ? '11111111' : '00000000';
  const keep = [`current_log.tmp-${process.pid}-${HOST_TAG}`, `domain_map.tmp-${child.pid}-${HOST_TAG}`, `current_log.tmp-${child.pid}-${other}`];
  for (const f of keep) fs.writeFileSync(path.join(work, f), 'x');
  const r = runBin('filter-url', ['--now', NOW, '--current-out', 'current_log'], '', work);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fs.existsSync(left), false, `${left} removed`);
  assert.ok(r.stderr.includes(`removed ${path.basename(left)}, left by a run that was killed`), r.stderr); // named as --current-out was given
  assert.deepEqual(fs.readdirSync(work).sort(), ['current_log', ...keep].sort());
});

test('a failed run still counts so that lines_in = sent + held + kept + expired (the failing line is in none)', () => {
  const work = scratch('ms-fu-');
  const big = '9'.repeat(30);
  const line = (id: string, cHits: string, iHits: string) =>
    [id, 'd.com', 'http://d.com/', '20110727200000', '20110727203000', '', '', cHits, iHits].join('\t');
  // Line 2's hits sum has 31 digits: an error, after line 1 was held.
  const input = `${line('00000000000000a1', '1', '1')}\n${line('00000000000000a2', big, big)}\n`;
  const r = runBin('filter-url', ['--now', NOW, '--current-out', 'cl'], input, work);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^filter-url: -:2: /);
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  assert.equal(s.lines_in, 1);
  assert.equal(Number(s.sent) + Number(s.held) + Number(s.kept) + Number(s.expired), s.lines_in);
});
