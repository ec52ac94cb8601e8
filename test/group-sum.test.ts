// group-sum: its core and its binary against the naive reading of the contract's rule, on
// random sorted input (fast-check, fixed seed). Golden cases: fixtures/group-sum/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { BIN, runBin, scratch, summaryOf, testEnv } from './lib/run.js';
import { FAST_SUITE } from './lib/pg.js';
import { TextSink } from './lib/bytes.js';
import { SEED, lineOf, sortedRecs, text, type Rec } from './lib/model.js';
import { Grouper } from '../src/stages/group-sum.js';

/** The naive reading of the contract's group-sum rule. */
function naiveGroup(rs: Rec[]): string {
  const out: string[] = [];
  const ids = [...new Set(rs.map((r) => r.id))];
  for (const id of ids) {
    const g = rs.filter((r) => r.id === id);
    const ts = g.map((r) => r.ts).reduce((a, b) => (b > a ? b : a));
    const tags = g.map((r) => r.tag).filter((t) => t !== '');
    const hits = g.reduce((a, r) => a + BigInt(r.hits), 0n);
    out.push([id, ts, tags.length ? tags[tags.length - 1]! : '', hits.toString(), g[0]!.domain, g[0]!.url].join('\t') + '\n');
  }
  return out.join('');
}

test('group-sum core (Grouper) equals the naive rule on random sorted input', () => {
  fc.assert(
    fc.property(sortedRecs(60), (rs) => {
      // The stage normalizes hits on the way in through analyze-dump; Grouper sums what it gets.
      const g = new Grouper();
      const out = new TextSink();
      for (const r of rs) {
        const line = lineOf(r);
        g.push(line, out);
        // A line's bytes are valid until detach() (its chunk's end in the stage): the
        // grouper must have copied what it keeps by then.
        g.detach();
        line.buf.fill(0x3f);
      }
      g.finish(out);
      const got = out.take();
      const norm = (s: string) => s.replace(/^((?:[^\t]*\t){3})0*(\d)/gm, '$1$2');
      assert.equal(norm(got), norm(naiveGroup(rs)));
    }),
    { seed: SEED, numRuns: 500 },
  );
});

test('group-sum binary equals the naive rule on random sorted input', () => {
  fc.assert(
    fc.property(sortedRecs(80), (rs) => {
      const r = runBin('group-sum', [], text(rs));
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, naiveGroup(rs));
      const s = summaryOf(r.stderr);
      assert.equal(s.records_in, rs.length);
      assert.equal((s.records_out as number) + (s.merged as number), rs.length);
    }),
    // A representative few in the fast suite, all 12 in npm run test:all.
    { seed: SEED, numRuns: FAST_SUITE ? 4 : 12 },
  );
});

test('group-sum through a pipe: a group whose first line came in an earlier read is written as it was read', () => {
  // The input buffer is read into again for each chunk: a group open at a chunk's end
  // must have been copied out of it (Grouper.detach).
  const dir = scratch();
  const n = 40_000;
  const id = (i: number) => i.toString(16).padStart(16, '0');
  const rec = (i: number) => `${id(i)}\t20110101000000\t\t1\ta.com\thttp://a.com/${i}/${'x'.repeat(i % 50)}\n`;
  const lines: string[] = [];
  for (let i = 0; i < n; i++) lines.push(rec(i), rec(i), rec(i));
  fs.writeFileSync(path.join(dir, 'in'), lines.join(''));
  const r = spawnSync('bash', ['-o', 'pipefail', '-c', `cat in | ${path.join(BIN, 'group-sum')}`], {
    cwd: dir,
    env: testEnv(),
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, r.stderr);
  const want = Array.from({ length: n }, (_, i) => rec(i).replace('\t1\ta.com', '\t3\ta.com')).join('');
  assert.ok(r.stdout === want, 'the output differs from the input folded');
});

test('group-sum: a closed stdout leaves merged at the records folded so far, not the open group', () => {
  const dir = scratch();
  const lines = Array.from({ length: 200_000 }, (_, i) => `${i.toString(16).padStart(16, '0')}\t20110101000000\t\t1\ta.com\thttp://a.com/${i}\n`).join('');
  fs.writeFileSync(path.join(dir, 'in'), lines);
  const r = spawnSync('bash', ['-c', `${path.join(BIN, 'group-sum')} < in | head -c 100 > /dev/null`], { cwd: dir, env: testEnv(), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const s = summaryOf(r.stderr);
  assert.ok((s.records_in as number) < 200_000, 'stopped early');
  assert.equal(s.merged, 0, 'every id is distinct');
});

test('group-sum: a failed run counts so that records_in = records_out + merged + the open group (the failing line is in none)', () => {
  const rec = (id: string, hits: string) => `${id}\t20110727200841\t\t${hits}\ta.com\thttp://a.com/${id}\n`;
  const big = '9'.repeat(30);
  // Line 3's sum has 31 digits: an error, after a1 was written and a2 opened.
  const r = runBin('group-sum', [], rec('00000000000000a1', '1') + rec('00000000000000a2', big) + rec('00000000000000a2', big));
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^group-sum: -:3: hits sum of 31 digits/m);
  const s = summaryOf(r.stderr);
  assert.equal(s.status, 'failed');
  assert.deepEqual([s.records_in, s.records_out, s.merged], [2, 1, 0]);
  assert.equal(s.records_in, (s.records_out as number) + (s.merged as number) + 1);
});
