// Numbers an operator types (options of the stages, partner-db and the runner) are
// read strictly, one way everywhere: no hex, exponent, spaces, sign, '' or Infinity.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UsageError } from '../src/core/errors.js';
import { parseCount, parseDecimal, parseGroupedCount } from '../src/core/numbers.js';
import { parseArgs } from '../src/runner/options/parse.js';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runBin, scratch } from './lib/run.js';
import { FAST_SUITE } from './lib/pg.js';

/** What Number() or parseInt() would take and a person does not mean as a number. */
const LENIENT = ['0x1', '1e0', ' 1', '1 ', '', '+1', '-0', 'Infinity', '1_0', '0b1', '1,0', '1.2.3', '٣'];

test('the shared readers: plain decimals and digits only', () => {
  for (const [text, want] of [
    ['0', 0],
    ['0.01', 0.01],
    ['1', 1],
    ['.5', 0.5],
    ['1.', 1],
    ['2.50', 2.5],
    ['007', 7],
  ] as const) {
    assert.equal(parseDecimal(text), want, JSON.stringify(text));
  }
  for (const text of [...LENIENT, '.', '1'.repeat(400)]) assert.equal(parseDecimal(text), null, JSON.stringify(text));
  for (const [text, want] of [
    ['0', 0],
    ['16', 16],
    ['007', 7],
    ['9007199254740991', Number.MAX_SAFE_INTEGER],
  ] as const) {
    assert.equal(parseCount(text), want, JSON.stringify(text));
  }
  // 2^53 + 1 would be read as 2^53: another number than the one typed.
  for (const text of [...LENIENT, '1.0', '1.', '9007199254740992', '9007199254740993']) assert.equal(parseCount(text), null, JSON.stringify(text));
  for (const [text, want] of [
    ['1000000', 1e6],
    ['1_000_000', 1e6],
    ['1,000,000', 1e6],
    ['1_000,000', 1e6],
    ['999', 999],
  ] as const) {
    assert.equal(parseGroupedCount(text), want, JSON.stringify(text));
  }
  for (const text of ['1,5', '1__000', '1_00', '_1000', '1000_', '10,00,000', ...LENIENT]) {
    assert.equal(parseGroupedCount(text), null, JSON.stringify(text));
  }
});

test('a numeric option written loosely is a usage error naming the option and the value, in every tool', () => {
  const work = scratch();
  // [tool, args before the value, option as the message names it, bad values]
  // The readers above are tried on every loose form; here, a few per option, for the wiring.
  const cases: [string, string[], string, string[]][] = [
    ['analyze-dump', ['--max-reject-ratio'], '--max-reject-ratio', ['0x1', '1e0', ' 1', 'Infinity']],
    ['analyze-dump', ['--max-url-bytes'], '--max-url-bytes', ['0x100', '1e3', '200.0']],
    ['analyze-dump', ['--threads'], '--threads', [' 2']],
    ['analyze-dump', ['--memory'], '--memory', [' 64M', '0x40M']],
    ['filter-url', ['--current-out', 'cl', '--resend-after'], '--resend-after', [' 1h', '0x10', '1.5h']],
    ['filter-url', ['--current-out', 'cl', '--keep'], '--keep', ['10h ']],
    ['filter-url', ['--current-out', 'cl', '--now'], '--now', [' 20110728060000']],
    ['upload-domains', ['--db', 'p.db', '--now'], '--now', ['20110728060000 ']],
    ['partner-db', ['--db', 'p.db', 'add', 'x', '--weight'], 'weight', [' 2', '1e3']],
    ['partner-db', ['--db', 'p.db', 'set-weight', 'x'], 'weight', ['2 ']],
  ];
  const failures: string[] = [];
  for (const [tool, args, option, values] of cases) {
    // The first value of each option in the fast suite (the wiring); every one in npm run test:all.
    for (const v of FAST_SUITE ? values.slice(0, 1) : values) {
      const r = runBin(tool, [...args, v], '', work);
      const named = r.stderr.includes(option) && r.stderr.includes(`'${v}'`);
      if (r.status !== 2 || !named || !r.stderr.includes(`Try '${tool} --help'`)) {
        failures.push(`${tool} ${args.join(' ')} ${JSON.stringify(v)}: exit ${r.status}, ${JSON.stringify(r.stderr.slice(0, 200))}`);
      }
    }
  }
  assert.deepEqual(failures, []);
  // The plain forms still work.
  for (const v of ['.5', '1.0']) {
    const r = runBin('analyze-dump', ['--max-reject-ratio', v], '', work);
    assert.equal(r.status, 0, `--max-reject-ratio ${v}: ${r.stderr}`);
  }
});

test('the runner reads its numbers as the stages do: flags and config values alike', () => {
  const usage = (argv: string[], message: RegExp) =>
    assert.throws(
      () => parseArgs(argv, '/w'),
      (e: unknown) => e instanceof UsageError && message.test(e.message),
      JSON.stringify(argv),
    );
  for (const v of LENIENT) usage(['--max-reject-ratio', v], /^max-reject-ratio wants a number from 0 to 1/);
  for (const v of ['1,5', '1__000', '0x10', '1e6', ' 5']) usage(['--backlog-warn', v], /^backlog-warn wants a number of URLs/);
  for (const v of [' 1h', '0x10', '1e3']) usage(['--keep', v, '--resend-after', '1'], /^keep wants a duration/);
  for (const v of [' 5s', '0x5']) usage(['--kill-after', v], /^kill-after wants a duration/);
  for (const v of [' 64M', '0x40M']) usage(['--memory', v], /^memory wants a size/);
  for (const v of ['0', '-1', 'x', '1.5', '2147483649']) usage(['--max-per-domain', v], /^max-per-domain wants a number of URLs from 1/);
  for (const v of ['soon', ' 1h']) usage(['--carry-keep', v], /^carry-keep wants a duration/);
  assert.deepEqual(
    [(parseArgs(['--max-per-domain', '1,000'], '/w') as { maxPerDomain: number }).maxPerDomain, (parseArgs([], '/w') as { maxPerDomain: null }).maxPerDomain],
    [1000, null],
  );
  const o = parseArgs(['--max-reject-ratio', '.5', '--backlog-warn', '2,000,000'], '/w');
  assert.ok(typeof o === 'object');
  assert.deepEqual([o.maxRejectRatio, o.backlogWarn], ['.5', 2_000_000]);
  // A bad value in the config file is named at its line there; the same value given as a flag instead wins.
  const dir = scratch();
  const conf = path.join(dir, 'runner.conf');
  const bad: [string, RegExp][] = [
    ['keep = 10H', /^runner\.conf:2: keep wants a duration like 90s, 30m, 1h, 10h, 1d or seconds \(at most 3650d\), got '10H'$/],
    ['memory = lots', /^runner\.conf:2: memory wants a size/],
    ['max-reject-ratio = 2', /^runner\.conf:2: max-reject-ratio wants a number from 0 to 1, got '2'/],
    ['backlog-warn = 1e6', /^runner\.conf:2: backlog-warn wants a number of URLs/],
    ['now = 20110231000000', /^runner\.conf:2: now wants a real time/],
    ['log-level = loud', /^runner\.conf:2: log-level is one of/],
    ['kill-after = 2d', /^runner\.conf:2: kill-after wants a duration/],
    ['inbox = ""', /^runner\.conf:2: inbox is an empty path/],
  ];
  for (const [line, message] of bad) {
    fs.writeFileSync(conf, `# hourly\n${line}\n`);
    assert.throws(
      () => parseArgs(['--config', 'runner.conf'], dir),
      (e: unknown) => e instanceof UsageError && message.test(e.message),
      line,
    );
  }
  fs.writeFileSync(conf, 'keep = 10H\n');
  assert.ok(typeof parseArgs(['--config', conf, '--keep', '10h'], '/w') === 'object');
});

test('runner: --db may be a PostgreSQL URI, on the command line or in the config file (not taken for a path); the time-outs go to the stages and are checked first', () => {
  const uri = 'postgresql://ms@db.example:5433/partners';
  const flag = parseArgs(['--db', uri, '--lock-timeout', '5'], '/w');
  assert.ok(typeof flag === 'object');
  assert.equal(flag.db, uri);
  assert.deepEqual(flag.dbArgs, ['--lock-timeout', '5']);
  assert.deepEqual(flag.dbTimeouts, { connectMs: 5000, answerMs: 20_000, statementMs: 15_000, lockMs: 5000 });
  const dir = scratch();
  const conf = path.join(dir, 'runner.conf');
  // An older configuration's statement-timeout = 300 stays valid beside the newer answer-timeout.
  fs.writeFileSync(conf, `db = ${uri}\nconnect-timeout = 2.5\nstatement-timeout = 300\nanswer-timeout = 30\n`);
  const fromFile = parseArgs(['--config', conf], '/w');
  assert.ok(typeof fromFile === 'object');
  assert.equal(fromFile.db, uri);
  assert.deepEqual(fromFile.dbArgs, ['--connect-timeout', '2.5', '--answer-timeout', '30', '--statement-timeout', '300']);
  assert.deepEqual(fromFile.dbTimeouts, { connectMs: 2500, answerMs: 30_000, statementMs: 300_000, lockMs: 60_000 });
  // A file name is still one, from the config file's directory.
  fs.writeFileSync(conf, 'db = p.db\n');
  const file = parseArgs(['--config', conf], '/w');
  assert.ok(typeof file === 'object');
  assert.equal(file.db, path.join(dir, 'p.db'));
  assert.throws(
    () => parseArgs(['--statement-timeout', '1e3'], '/w'),
    (e: unknown) => e instanceof UsageError && /--statement-timeout wants seconds from 0 to 86400, got '1e3'/.test(e.message),
  );
});
