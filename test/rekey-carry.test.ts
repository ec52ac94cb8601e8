// The carry is re-keyed with current_log (SPEC "Runs": the carry is memory too): a state
// with URLs waiting under a cap, written by another URL parser, goes on under this one
// without a page going out twice.
//
// fixtures/rekey/node22-capped-state is the state this release left on Node.js 22.23
// (ada 2.9.2) after the messy hour `gen-reflog --messy --lines 4000 --seed 7 --hour 1`
// (run 2011072805), run with --max-per-domain 2 --max-reject-ratio 1: current_log, the
// carry (97 URLs waiting), settings.json (keyed_by: that parser) and memory.json.
// fixtures/rekey/2011072806.reflog and 2011072807.reflog are hours 2 and 3 of the same.
// The assertions hold on any runtime: what they compare is computed with the runtime's
// own parser, against the same hours run here from the first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { domainToUnicode } from 'node:url';
import { ROOT, partnerDb } from './lib/run.js';
import { runner, sub } from './lib/runner.js';
import { assertSameState, runsJsonl, snapshot, withDb } from './lib/runner-state.js';
import { FAST_SUITE } from './lib/pg.js';
import { canonicalize, idText, loadUrlHash } from '../src/core/url.js';
import { keyedByHere, sameKeying, storedKeying } from '../src/runner/state/keying.js';
import { RUNNER_URL_OPTIONS } from '../src/runner/state/keying.js';
import { rekeyLog } from '../src/runner/run/rekey-log.js';
import { generateReflog } from '../scripts/gen-reflog.js';

const FIX = path.join(ROOT, 'fixtures', 'rekey');
const STATE = path.join(FIX, 'node22-capped-state');
const [R1, R2, R3] = ['2011072805', '2011072806', '2011072807'];
const ARGS = ['--max-per-domain', '2', '--max-reject-ratio', '1'];
const hash = await loadUrlHash();

/** This runtime's canonical URL of `raw`, or null when it refuses it. */
function canon(raw: string): string | null {
  const c = canonicalize(raw, RUNNER_URL_OPTIONS);
  return 'reason' in c ? null : c.url;
}

/** The page a published URL is: its canonical form here, its host in Unicode with ß as ss (a parser that loses ẞ spells it so). */
function page(url: string): string {
  const c = canon(url) ?? url;
  const host = new URL(c).hostname;
  return c.replace(host, domainToUnicode(host).replaceAll('ß', 'ss'));
}

/** A scratch runner directory with `state` (a fixture state, or none), the hours `runs` in its inbox, and a database with one Yacobot. */
function job(state: string | null, ...runs: string[]): string {
  const dir = sub('rekey-carry-');
  const inbox = path.join(dir, 'var/inbox');
  fs.mkdirSync(inbox, { recursive: true });
  if (state !== null) fs.cpSync(state, path.join(dir, 'var/state'), { recursive: true });
  else fs.mkdirSync(path.join(dir, 'var/state'));
  for (const run of runs) {
    const to = path.join(inbox, `${run}.reflog`);
    if (run !== R1) fs.copyFileSync(path.join(FIX, `${run}.reflog`), to);
    else {
      const fd = fs.openSync(to, 'w');
      generateReflog(fd, { lines: 4000, hour: 1, seed: 7, messy: true });
      fs.closeSync(fd);
    }
  }
  partnerDb(dir, path.join(dir, 'var/state/partner.db'), 'init');
  partnerDb(dir, path.join(dir, 'var/state/partner.db'), 'add', 'a');
  // An owner, as in the database the state's runs used (an empty owner table beside them is refused as a wrong --db).
  partnerDb(dir, path.join(dir, 'var/state/partner.db'), 'assign', 'earlier-runs.example', 'a');
  withDb(path.join(dir, 'var/state/partner.db'), (db) => db.prepare("UPDATE partner_domain SET added_at = '20110101000000'").run()); // the same in every job
  return dir;
}

/** The URLs run `run` published (its one Yacobot's queue file). */
function published(dir: string, run: string): string[] {
  const f = path.join(dir, 'var/queue/1', `${run}.tsv`);
  return fs.existsSync(f)
    ? fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[5]!)
    : [];
}

/** How many of `urls` each page has. */
function perPage(urls: string[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const u of urls) m.set(page(u), [...(m.get(page(u)) ?? []), u]);
  return m;
}

test("a capped state written on Node.js 22: the first hour here re-keys the carry with current_log; every URL goes out in this parser's spelling, and no page in two spellings in an hour where the job run here from the first sends it once", async () => {
  const upgraded = !sameKeying(storedKeying(STATE), keyedByHere());
  const mixed = job(STATE, R2, R3);
  const single = job(null, R1, R2, R3);
  const m = await runner(mixed, ARGS);
  assert.equal(m.status, 0, m.stderr);
  assert.equal((await runner(single, ARGS)).status, 0);
  const waiting = fs.readFileSync(path.join(STATE, 'carry'), 'utf8').split('\n').filter(Boolean).length;
  const [first] = runsJsonl(mixed);
  assert.equal(first!.carried_in, waiting);
  if (upgraded) {
    const carry = (first!.rekeyed as { carry?: Record<string, number> }).carry;
    assert.equal(carry?.urls, waiting, 'the carry re-keyed, counted in rekeyed');
    assert.ok(carry!.changed! > 0, 'some waiting URLs are spelled anew by this parser');
    assert.match(m.stderr, new RegExp(`re-keyed its \\d+ URLs before the hour \\(.*\\), and the carry's ${waiting} \\(`));
  }
  for (const run of [R2, R3]) {
    const urls = published(mixed, run);
    assert.ok(urls.length > 300, `${run}: ${urls.length} URLs published`);
    assert.deepEqual(
      urls.filter((u) => canon(u) !== u),
      [],
      `${run}: every URL published in this parser's spelling`,
    );
    const here = perPage(published(single, run));
    const twice = [...perPage(urls)].filter(([p, us]) => new Set(us).size > 1 && us.length > (here.get(p)?.length ?? 0));
    assert.deepEqual(twice, [], `${run}: no page in two spellings beyond the single-parser job`);
  }
  // What waits now is keyed as this parser keys.
  const carried = fs
    .readFileSync(path.join(mixed, 'var/state/carry'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'));
  assert.ok(carried.length > 50);
  for (const f of carried) assert.deepEqual([f[0], canon(f[5]!)], [idText(hash(f[5]!)), f[5]], f.join(' '));
});

test('the re-key of the carry is crash-safe: killed after it (before the chain), before the commit step carry, or before memory.json, the rerun ends where an uninterrupted run does, and the next run finds the carry checked', {
  skip: FAST_SUITE && 'a kill sweep (npm run test:all)',
}, async () => {
  const reference = job(STATE, R2);
  assert.equal((await runner(reference, ARGS)).status, 0);
  const want = snapshot(reference);
  for (const step of ['rekey', 'carry', 'memory']) {
    const dir = job(STATE, R2);
    const killed = await runner(dir, ARGS, { env: { REFLOG_RUNNER_FAILPOINT: `${R2}:${step}` } });
    assert.equal(killed.signal, 'SIGKILL', `killed before ${step}: ${killed.stderr}`);
    const rerun = await runner(dir, ARGS);
    assert.equal(rerun.status, 0, rerun.stderr);
    assertSameState(snapshot(dir), want, `killed before ${step}`);
    fs.copyFileSync(path.join(FIX, `${R3}.reflog`), path.join(dir, 'var/inbox', `${R3}.reflog`));
    const next = await runner(dir, ARGS);
    assert.equal(next.status, 0, `killed before ${step}, then the next hour: ${next.stderr}`);
  }
});

/** `lines` as a file in a fresh scratch directory; returns its path. */
function fileOf(name: string, lines: string[]): string {
  const f = path.join(sub('rekey-carry-unit-'), name);
  fs.writeFileSync(f, lines.map((l) => l + '\n').join(''));
  return f;
}

/** An entry of `url` as a parser that leaves it as written would have keyed it, with `more` fields after the six. */
const entry = (url: string, ts: string, tag: string, hits: string, ...more: string[]) => [idText(hash(url)), ts, tag, hits, 'h.com', url, ...more].join('\t');

test('rekeyLog of a carry: records that now share an id merge as group-sum merges, keeping the oldest decision; an alias moves a waiting URL where current_log copies it', async () => {
  const encodes = canon('http://h.com/a^b') === 'http://h.com/a%5Eb';
  const carry = fileOf(
    'carry',
    [
      entry('http://h.com/a^b', '20110728050000', 'v1', '2', '20110728060000'),
      entry('http://h.com/a%5Eb', '20110728053000', '', '3', '20110728050000'),
      entry('http://ss.com/x', '20110728050000', '', '1', '20110728060000'),
    ].sort(),
  );
  const out = carry + '.out';
  const c = await rekeyLog(carry, out, new Map(), hash, 1 << 20, path.dirname(carry), 'carry');
  assert.deepEqual([c.urls, c.merged, c.entries_out], [3, encodes ? 1 : 0, encodes ? 2 : 3]);
  const lines = fs.readFileSync(out, 'utf8').split('\n').filter(Boolean);
  if (encodes) assert.ok(lines.includes(entry('http://h.com/a%5Eb', '20110728053000', 'v1', '5', '20110728050000')), lines.join('\n'));
  // The hour spells http://ss.com/x otherwise (an old parser's ss for ẞ): the carry's entry goes there, current_log's is copied.
  const to = { id: idText(hash('http://xn--zca.com/x')), domain: 'xn--zca.com', url: 'http://xn--zca.com/x' };
  const aliases = new Map([[idText(hash('http://ss.com/x')), [to]]]);
  const moved = await rekeyLog(carry, out, aliases, hash, 1 << 20, path.dirname(carry), 'carry');
  const urls = fs
    .readFileSync(out, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t')[5]);
  assert.equal(moved.aliased, 1);
  assert.ok(urls.includes(to.url) && !urls.includes('http://ss.com/x'), urls.join(' '));
  const current = fileOf('current_log', [entry('http://ss.com/x', '20110728050000', '', '1')]);
  await rekeyLog(current, out, aliases, hash, 1 << 20, path.dirname(current));
  assert.deepEqual(
    fs
      .readFileSync(out, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t')[5])
      .sort(),
    ['http://ss.com/x', to.url],
  );
  // A line that is no carry record fails it, naming the line.
  const bad = fileOf('carry', [entry('http://h.com/', '20110728050000', '', '1')]);
  await assert.rejects(
    rekeyLog(bad, out, new Map(), hash, 1 << 20, path.dirname(bad), 'carry'),
    (err: Error & { place?: { line?: number } }) => err.place?.line === 1,
  );
});
