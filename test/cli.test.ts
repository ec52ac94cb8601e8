// The shared runner's conventions, for every stage: help, version, usage errors,
// a closed stdout, an input file argument, a summary line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as os from 'node:os';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { PIPESIZE_ADDON } from '../src/core/pipes.js';
import { shellQuote, visibleName } from '../src/core/errors.js';
import { BIN, ROOT, awaitWithLateFifoEnd, hasStackTrace, madeDb, partnerDb, runBin, scratch, summaryOf, testEnv, failedOutput } from './lib/run.js';
import Database from 'better-sqlite3';
import { prng } from '../scripts/prng.js';
import { analyzeDump } from '../src/stages/analyze-dump.js';
import { domainsFromDb } from '../src/stages/domains-from-db.js';
import { filterUrl } from '../src/stages/filter-url.js';
import { groupSum } from '../src/stages/group-sum.js';
import { joinCurrent } from '../src/stages/join-current.js';
import { logsaver } from '../src/stages/logsaver.js';
import { uploadDomains } from '../src/stages/upload-domains.js';
import { limitDomains } from '../src/stages/limit-domains.js';
import { USAGE as RUNNER_USAGE } from '../src/runner/options/usage.js';
import { FAST_SUITE } from './lib/pg.js';

// The options each stage needs to get as far as reading its input.
const REQUIRED: Record<string, string[]> = {
  'analyze-dump': [],
  'group-sum': [],
  'join-current': ['--current', 'none'],
  'filter-url': ['--current-out', 'out', '--now', '20110727210000'],
  'limit-domains': ['--max-per-domain', '1', '--carry', 'none', '--carry-out', 'carry-out', '--now', '20110727210000'],
};
const STAGES = Object.keys(REQUIRED).filter((s) => fs.existsSync(path.join(BIN, s)));

for (const stage of STAGES) {
  test(`${stage}: --help on stdout, exit 0`, () => {
    const r = runBin(stage, ['--help']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, new RegExp(`^Usage: ${stage} `));
    assert.match(r.stdout, /Common to every stage/);
    assert.equal(r.stderr, '');
  });
  test(`${stage}: --version`, () => {
    const r = runBin(stage, ['--version']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
  });
  test(`${stage}: unknown option is a usage error (exit 2) with a hint, nothing on stdout`, () => {
    const r = runBin(stage, [...REQUIRED[stage]!, '--no-such-option']);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`^${stage}: unknown option '--no-such-option'\\nTry '${stage} --help' for more information\\.\\n$`));
  });
  test(`${stage}: an unknown option is named before a missing required one`, () => {
    const r = runBin(stage, ['--bogus']);
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`^${stage}: unknown option '--bogus'\\n`));
  });
  test(`${stage}: a missing input file is named, exit 1`, () => {
    const r = runBin(stage, [...REQUIRED[stage]!, '/nonexistent/input.tsv'], '', scratch());
    assert.equal(r.status, 1);
    assert.match(r.stderr, new RegExp(`^${stage}: /nonexistent/input.tsv: cannot read input: ENOENT`));
    assert.ok(!hasStackTrace(r.stderr));
  });
}

test('usage texts fit 80 columns: commander wraps a longer line on its own, leaving a short line in the middle of a paragraph', () => {
  const texts: [string, string][] = [
    ...[analyzeDump, domainsFromDb, filterUrl, groupSum, joinCurrent, limitDomains, logsaver, uploadDomains].map((d): [string, string] => [
      d.name,
      `${d.summary}\n\n${d.usage}`,
    ]),
    ['reflog-to-yacobot-queue', RUNNER_USAGE],
  ];
  for (const [name, text] of texts) {
    const long = text.split('\n').filter((l) => l.length > 80);
    assert.deepEqual(long, [], `${name}: lines over 80 columns`);
  }
});

/** Valid input for each stage, enough lines that output is written before the input ends. */
function manyLines(stage: string): string {
  const ids = Array.from({ length: 5000 }, (_, i) => i.toString(16).padStart(16, '0'));
  if (stage === 'analyze-dump') return ids.map((id) => `b\t5\t20110727200841\t1\thttp://a.com/${id}\t1\n`).join('');
  if (stage === 'filter-url') return ids.map((id) => `${id}\ta.com\thttp://a.com/${id}\t-\t20110727200841\t\t\t-\t1\n`).join('');
  return ids.map((id) => `${id}\t20110727200841\t\t1\ta.com\thttp://a.com/${id}\n`).join('');
}

for (const stage of STAGES) {
  // The code every stage shares: two stages (worker threads; a spool) in the fast suite, every stage in npm run test:all.
  const skip = FAST_SUITE && !['analyze-dump', 'limit-domains'].includes(stage) && 'the shared code two stages run (npm run test:all)';
  test(`${stage}: a full stdout is named as stdout, not as the input; a directory on stdin is not empty input`, { skip }, () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'in'), manyLines(stage));
    const full = spawnSync('bash', ['-c', `${path.join(BIN, stage)} "$@" < in > /dev/full`, stage, ...REQUIRED[stage]!], {
      cwd: dir,
      env: testEnv(),
      encoding: 'utf8',
    });
    assert.equal(full.status, 1, full.stderr);
    assert.match(full.stderr, new RegExp(`^${stage}: stdout: cannot write output: ENOSPC`, 'm'));
    assert.ok(!hasStackTrace(full.stderr));
    const d = spawnSync('bash', ['-c', `${path.join(BIN, stage)} "$@" < .`, stage, ...REQUIRED[stage]!], { cwd: dir, env: testEnv(), encoding: 'utf8' });
    assert.equal(d.status, 1, d.stderr);
    assert.match(d.stderr, new RegExp(`^${stage}: -: cannot read input: EISDIR`, 'm'));
  });
}

for (const stage of STAGES) {
  test(`${stage}: a run with nothing to write does not write: a full stdout (/dev/full) is then no error`, () => {
    const dir = scratch();
    // A header line for analyze-dump (skipped), nothing for the others.
    fs.writeFileSync(path.join(dir, 'in'), stage === 'analyze-dump' ? 'reflog-dump v2\n' : '');
    const r = spawnSync('bash', ['-c', `${path.join(BIN, stage)} "$@" < in > /dev/full`, stage, ...REQUIRED[stage]!], {
      cwd: dir,
      env: testEnv(),
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /"summary":true,"status":"ok"/);
  });
}

for (const stage of STAGES) {
  // The code every stage shares: two stages (worker threads; a spool) in the fast suite, every stage in npm run test:all.
  const skip = FAST_SUITE && !['analyze-dump', 'limit-domains'].includes(stage) && 'the shared code two stages run (npm run test:all)';
  test(`${stage}: a stdout open only for reading (a pipe's read end) is an error, not a reader gone`, { skip }, () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'in'), manyLines(stage));
    // stdout is the read end of the pipe on stdin: every write fails (libuv says EPIPE).
    const r = spawnSync('bash', ['-c', `cat in | ${path.join(BIN, stage)} "$@" 1<&0`, stage, ...REQUIRED[stage]!], {
      cwd: dir,
      env: testEnv(),
      encoding: 'utf8',
    });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`^${stage}: stdout: cannot write output: EBADF`, 'm'));
    assert.equal(summaryOf(r.stderr).status, 'failed');
  });
}

test('a stage that fails, or loses its reader, still reports how far it got in its summary line', () => {
  const rec = (id: number) => `${id.toString(16).padStart(16, '0')}\t20110727200841\t\t1\ta.com\thttp://a.com/${id}\n`;
  const r = runBin('group-sum', [], rec(1) + rec(1) + rec(2) + rec(1));
  assert.equal(r.status, 1);
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  // One record folded (the second id 1); id 2's group was still open, neither out nor merged.
  assert.deepEqual([s.records_in, s.records_out, s.merged], [3, 1, 1]);
  const f = runBin('filter-url', REQUIRED['filter-url']!, manyLines('filter-url') + 'bad\n', scratch());
  assert.equal(f.status, 1);
  assert.deepEqual([summaryOf(f.stderr).lines_in, summaryOf(f.stderr).sent_new], [5000, 5000]);
  // More output than a grown pipe holds (1 MiB), so join-current cannot finish before head exits.
  const many = Array.from({ length: 40_000 }, (_, i) => rec(i + 1)).join('');
  const closed = spawnSync('bash', ['-c', `${path.join(BIN, 'join-current')} --current none | head -1 >/dev/null`], {
    input: many,
    env: testEnv(),
    encoding: 'utf8',
    cwd: scratch(),
  });
  const c = summaryOf(closed.stderr);
  assert.equal(c.status, 'output closed');
  assert.ok(typeof c.incoming === 'number' && c.incoming > 0, JSON.stringify(c));
});

test('errors name the input file and line when a file argument is given', () => {
  const work = scratch();
  const f = path.join(work, 'incoming.tsv');
  fs.writeFileSync(f, '00000000000000aa\t20110727200841\t\t1\ta.com\thttp://a.com/\nnot a record\n');
  const r = runBin('group-sum', [f]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, new RegExp(`^group-sum: ${f}:2: expected 6 fields`));
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  assert.equal(s.error_code, 'BAD_RECORD');
});

test('a file name with a newline or another control character gives one-line messages, the name shown escaped (\\n, \\t, \\xHH)', () => {
  const work = scratch();
  const rec = '00000000000000aa\t20110727200841\t\t1\ta.com\thttp://a.com/\n';
  const name = 'in\ncoming\t\x1b.tsv';
  const shown = 'in\\ncoming\\t\\x1b.tsv';
  fs.writeFileSync(path.join(work, name), rec + 'not a record\n');
  // Each stderr line must start with the program's name or be a JSON log line: a newline of
  // the name once started a line that read as a message of its own.
  const oneLine = (stderr: string, prog: string) => {
    for (const l of stderr.split('\n').filter((x) => x !== ''))
      assert.ok(
        l.startsWith(`${prog}: `) || l.startsWith('{') || l.startsWith(`Try '${prog} --help'`),
        `a line of its own: ${JSON.stringify(l)} in\n${stderr}`,
      );
  };
  // The input file argument, --current, and a usage error quoting the name.
  const g = runBin('group-sum', [name], '', work);
  assert.equal(g.status, 1, g.stderr);
  assert.ok(g.stderr.includes(`group-sum: ${shown}:2: expected 6 fields`), g.stderr);
  oneLine(g.stderr, 'group-sum');
  assert.equal(summaryOf(g.stderr).error, `${shown}:2: expected 6 fields (id timestamp updatetag hits domain url), got 1`);
  const j = runBin('join-current', ['--current', name], rec, work);
  assert.equal(j.status, 1, j.stderr);
  assert.ok(j.stderr.includes(`join-current: ${shown}:2: expected 6 fields`), j.stderr);
  oneLine(j.stderr, 'join-current');
  const u = runBin('join-current', ['--current', name, name], '', work);
  assert.equal(u.status, 2, u.stderr);
  assert.ok(u.stderr.includes(`join-current: --current ${shown} is the input itself\n`), u.stderr);
  oneLine(u.stderr, 'join-current');
  // partner-db: the place, and the command it suggests, which works as shown.
  const db = 'p\n.db';
  const p = runBin('partner-db', ['--db', db, 'stats'], '', work);
  assert.equal(p.status, 1, p.stderr);
  assert.equal(p.stderr, "partner-db: p\\n.db: database does not exist; create one with: partner-db --db $'p\\n.db' init\n");
  const init = spawnSync('bash', ['-c', "partner-db --db $'p\\n.db' init"], { cwd: work, env: testEnv(), encoding: 'utf8' });
  assert.equal(init.status, 0, init.stderr);
  assert.ok(fs.existsSync(path.join(work, db)), 'the suggested command made that database');
  assert.equal(init.stdout, 'initialized p\\n.db\n');
});

test('a file name with a line separator, a C1 control or a bidi override is shown escaped (\\uHHHH); the command a message suggests works in any locale', () => {
  const work = scratch();
  // U+2028 breaks the line in some terminals and log viewers, U+0085 (NEL) in others;
  // U+202E would show the rest of the line backwards.
  const name = 'in\u2028co\u0085ming\u202egnp.tsv';
  const shown = 'in\\u2028co\\u0085ming\\u202egnp.tsv';
  fs.writeFileSync(path.join(work, name), 'not a record\n');
  const g = runBin('group-sum', [name], '', work);
  assert.equal(g.status, 1, g.stderr);
  assert.ok(g.stderr.startsWith(`group-sum: ${shown}:1: expected 6 fields`), g.stderr);
  assert.ok(!/[\u0080-\u009f\u2028\u2029\u202e]/.test(g.stderr), `a raw character in:\n${JSON.stringify(g.stderr)}`);
  // partner-db's suggested command spells the name in bytes ($'\xe2\x80\xa8'): bash reads
  // $'\u2028' as the character only in a UTF-8 locale, and cron's is often C.
  const db = 'p\u2028.db';
  const p = runBin('partner-db', ['--db', db, 'stats'], '', work);
  assert.equal(p.status, 1, p.stderr);
  const cmd = "partner-db --db $'p\\xe2\\x80\\xa8.db' init";
  assert.equal(p.stderr, `partner-db: p\\u2028.db: database does not exist; create one with: ${cmd}\n`);
  const init = spawnSync('bash', ['-c', cmd], { cwd: work, env: testEnv({ LC_ALL: 'C' }), encoding: 'utf8' });
  assert.equal(init.status, 0, init.stderr);
  assert.ok(fs.existsSync(path.join(work, db)), 'the suggested command made that database');
  assert.equal(init.stdout, 'initialized p\\u2028.db\n');
});

test('shellQuote: bash reads the word back byte for byte in the C and a UTF-8 locale; visibleName escapes control and format characters, nothing else', () => {
  const words = [
    'in\u2028co\u0085ming\u202egnp.tsv',
    "it's a\\b\u2029\u200b\ufeff\u00ad\u2066x\u2069",
    'tab\tnew\nline\x1b\x7f',
    'caf\u00e9 \u{1F600} \u{E0001}tag',
    'no controls: caf\u00e9 \u{1F600}',
  ];
  for (const locale of ['C', 'C.UTF-8']) {
    for (const w of words) {
      const r = spawnSync('bash', ['-c', `printf %s ${shellQuote(w)}`], { env: testEnv({ LC_ALL: locale }) });
      assert.equal(r.status, 0, String(r.stderr));
      assert.deepEqual(r.stdout, Buffer.from(w, 'utf8'), `${locale}: ${shellQuote(w)}`);
    }
  }
  assert.equal(
    visibleName('a\u0085b\u2028c\u2029d\u202ee\u200bf\ufeffg\u{E0001}h\x7f\t'),
    'a\\u0085b\\u2028c\\u2029d\\u202ee\\u200bf\\ufeffg\\U000e0001h\\x7f\\t',
  );
  assert.equal(
    visibleName('caf\u00e9 \u00a0\u3000 \u{1F600} \u0627'),
    'caf\u00e9 \u00a0\u3000 \u{1F600} \u0627',
    'letters, spaces and emoji are shown as they are',
  );
});

/**
 * Runs the bash pipeline `pipeline` with its stdout read by `head -1` (which exits after
 * one line); returns the exit status of its command number `at` as bash saw it, the
 * stderr of it all, and the summary line in it.
 */
function underHead(
  pipeline: string,
  at: number,
  opts: { cwd?: string; input?: string } = {},
): { status: string; stderr: string; summary: Record<string, unknown> } {
  const r = spawnSync('bash', ['-c', `${pipeline} | head -1 > /dev/null; echo "\${PIPESTATUS[${at}]}" >&2`], {
    cwd: opts.cwd,
    input: opts.input,
    env: testEnv(),
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  return { status: r.stderr.trimEnd().split('\n').at(-1)!, stderr: r.stderr, summary: summaryOf(r.stderr) };
}

test('a closed stdout (| head -1) ends a stage quietly, exit 0, with its summary', () => {
  const lines: string[] = [];
  for (let i = 0; i < 200_000; i++) lines.push(`b\t5\t20110727200841\t1\thttp://h${i % 100}.example.com/${i}\t1`);
  const r = underHead('analyze-dump', 0, { input: lines.join('\n') + '\n' });
  assert.equal(r.status, '0', r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  assert.ok(
    !/EPIPE/.test(
      r.stderr
        .split('\n')
        .filter((l) => !l.startsWith('{'))
        .join('\n'),
    ),
    r.stderr,
  );
  assert.equal(r.summary.status, 'output closed');
});

test('a closed stdout stops each streaming stage while its input never ends; domains-from-db stops reading the database', () => {
  const work = scratch();
  madeDb(work, 'p.db', [
    ['add', 'a'],
    ['assign', 'a.com', 'a'],
  ]);
  // Sorted records without end (awk dies of SIGPIPE once the stage is gone).
  const joined = String.raw`"%016x\ta.com\thttp://a.com/%d\t-\t20110727200841\t\t\t-\t1\n"`;
  const url = String.raw`"%016x\t20110727200841\t\t1\ta.com\thttp://a.com/%d\n"`;
  const endless = (fmt: string) => `awk 'BEGIN { for (i = 1; ; i++) printf ${fmt}, i, i }'`;
  for (const [stage, args, fmt] of [
    ['group-sum', '', url],
    ['join-current', '--current none', url],
    ['filter-url', '--current-out out --now 20110727210000', joined],
    ['upload-domains', '--db p.db', url],
  ] as const) {
    // A stage that does not stop is killed after 60 s, and the test fails (status 137).
    const r = underHead(`${endless(fmt)} | timeout -s KILL 60 ${stage} ${args}`, 1, { cwd: work });
    assert.equal(r.status, '0', `${stage}: ${r.stderr}`);
    assert.equal(r.summary.status, 'output closed', stage);
  }
  assert.ok(!fs.existsSync(path.join(work, 'out')), 'filter-url wrote no current_log');
  // join-current over a long stretch of current_log alone (no incoming record at all).
  const cur = fs.openSync(path.join(work, 'current'), 'w');
  for (let b = 0; b < 20; b++) {
    let chunk = '';
    for (let i = b * 10_000; i < (b + 1) * 10_000; i++) chunk += `${i.toString(16).padStart(16, '0')}\t20110727200841\t\t1\ta.com\thttp://a.com/${i}\n`;
    fs.writeSync(cur, chunk);
  }
  fs.closeSync(cur);
  const j = underHead('join-current --current current < /dev/null', 0, { cwd: work });
  assert.equal(j.status, '0', j.stderr);
  assert.equal(j.summary.status, 'output closed');
  assert.ok((j.summary.current_only as number) < 100_000, JSON.stringify(j.summary));
  // 400,000 domains (5.6 MB of map): domains-from-db stops soon after head, not after
  // the last row; what it wrote before is at most a grown pipe's 1 MiB (~80,000 lines) and a buffer.
  const db = new Database(path.join(work, 'p.db'));
  db.exec(
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000) INSERT INTO partner_domain SELECT 'd' || i || '.com', 1, 'x' FROM n",
  );
  db.close();
  const d = underHead('domains-from-db --db p.db', 0, { cwd: work });
  assert.equal(d.status, '0', d.stderr);
  assert.equal(d.summary.status, 'output closed');
  assert.ok((d.summary.domains_out as number) < 200_000, JSON.stringify(d.summary));
});

test('the summary line is the last JSON line on stderr and stdout carries only data', () => {
  const r = runBin('analyze-dump', [], 'hdr\nb\t5\t20110727200841\t1\thttp://a.com/\t1\n');
  assert.equal(r.status, 0);
  assert.equal(r.stdout.split('\n').filter(Boolean).length, 1);
  const s = summaryOf(r.stderr);
  assert.equal(s.stage, 'analyze-dump');
  assert.equal(typeof s.ms, 'number');
  assert.equal(s.lines_in, 2);
  // Its peak RSS, in MiB: a Node process with worker threads takes tens of MiB.
  assert.ok(typeof s.peak_rss_mib === 'number' && s.peak_rss_mib > 20 && s.peak_rss_mib < 1024, JSON.stringify(s));
});

test('the byte-level stages on arbitrary bytes after valid lines: exit 0 or 1, the bad line named, no stack trace', {
  skip: FAST_SUITE && 'fuzzing, 60 runs (npm run test:all)',
}, () => {
  const dir = scratch();
  const db = path.join(dir, 'p.db');
  madeDb(dir, db, [['add', 'yb', '--weight', '1']]);
  const id = (i: number) => i.toString(16).padStart(16, '0');
  const url = (i: number) => `${id(i)}\t20110728060000\t\t1\ta.com\thttp://a.com/${i}`;
  const stages: [string, string[], (i: number) => string][] = [
    ['group-sum', [], url],
    ['join-current', ['--current', path.join(dir, 'none')], url],
    ['filter-url', ['--current-out', path.join(dir, 'cl'), '--now', '20110728070000'], (i) => `${id(i)}\ta.com\thttp://a.com/\t-\t20110728060000\t\t\t-\t1`],
    ['upload-domains', ['--db', db, '--tmp', dir], url],
    ['logsaver', ['--queue-dir', path.join(dir, 'q'), '--name', 'n'], (i) => `1\t${url(i)}`],
  ];
  const next = prng(7);
  const alphabet = Buffer.from('\t\t\t0123456789abcdef-.:/ \r\x00\xff\xc3\xa9');
  for (const [stage, args, good] of stages) {
    const prefix = [1, 2, 3].map((i) => good(i) + '\n').join('');
    for (let n = 0; n < 12; n++) {
      let bad: Buffer;
      if (n % 2 === 0) {
        // A valid line with one byte changed: it may stay valid (then the stage goes on).
        bad = Buffer.from(good(9));
        bad[Math.floor(next() * bad.length)] = alphabet[Math.floor(next() * alphabet.length)]!;
      } else {
        bad = Buffer.from(Array.from({ length: Math.floor(next() * 120) }, () => alphabet[Math.floor(next() * alphabet.length)]!));
      }
      const input = Buffer.concat([Buffer.from(prefix), bad, Buffer.from('\n' + good(10) + '\n')]);
      const r = runBin(stage, args, input, dir);
      const what = `${stage} on ${JSON.stringify(bad.toString('latin1'))}: ${r.stderr}`;
      assert.ok(!hasStackTrace(r.stderr), what);
      assert.ok(r.status === 0 || r.status === 1, what);
      // Line 4 is the changed one; a changed id can also put line 5 out of order.
      if (r.status === 1) assert.match(r.stderr, new RegExp(`^${stage}: -:[45]: `, 'm'), what);
    }
  }
});

// The development scripts follow the same conventions: help on stdout, usage errors
// (exit 2) naming the option, with a hint, and no stack trace.
const SCRIPTS = path.join(ROOT, 'dist', 'scripts');
const SCRIPT_CASES: { script: string; args: string[]; status: number; stdout?: RegExp; stderr?: RegExp }[] = [
  { script: 'bench', args: ['--help'], status: 0, stdout: /^Usage: bench \[options\][\s\S]*--no-reference/ },
  { script: 'bench', args: ['--repeat', 'x'], status: 2, stderr: /^bench: --repeat must be an integer from 1 to 100, not 'x'\nTry 'bench --help'/ },
  { script: 'bench', args: ['--lines', '1Q'], status: 2, stderr: /^bench: --lines must be a line count/ },
  { script: 'bench', args: ['--memory', 'lots'], status: 2, stderr: /^bench: --memory wants a size in bytes, K, M or G \(e\.g\. 64M, 1G\), got 'lots'\n/ },
  { script: 'bench', args: ['--bogus'], status: 2, stderr: /^bench: unknown option '--bogus'\nTry 'bench --help'/ },
  {
    script: 'bench',
    args: ['--domains', '100k,x'],
    status: 2,
    stderr: /^bench: --domains wants counts separated by commas, such as 100k,5M,20M, not '100k,x'\nTry 'bench --help'/,
  },
  { script: 'bench', args: ['--domains', '1M,1000k'], status: 2, stderr: /^bench: --domains names a count twice: '1M,1000k'\nTry 'bench --help'/ },
  { script: 'bench', args: ['--flood'], status: 2, stderr: /^bench: --flood goes with --domains\nTry 'bench --help'/ },
  // --max-size is not the largest input: about one run in 7 takes 2 to 8 times it (scripts/fuzz.ts).
  {
    script: 'fuzz',
    args: ['--help'],
    status: 0,
    stdout: /^Usage: fuzz \[options\][\s\S]*--iterations[\s\S]*--max-size <BYTES> +inputs up to this size, bytes, but for about one run in 7/,
  },
  { script: 'fuzz', args: ['--seconds', '-1'], status: 2, stderr: /^fuzz: --seconds must be an integer from 1/ },
  { script: 'gen-reflog', args: ['--help'], status: 0, stdout: /^Usage: gen-reflog \[options\]/ },
  { script: 'gen-reflog', args: ['--lines', 'many'], status: 2, stderr: /^gen-reflog: --lines must be a line count/ },
  { script: 'gen-reflog', args: ['--lines', '3', '--seed', '7'], status: 0, stdout: /^[^\t\n]+\n([^\n]*\t[^\n]*\n){3}$/ },
  { script: 'gen-reflog', args: ['--lines', '3', '--out', '/nonexistent/x'], status: 1, stderr: /^gen-reflog: \/nonexistent\/x: cannot write: ENOENT/ },
  { script: 'gen-reflog', args: ['--hour', '99999999999'], status: 2, stderr: /^gen-reflog: --hour must be an integer from 1 to 100000/ },
  // Each end of an integer option's range is in it; one past is not.
  { script: 'gen-reflog', args: ['--lines', '1', '--seed', '0', '--hour', '100000'], status: 0, stdout: /^reflog-dump v2 hour 100000\n[^\n]*\t[^\n]*\n$/ },
  { script: 'gen-reflog', args: ['--hour', '100001'], status: 2, stderr: /^gen-reflog: --hour must be an integer from 1 to 100000, not '100001'\n/ },
  { script: 'gen-reflog', args: ['--hour', '0'], status: 2, stderr: /^gen-reflog: --hour must be an integer from 1 to 100000, not '0'\n/ },
];
for (const c of SCRIPT_CASES) {
  test(`scripts/${c.script} ${c.args.join(' ')}: exit ${c.status}`, () => {
    const r = spawnSync(process.execPath, [path.join(SCRIPTS, `${c.script}.js`), ...c.args], { env: testEnv(), encoding: 'utf8' });
    assert.equal(r.status, c.status, r.stderr);
    if (c.stdout) assert.match(r.stdout, c.stdout);
    else assert.equal(r.stdout, '');
    if (c.stderr) assert.match(r.stderr, c.stderr);
    else assert.equal(r.stderr, '');
    assert.ok(!hasStackTrace(r.stderr));
  });
}

test('scripts/bench refuses at once, by their own rule, a --memory or --tmp that analyze-dump would refuse only after the reflogs were generated', () => {
  const work = scratch();
  const out = path.join(work, 'out');
  for (const [args, err] of [
    [['--memory', '99999999999999999999G'], /^bench: --memory 99999999999999999999G is more than this machine's memory \(\d+M\)\nTry 'bench --help'/],
    [['--memory', '512K'], /^bench: --memory wants a size of at least 1M \(e\.g\. 64M, 1G\), got '512K'\nTry 'bench --help'/],
    [['--tmp', ''], /^bench: --tmp wants a directory name\nTry 'bench --help'/],
  ] as const) {
    const r = spawnSync(process.execPath, [path.join(SCRIPTS, 'bench.js'), '--lines', '10', '--no-reference', '--out', out, ...args], {
      cwd: work,
      env: testEnv(),
      encoding: 'utf8',
    });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, err);
    assert.equal(r.stdout, '');
    assert.ok(!fs.existsSync(out), `${args.join(' ')}: nothing generated`);
  }
});

test("scripts/bench on a small hour reports (a), (b) and the floor (c), whose byte-copying processes pass analyze-dump's records through unchanged", {
  skip: FAST_SUITE && 'the benchmark: the chain, the reference and the floor, repeated (npm run test:all)',
}, () => {
  const work = scratch();
  const out = path.join(work, 'out');
  const r = spawnSync(process.execPath, [path.join(SCRIPTS, 'bench.js'), '--lines', '3000', '--out', out], { cwd: work, env: testEnv(), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /\n {2}\(a\) the chain \(as the runner\) +\d+\.\d\d /);
  assert.match(r.stdout, /\n {2}\(b\) coreutils reference /);
  assert.match(r.stdout, /\n {2}\(c\) floor: analyze-dump, then 5 copying procs +\d+\.\d\d /);
  assert.match(r.stdout, /\n {2}ratio \(c\)\/\(b\) wall: \d+\.\d\d {3}\(each run: \d+\.\d\d\)\n/);
  for (const k of [1, 2, 3, 4, 5]) assert.match(r.stdout, new RegExp(`\\n  floor copy-${k} +\\d+\\.\\d +\\d+\\.\\d\\d\\n`));
  const run = path.join(out, 'run-3000');
  const records = fs.readFileSync(path.join(run, 'solo', 'a.tsv'));
  assert.ok(records.length > 100_000, `analyze-dump wrote ${records.length} bytes`);
  assert.ok(fs.readFileSync(path.join(run, 'floor-hour2-0', 'out.tsv')).equals(records));
  // --no-floor leaves (c) out.
  const r2 = spawnSync(process.execPath, [path.join(SCRIPTS, 'bench.js'), '--lines', '3000', '--no-reference', '--no-floor', '--out', out], {
    cwd: work,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r2.status, 0, r2.stderr);
  assert.match(r2.stdout, /\(a\) the chain \(as the runner\)/);
  assert.doesNotMatch(r2.stdout, /\((b|c)\) |floor/);
});

test("scripts/bench --domains fills each partner table once, by weight and in key order, and reports hour 2 and a flood hour through the runner, with every stage's peak RSS", {
  skip: FAST_SUITE && 'the benchmark: two partner tables, hour 2 and a flood hour through the runner (npm run test:all)',
}, () => {
  const work = scratch();
  const out = path.join(work, 'out');
  const bench = (...args: string[]) =>
    spawnSync(process.execPath, [path.join(SCRIPTS, 'bench.js'), '--lines', '500', '--out', out, ...args], { cwd: work, env: testEnv(), encoding: 'utf8' });
  const r = bench('--domains', '2k,300', '--flood');
  assert.equal(r.status, 0, r.stderr);
  const table = r.stdout.split('\n').filter((l) => l.startsWith('| '));
  const head = table[0]!.split(' | ');
  const rows = table.filter((l) => /^\| [\d,]+ \|/.test(l)).map((l) => l.slice(2, -2).split(' | '));
  assert.deepEqual(
    rows.map((x) => x[0]),
    ['300', '2,000'],
    'smallest first',
  );
  for (const stage of ['analyze-dump', 'upload-domains', 'logsaver', 'flood upload-domains']) {
    const col = head.indexOf(`${stage} MiB`);
    assert.ok(col > 0, `a column for ${stage}: ${table[0]}`);
    for (const row of rows) assert.ok(Number(row[col]) > 20 && Number(row[col]) < 2048, `${stage}: ${row[col]}`);
  }
  assert.equal(rows[0]![head.indexOf('x smallest')], '1.00');
  // The filled table: its N domains spread over the Yacobots by weight (1, 1, 2), in key order, none of the hours' domains.
  const db = new Database(
    fs
      .readdirSync(out)
      .map((f) => path.join(out, f))
      .find((f) => /partners-2000-\w+\.db$/.test(f))!,
    { readonly: true },
  );
  assert.deepEqual(
    db.prepare('SELECT y.name, COUNT(*) AS n FROM partner_domain d JOIN yacobot y ON y.id = d.yacobot_id GROUP BY y.name ORDER BY y.name').raw().all(),
    [
      ['yacobot-a', 500],
      ['yacobot-b', 500],
      ['yacobot-c', 1000],
    ],
  );
  const domains = db.prepare('SELECT domain FROM partner_domain ORDER BY rowid').pluck().all() as string[];
  db.close();
  assert.deepEqual(
    domains,
    [...new Set(domains)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
  );
  const hour = fs.readFileSync(path.join(out, 'reflog-500-s1-h2.reflog'), 'latin1');
  assert.ok(
    domains.every((d) => !hour.includes(`/${d}/`) && !hour.includes(`.${d}/`)),
    'no pre-filled domain in the hour',
  );
  // Run again: the filled database is reused.
  const again = bench('--domains', '300');
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /\n\| 300 \| cached \| \d+\.\d\d \|/);
});

test('gen-reflog --flood puts every line on a domain of its own', () => {
  const r = spawnSync(process.execPath, [path.join(SCRIPTS, 'gen-reflog.js'), '--lines', '3000', '--hour', '3', '--flood'], {
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const hosts = r.stdout
    .split('\n')
    .slice(1, -1)
    .map((l) => /\thttps?:\/\/([^/:]+)/.exec(l)?.[1]?.toLowerCase())
    .filter((h) => h !== undefined);
  assert.ok(hosts.length > 2900, `${hosts.length} URLs`);
  assert.equal(new Set(hosts).size, hosts.length);
});

test('an input file whose name is not UTF-8 is said to be unreachable by that name, not only "not found"', () => {
  const dir = scratch();
  const r = spawnSync('bash', ['-c', `printf 'x' > $'bad\\xffname.tsv' && ${path.join(BIN, 'group-sum')} $'bad\\xffname.tsv'`], {
    cwd: dir,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    /^group-sum: bad\ufffdname\.tsv: cannot read input: ENOENT: no such file or directory \(if the name is not UTF-8 text, Node cannot open the file by it: rename the file\)$/m,
  );
  // A name that is simply missing gets no such hint.
  assert.match(
    runBin('group-sum', ['nonexistent.tsv'], '', dir).stderr,
    /^group-sum: nonexistent\.tsv: cannot read input: ENOENT: no such file or directory$/m,
  );
});

test('an admin command that writes nothing to stdout makes no write there: a full stdout (/dev/full) is then no error', () => {
  const dir = scratch();
  const r = spawnSync('bash', ['-c', `${process.execPath} ${path.join(SCRIPTS, 'gen-reflog.js')} --lines 10 --out g.reflog > /dev/full`], {
    cwd: dir,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.equal(fs.readFileSync(path.join(dir, 'g.reflog'), 'utf8').split('\n').length, 12, 'a header, ten lines and the last LF');
  // With output, the full device is still an error.
  const w = spawnSync('bash', ['-c', `${process.execPath} ${path.join(SCRIPTS, 'gen-reflog.js')} --lines 10 > /dev/full`], {
    cwd: dir,
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(w.status, 1);
  assert.match(w.stderr, /^gen-reflog: stdout: cannot write: ENOSPC/);
});

test('scripts/gen-reflog into a reader that goes away (| head) ends quietly, exit 0', () => {
  const r = spawnSync('bash', ['-c', `set -o pipefail; ${process.execPath} ${path.join(SCRIPTS, 'gen-reflog.js')} --lines 200000 | head -c 100 > /dev/null`], {
    env: testEnv(),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
});

test('an empty file or directory name is a usage error for every path option (logsaver wrote into the current directory)', () => {
  const dir = scratch();
  const routed = `1\t${'0'.repeat(15)}1\t20110101000000\t\t1\ta.com\thttp://a.com/\n`;
  const cases: [string, string[], string][] = [
    ['analyze-dump', ['--rejects', ''], '--rejects wants a file name'],
    ['analyze-dump', ['--tmp', ''], '--tmp wants a directory name'],
    ['join-current', ['--current', ''], '--current wants a file name'],
    ['filter-url', ['--current-out', '', '--now', '20110101000000'], '--current-out wants a file name'],
    ['domains-from-db', ['--db', ''], '--db wants a file name'],
    ['upload-domains', ['--db', ''], '--db wants a file name'],
    ['upload-domains', ['--db', 'p.db', '--map', ''], '--map wants a file name'],
    ['upload-domains', ['--db', 'p.db', '--tmp', ''], '--tmp wants a directory name'],
    ['logsaver', ['--queue-dir', '', '--name', 'x'], '--queue-dir wants a directory name'],
  ];
  for (const [stage, args, want] of cases) {
    const r = runBin(stage, args, routed, dir);
    assert.equal(r.status, 2, `${stage} ${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr, `${stage}: ${want}\nTry '${stage} --help' for more information.\n`);
    assert.equal(r.stdout, '', `${stage} ${args.join(' ')}: a usage error writes nothing to stdout`);
  }
  assert.deepEqual(fs.readdirSync(dir), [], 'nothing was written');
});

test("a file option naming the stage's own input or stdout (/dev/stdin on a pipe, > the same file) is a usage error, not a hang or a lost stream", () => {
  const dir = scratch();
  madeDb(dir, 'p.db', [['add', 'y1']]);
  fs.writeFileSync(path.join(dir, 'in'), `${'0'.repeat(15)}1\t20110101000000\t\t1\ta.com\thttp://a.com/\n`);
  const cases: [string, string, string][] = [
    // stage and arguments, how its input and stdout are connected, the message
    ['join-current --current /dev/stdin', 'cat in | STAGE | cat', '--current /dev/stdin is the input itself'],
    ['join-current --current out', 'STAGE < in > out', '--current out is stdout itself'],
    ['filter-url --now 20110101000000 --current-out /dev/stdout', 'cat in | STAGE | cat', '--current-out /dev/stdout is stdout itself'],
    ['filter-url --now 20110101000000 --current-out out', 'STAGE < in > out', '--current-out out is stdout itself'],
    ['upload-domains --db p.db --map /dev/stdin', 'cat in | STAGE | cat', '--map /dev/stdin is the input itself'],
    ['upload-domains --db p.db --map /dev/stdout', 'cat in | STAGE | cat', '--map /dev/stdout is stdout itself'], // waited forever, deaf to SIGTERM
    ['analyze-dump --rejects /dev/stdin', 'cat in | STAGE | cat', '--rejects /dev/stdin is the input itself'], // waited forever
    ['analyze-dump --rejects /dev/stdout', 'cat in | STAGE | cat', '--rejects /dev/stdout is stdout itself'],
  ];
  for (const [stage, shell, want] of cases) {
    const name = stage.split(' ')[0]!;
    const cmd = shell.replace('STAGE', path.join(BIN, stage)) + '; exit ${PIPESTATUS[1]:-$?}';
    const r = spawnSync('bash', ['-c', cmd], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 30_000, killSignal: 'SIGKILL' });
    assert.equal(r.status, 2, `${shell.replace('STAGE', stage)}: ${r.stderr}`);
    assert.equal(r.stderr, `${name}: ${want}\nTry '${name} --help' for more information.\n`);
  }
  // /dev/null and a terminal are shared by many, so they are not "the same stream".
  const r = spawnSync('bash', ['-c', `${path.join(BIN, 'analyze-dump')} --rejects /dev/null < /dev/null`], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

test('an input file that is a FIFO: read like a file when its writer comes, and a signal still stops the stage while it never comes', {
  timeout: 90_000,
}, async () => {
  const { spawn, execFileSync } = await import('node:child_process');
  const work = scratch();
  const fifo = path.join(work, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const rec = '0000000000000001\t20110727200841\tv\t2\ta.com\thttp://a.com/\n';
  const start = () => {
    const child = spawn(path.join(BIN, 'group-sum'), ['fifo'], { cwd: work, env: testEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (err += d));
    const done = new Promise<{ code: number | null; out: string; err: string }>((resolve) => child.on('close', (code) => resolve({ code, out, err })));
    return { child, done };
  };
  // Its signal handlers are in place once it catches SIGHUP (bit 0 of SigCgt): Node alone does not.
  const handlersIn = async (pid: number) => {
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 10))) {
      const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m && (BigInt(`0x${m[1]}`) & 1n) === 1n) return;
    }
    assert.fail('group-sum never installed its signal handlers');
  };
  const a = start();
  fs.writeFileSync(fifo, rec + rec); // blocks until the stage opens the FIFO
  const ra = await a.done;
  assert.equal(ra.code, 0, ra.err);
  assert.equal(ra.out, '0000000000000001\t20110727200841\tv\t4\ta.com\thttp://a.com/\n');
  const b = start();
  await handlersIn(b.child.pid!);
  b.child.kill('SIGTERM');
  // Before: the summary said "interrupted", and the process waited on for a writer.
  const { result: rb, endCame: writerCame } = await awaitWithLateFifoEnd(b.done, fifo, fs.constants.O_WRONLY);
  assert.ok(!writerCame, `exited only when a writer came 10 s later: ${rb.err}`);
  assert.equal(rb.code, 143, rb.err);
  assert.equal(summaryOf(rb.err).status, 'interrupted');
});

test("a stop signal while a stage's modules load gets what a later one gets: the summary line, the cut mark, exit 128+N", async () => {
  // Before: runStage installed the handlers once the modules had loaded (about 100 ms); a
  // signal before that took Node's default action, and the stage died of it without a
  // summary line or a cut mark. The preload sends it as bin/<stage> resolves stage.js.
  const work = scratch();
  const db = path.join(work, 'p.db');
  partnerDb(work, db, 'init');
  const args: Record<string, string[]> = {
    ...REQUIRED,
    'domains-from-db': ['--db', db],
    'upload-domains': ['--db', db, '--map', path.join(work, 'map')],
    logsaver: ['--queue-dir', path.join(work, 'q'), '--name', '2011072806'],
  };
  const preload = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/signal-on-load.js')).href}`;
  const numbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };
  const stages = fs.readdirSync(BIN).filter((s) => !s.startsWith('.') && fs.readFileSync(path.join(BIN, s), 'utf8').includes('runStage('));
  assert.equal(stages.length, 8, `the stages: ${stages}`);
  const one = (stage: string, sig: string) =>
    new Promise<void>((resolve, reject) => {
      // stdin stays open: the stage cannot end before the signal is acted on.
      const child = spawn(path.join(BIN, stage), args[stage]!, {
        cwd: work,
        env: testEnv({ NODE_OPTIONS: preload, SIGNAL_ON_LOAD: sig }),
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout!.on('data', (d: Buffer) => (out += d));
      child.stderr!.on('data', (d: Buffer) => (err += d));
      child.on('close', (code, signal) => {
        try {
          const what = `${stage}, ${sig} while its modules load`;
          assert.equal(signal, null, `${what}: died of it: ${err}`);
          assert.equal(code, 128 + numbers[sig]!, `${what}: ${err}`);
          const s = summaryOf(err);
          assert.deepEqual([s.status, s.signal], ['interrupted', sig], what);
          assert.equal(out, stage === 'logsaver' ? '' : failedOutput(stage), `${what}: stdout`);
          resolve();
        } catch (e) {
          reject(e);
        }
      });
    });
  // Every stage, with SIGTERM in the fast suite; with each stop signal in npm run test:all.
  const signals = FAST_SUITE ? ['SIGTERM'] : Object.keys(numbers);
  for (const sig of signals) await Promise.all(stages.map((stage) => one(stage, sig)));
});

/** The "pipe capacities" debug line of a stage's stderr. */
function pipeBytes(stderr: string): { stdin: number | null; stdout: number | null } {
  const line = stderr.split('\n').find((l) => l.includes('"pipe capacities"'));
  assert.ok(line, `no pipe capacities line in: ${stderr}`);
  return (JSON.parse(line) as { pipe_bytes: { stdin: number | null; stdout: number | null } }).pipe_bytes;
}

for (const stage of STAGES) {
  // The pipes are grown by the code every stage shares: analyze-dump's test in the fast suite, every stage's in npm run test:all.
  const skip = FAST_SUITE && stage !== 'analyze-dump' && "the shared code analyze-dump's test runs (npm run test:all)";
  test(`${stage}: grows the pipes it reads and writes to 1 MiB; files are left alone`, { skip }, () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'in'), manyLines(stage));
    const sh = (cmd: string) => spawnSync('bash', ['-c', cmd, stage, ...REQUIRED[stage]!], { cwd: dir, env: testEnv(), encoding: 'utf8' });
    // Between two other processes, as in the chain; the output must be the same as to a file.
    const piped = sh(`cat in | ${path.join(BIN, stage)} --log-level debug "$@" 2> err | cat > out.piped`);
    assert.equal(piped.status, 0, fs.readFileSync(path.join(dir, 'err'), 'utf8'));
    assert.deepEqual(pipeBytes(fs.readFileSync(path.join(dir, 'err'), 'utf8')), { stdin: 1 << 20, stdout: 1 << 20 });
    const files = sh(`${path.join(BIN, stage)} --log-level debug "$@" < in > out.file 2> err`);
    assert.equal(files.status, 0, fs.readFileSync(path.join(dir, 'err'), 'utf8'));
    assert.deepEqual(pipeBytes(fs.readFileSync(path.join(dir, 'err'), 'utf8')), { stdin: null, stdout: null });
    assert.ok(fs.readFileSync(path.join(dir, 'out.file')).equals(fs.readFileSync(path.join(dir, 'out.piped'))));
    // A pipe on stdin that is not the input (an input file is named) is not the stage's to grow.
    const named = sh(`cat in | ${path.join(BIN, stage)} --log-level debug "$@" in 2> err | cat > out.named`);
    assert.equal(named.status, 0, fs.readFileSync(path.join(dir, 'err'), 'utf8'));
    assert.deepEqual(pipeBytes(fs.readFileSync(path.join(dir, 'err'), 'utf8')), { stdin: null, stdout: 1 << 20 });
  });
}

test('the pipe-size addon refuses what is not a descriptor and a size (napi_get_value_int32 took NaN for stdin)', () => {
  const { growPipe } = createRequire(import.meta.url)(PIPESIZE_ADDON) as { growPipe: (...args: unknown[]) => number };
  for (const args of [[NaN, 1 << 20], [1.5, 1 << 20], [-1, 1 << 20], [2 ** 32, 1 << 20], [1, 2 ** 32 + 4096], [1, 0], [1, Infinity], ['1', 1 << 20], [1]]) {
    assert.throws(() => growPipe(...args), TypeError, String(args));
  }
  assert.equal(growPipe(987654, 1 << 20), -os.constants.errno.EBADF, 'a descriptor not open');
});

test('without the addons (not built) a stage works the same: the pipes as they are, its record checks in JavaScript', () => {
  // A copy of the project without build/: what an install whose compiler failed leaves.
  const copy = scratch();
  for (const d of ['bin', 'dist']) fs.cpSync(path.join(ROOT, d), path.join(copy, d), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  const input = manyLines('group-sum');
  const r = spawnSync('bash', ['-c', `cat | ${path.join(copy, 'bin', 'group-sum')} --log-level debug | cat`], { input, env: testEnv(), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, input);
  assert.deepEqual(pipeBytes(r.stderr), { stdin: null, stdout: null });
  assert.equal(summaryOf(r.stderr).status, 'ok');
});

test('an addon that is not a loadable file (empty, text, a FIFO) is left alone: the stage works the same', () => {
  const copy = scratch();
  for (const d of ['bin', 'dist']) fs.cpSync(path.join(ROOT, d), path.join(copy, d), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  const addons = ['pipesize', 'scan'].map((name) => path.join(copy, 'build', 'Release', `${name}.node`));
  fs.mkdirSync(path.dirname(addons[0]!), { recursive: true });
  const input = manyLines('group-sum');
  for (const make of [(f: string) => fs.writeFileSync(f, ''), (f: string) => fs.writeFileSync(f, 'not ELF\n'), (f: string) => spawnSync('mkfifo', [f])]) {
    for (const addon of addons) {
      fs.rmSync(addon, { force: true });
      make(addon);
    }
    // A FIFO there once blocked the stage in dlopen's open(2) for good.
    const r = spawnSync(path.join(copy, 'bin', 'group-sum'), ['--log-level', 'debug'], { input, env: testEnv(), encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, input);
    assert.deepEqual(pipeBytes(r.stderr), { stdin: null, stdout: null });
    assert.ok(!hasStackTrace(r.stderr));
  }
});

test('scratch(), as a test file calls it dozens of times: no MaxListenersExceededWarning, and every directory is removed at exit', () => {
  // The warning came five times in the suite's output, from test files (not stages)
  // that made more than 10 scratch directories: each added its own exit listener.
  const lib = path.join(ROOT, 'dist', 'test', 'lib', 'run.js');
  const script = `const { scratch } = await import(${JSON.stringify(lib)}); for (let i = 0; i < 25; i++) console.log(scratch('ms-many-'));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /MaxListenersExceededWarning/);
  const dirs = r.stdout.trim().split('\n');
  assert.equal(dirs.length, 25);
  assert.deepEqual(
    dirs.filter((d) => fs.existsSync(d)),
    [],
    'removed at exit',
  );
});

test('a stage whose run is left waiting on nothing (the event loop empties) fails loudly: exit 1, a message, one summary; not exit 0 in silence', () => {
  const script = new URL('./lib/stalled-stage.js', import.meta.url).pathname;
  const r = spawnSync(process.execPath, [script], { input: 'a\nb\n', env: testEnv({ STALLED_STAGE: '1' }), encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, failedOutput('stalled-stage'));
  assert.ok(r.stderr.startsWith('stalled-stage: internal error: the stage stopped with its work unfinished (nothing left to wait for)\n'), r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  assert.equal(s.lines_in, 2);
});

test('a stage stopped while its reader takes nothing warns that it could not mark its output as cut off', { timeout: 60_000 }, async (t) => {
  // The cut mark is written without blocking (an exit must not hang): after 2 s of a full
  // pipe it is given up (the output still ends without its last LF).
  // Unique ids, so every record goes out: far more than the pipe holds. The input is a file,
  // never short; the output a FIFO that nobody reads, full for good once filled. (Node's
  // 'pipe' is a socket: it takes a small write again as soon as its reader has taken
  // anything, though the stage still waits to be told it may write, and on a loaded machine
  // the mark went through.)
  const dir = scratch('ms-stalled-reader-');
  const input = path.join(dir, 'in.tsv');
  let text = '';
  for (let i = 0; i < 200_000; i++) text += `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\thttp://a.com/${i}\n`;
  fs.writeFileSync(input, text);
  const fifo = path.join(dir, 'out');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const [inFd, outFd] = [fs.openSync(input, 'r'), fs.openSync(fifo, 'w')];
  const child = spawn(path.join(BIN, 'group-sum'), [], { env: testEnv(), stdio: [inFd, outFd, 'pipe'] });
  for (const fd of [inFd, outFd]) fs.closeSync(fd);
  t.after(() => {
    child.kill('SIGKILL'); // a failed check must not leave it blocked for good
    fs.closeSync(reader);
  });
  const errors = child.stderr;
  assert.ok(errors);
  let stderr = '';
  errors.on('data', (d: Buffer) => (stderr += d));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  // Wait until the stage has slept (Linux's state S, not R: waiting for an event, not for a
  // core) with its bytes read and written the same (/proc/PID/io) for a second: with its input
  // a file, it waits on its full output.
  /** The stage's bytes read and written while it sleeps, else null. */
  const look = (): string | null => {
    const state = /^\d+ \(.*\) (\S)/.exec(fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8'))?.[1];
    const io = /^rchar: \d+\nwchar: \d+$/m.exec(fs.readFileSync(`/proc/${child.pid}/io`, 'utf8'))?.[0];
    return state === 'S' && io !== undefined ? io : null;
  };
  let still = 0;
  for (let last: string | null = null, i = 0; still < 10 && i < 500; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const now = look();
    still = now !== null && now === last ? still + 1 : 0;
    last = now;
  }
  assert.equal(still, 10, 'group-sum waits on its output');
  child.kill('SIGTERM');
  const status = await closed;
  assert.equal(status, 143, stderr);
  assert.match(stderr, /could not mark the output as cut off \(its reader took nothing for 2 s\)/);
  assert.equal(summaryOf(stderr).status, 'interrupted');
  assert.ok(Number(summaryOf(stderr).records_in) < 200_000, 'stopped before the end of its input');
});

test('a stage killed with SIGKILL mid-output leaves a cut last line, which the next stage refuses', { timeout: 60_000 }, async () => {
  // No process is left to write a cut mark: each hand-off holds back its last byte (an LF),
  // written only at a clean end. Before, the output ended in whole lines, and the next
  // stage took them for the whole input.
  const child = spawn(path.join(BIN, 'group-sum'), [], { env: testEnv(), stdio: ['pipe', 'pipe', 'ignore'] });
  child.stdin.on('error', () => undefined);
  const got: Buffer[] = [];
  let bytes = 0;
  child.stdout.on('data', (d: Buffer) => {
    got.push(d);
    bytes += d.length;
    if (bytes > 256 << 10) child.kill('SIGKILL');
  });
  const closed = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, sig) => resolve(sig)));
  let text = '';
  for (let i = 0; i < 200_000; i++) text += `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\ta.com\thttp://a.com/${i}\n`;
  child.stdin.write(text);
  assert.equal(await closed, 'SIGKILL');
  const out = Buffer.concat(got);
  assert.ok(out.length > 256 << 10 && out.length < text.length, `${out.length} bytes out`);
  assert.notEqual(out[out.length - 1], 10, 'the output ends inside a line');
  const next = runBin('group-sum', [], out, scratch('ms-cut-'));
  assert.equal(next.status, 1, next.stderr);
  assert.match(next.stderr, /group-sum: -:\d+: last line has no newline \(input cut off\?\)/);
});
