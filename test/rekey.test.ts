// URL identity follows the parser (SPEC "Runs"): a state keyed by another URL parser is
// re-keyed by the first run under this one, which holds back what the old release held
// back, says so, and commits the re-keyed log crash-safely.
//
// fixtures/rekey/node20-state is the state release 9182091 left on Node.js 20.20.2 (ada
// 2.9.2) after the messy hour `gen-reflog --messy --lines 4000 --seed 7 --hour 1`, run
// with --keep 10h --resend-after 10h --max-reject-ratio 1; 2011072806.reflog and
// 2011072807.reflog are hours 2 and 3 of the same. held-by-node20.RUN.txt and
// sent-by-node20.RUN.txt list the distinct URLs of each hour (as written in the reflog)
// that the same release on Node.js 20 held back and sent in that hour, run on after
// that state. The assertions hold on any runtime: what they compare is computed with
// the runtime's own parser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, partnerDb } from './lib/run.js';
import { FAST_SUITE } from './lib/pg.js';
import { runner, sub } from './lib/runner.js';
import { assertSameState, runsJsonl, snapshot, withDb } from './lib/runner-state.js';
import { DataError } from '../src/core/errors.js';
import { canonicalize, loadUrlHash } from '../src/core/url.js';
import { UNKNOWN_KEYING, keyedByHere, keyingToStore, lostCharacters, sameKeying, storedKeying, type KeyedBy } from '../src/runner/state/keying.js';
import { RUNNER_URL_OPTIONS } from '../src/runner/state/keying.js';
import { rekeyLog } from '../src/runner/run/rekey-log.js';

const FIX = path.join(ROOT, 'fixtures', 'rekey');
const RUN = '2011072806';
const RUN2 = '2011072807';
const ARGS = ['--keep', '10h', '--resend-after', '10h', '--max-reject-ratio', '1'];

/** This runtime's canonical URL of `raw`, or null when it refuses it. */
function canon(raw: string): string | null {
  const c = canonicalize(raw, RUNNER_URL_OPTIONS);
  return 'reason' in c ? null : c.url;
}

/** The lines of a fixture list. */
const listOf = (name: string) => fs.readFileSync(path.join(FIX, name), 'utf8').split('\n').filter(Boolean);

/** A scratch runner directory holding the Node 20 state, the hours `runs` in its inbox, and a database with one Yacobot. */
function node20State(...runs: string[]): string {
  const dir = sub('rekey-');
  const state = path.join(dir, 'var/state');
  fs.mkdirSync(path.join(dir, 'var/inbox'), { recursive: true });
  fs.cpSync(path.join(FIX, 'node20-state'), state, { recursive: true });
  for (const run of runs) fs.copyFileSync(path.join(FIX, `${run}.reflog`), path.join(dir, 'var/inbox', `${run}.reflog`));
  partnerDb(dir, path.join(state, 'partner.db'), 'init');
  partnerDb(dir, path.join(state, 'partner.db'), 'add', 'a');
  // An owner, as in the database the state's runs used (an empty owner table beside them is refused as a wrong --db).
  partnerDb(dir, path.join(state, 'partner.db'), 'assign', 'earlier-runs.example', 'a');
  withDb(path.join(state, 'partner.db'), (db) => db.prepare("UPDATE partner_domain SET added_at = '20110101000000'").run()); // the same in every job
  return dir;
}

/** The canonical URLs run `run` published. */
function sentUrls(dir: string, run: string): Set<string> {
  const out = new Set<string>();
  const queue = path.join(dir, 'var/queue');
  for (const id of fs.existsSync(queue) ? fs.readdirSync(queue) : []) {
    const f = path.join(queue, id, `${run}.tsv`);
    if (!fs.existsSync(f)) continue;
    for (const l of fs.readFileSync(f, 'utf8').split('\n').filter(Boolean)) out.add(l.split('\t')[5]!);
  }
  return out;
}

/** Writes `lines` as a file in a fresh scratch directory; returns its path. */
function fileOf(lines: string[]): string {
  const f = path.join(sub('rekey-unit-'), 'current_log');
  fs.writeFileSync(f, lines.map((l) => l + '\n').join(''));
  return f;
}

const hash = await loadUrlHash();

/** A current_log entry of `url` as a parser that leaves it as written would have keyed it. */
function entry(url: string, ts: string, tag: string, hits: string): string {
  return [hash(url).toString(16).padStart(16, '0'), ts, tag, hits, 'h.com', url].join('\t');
}

test('the record: this runtime keys as itself, a state without a record as the release before (Node.js 20)', () => {
  const here = keyedByHere();
  assert.equal(here.ada, process.versions.ada);
  assert.ok(sameKeying(here, keyedByHere()));
  assert.ok(!sameKeying(here, UNKNOWN_KEYING), 'an unrecorded parser is never taken for this one');
  assert.equal(storedKeying(path.join(FIX, 'node20-state')), UNKNOWN_KEYING);
  // Node 20's parser spells U+1E9E "ss"; whether this one keeps it decides the aliases.
  const keeps = new URL('http://x\u1e9ex.de/').hostname !== 'xssx.de';
  assert.deepEqual([...lostCharacters(UNKNOWN_KEYING, here)], keeps ? [['\u1e9e', 'ss']] : []);
});

test('rekeyLog: URLs re-canonicalized and re-hashed, entries that now share an id merged as group-sum merges, refused ones dropped', async () => {
  // As Node 20 wrote them: '^' as it is. A parser that percent-encodes it makes one URL of the two.
  const input = fileOf(
    [
      entry('http://h.com/a^b', '20110728050000', 'v1', '2'),
      entry('http://h.com/a%5Eb', '20110728053000', '', '3'),
      entry('no URL at all', '20110728050000', '', '1'),
    ].sort(),
  );
  const out = path.join(path.dirname(input), 'out');
  const c = await rekeyLog(input, out, new Map(), hash, 1 << 20, path.dirname(input));
  const encodes = canon('http://h.com/a^b') === 'http://h.com/a%5Eb';
  assert.deepEqual(
    { urls: c.urls, changed: c.changed, merged: c.merged, dropped: c.dropped, out: c.entries_out },
    { urls: 3, changed: encodes ? 1 : 0, merged: encodes ? 1 : 0, dropped: 1, out: encodes ? 1 : 2 },
  );
  const lines = fs.readFileSync(out, 'utf8').split('\n').filter(Boolean);
  if (encodes)
    assert.deepEqual(lines, [
      [hash('http://h.com/a%5Eb').toString(16).padStart(16, '0'), '20110728053000', 'v1', '5', 'h.com', 'http://h.com/a%5Eb'].join('\t'),
    ]);
  else
    assert.deepEqual(
      lines,
      fs
        .readFileSync(input, 'utf8')
        .split('\n')
        .filter((l) => l !== '' && !l.endsWith('no URL at all'))
        .sort(),
    );
});

test('rekeyLog: a log bigger than its memory is spilled and merged, and comes out as the one sorted in memory', async () => {
  const lines: string[] = [];
  for (let i = 0; i < 20_000; i++) lines.push(entry(`http://h.com/p${i}/${'x'.repeat(40)}^${i % 7}`, '20110728050000', '', '1'));
  const input = fileOf(lines.sort());
  const small = path.join(path.dirname(input), 'small');
  const big = path.join(path.dirname(input), 'big');
  await rekeyLog(input, small, new Map(), hash, 1 << 20, path.dirname(input));
  await rekeyLog(input, big, new Map(), hash, 256 << 20, path.dirname(input));
  assert.ok(fs.readFileSync(small).equals(fs.readFileSync(big)));
  const ids = fs
    .readFileSync(small, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(0, 16));
  assert.deepEqual(ids, [...ids].sort(), 'sorted by id');
  assert.equal(new Set(ids).size, ids.length, 'one entry per id');
  assert.deepEqual(fs.readdirSync(path.dirname(input)).sort(), ['big', 'current_log', 'small'], 'no spill left behind');
});

test('rekeyLog: a malformed entry fails it, naming its line', async () => {
  const input = fileOf([entry('http://h.com/', '20110728050000', '', '1'), 'not a record']);
  await assert.rejects(
    rekeyLog(input, input + '.out', new Map(), hash, 1 << 20, path.dirname(input)),
    (err) => err instanceof DataError && err.place?.line === 2,
  );
});

test('a state written on Node.js 20 by the release before: the next two hours hold back all the old release held back, and the first says it re-keyed', async () => {
  const dir = node20State(RUN, RUN2);
  const r = await runner(dir, ARGS);
  assert.equal(r.status, 0, r.stderr);
  const urls = listOf('node20-state/current_log').length;
  assert.match(r.stderr, new RegExp(`warning: ${RUN}: current_log was keyed by an unrecorded parser .* re-keyed its ${urls} URLs before the hour`));
  assert.equal(r.stderr.match(/: warning: .*re-keyed/g)?.length, 1, 'said once');
  for (const run of [RUN, RUN2]) {
    const sent = sentUrls(dir, run);
    const held = listOf(`held-by-node20.${run}.txt`)
      .map(canon)
      .filter((u): u is string => u !== null);
    assert.ok(held.length > 400, `${run}: ${held.length} URLs held back by the old release that this runtime takes`);
    assert.deepEqual(
      held.filter((u) => sent.has(u)),
      [],
      `${run}: every URL the old release held back is held back`,
    );
    const wasSent = listOf(`sent-by-node20.${run}.txt`)
      .map(canon)
      .filter((u): u is string => u !== null);
    assert.deepEqual(
      wasSent.filter((u) => !sent.has(u)),
      [],
      `${run}: and what it sent is sent`,
    );
  }
  const [first, second] = runsJsonl(dir);
  const rk = first!.rekeyed as Record<string, unknown>;
  assert.equal(rk.urls, urls);
  assert.equal(rk.aliases_only, undefined);
  assert.deepEqual(rk.from, { ada: 'unknown', icu: 'unknown', unicode: 'unknown', node: 'unknown' });
  assert.equal((rk.to as { ada: string }).ada, process.versions.ada);
  for (const k of ['changed', 'merged', 'dropped', 'aliased', 'domains_changed', 'entries_out']) assert.ok(Number.isSafeInteger(rk[k]), k);
  // The second hour is keyed alike: at most the copies for the characters the old parser lost.
  assert.ok(second!.rekeyed === undefined || (second!.rekeyed as { aliases_only?: boolean }).aliases_only === true);
  const { legacy, ...keyedBy } = (JSON.parse(fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8')) as { keyed_by: KeyedBy }).keyed_by;
  assert.deepEqual(keyedBy, keyedByHere(), 'the state now records this runtime');
  const lost = lostCharacters(UNKNOWN_KEYING, keyedByHere()).size > 0;
  assert.deepEqual(
    legacy,
    lost ? { idna: UNKNOWN_KEYING.idna, until: '20110728170000' } : undefined,
    "the old parser's probes, until the re-key run's now plus --keep",
  );
});

test('keyingToStore: a re-key from a parser that lost characters leaves a legacy for --keep; later runs carry it until then', () => {
  const state = sub('rekey-keying-');
  const here = keyedByHere();
  const lost = lostCharacters(UNKNOWN_KEYING, here).size > 0;
  const stored = keyingToStore(state, '20110728070000', 3_600_000, true);
  assert.deepEqual(stored.legacy, lost ? { idna: UNKNOWN_KEYING.idna, until: '20110728080000' } : undefined);
  fs.writeFileSync(path.join(state, 'settings.json'), JSON.stringify({ keep_ms: 3_600_000, resend_after_ms: 3_600_000, keyed_by: stored }) + '\n');
  assert.deepEqual(keyingToStore(state, '20110728075959', 3_600_000, false).legacy, stored.legacy);
  assert.equal(keyingToStore(state, '20110728080000', 3_600_000, false).legacy, undefined);
  // A state that was never re-keyed gets none, whatever its parser.
  assert.equal(keyingToStore(sub('rekey-fresh-'), '20110728070000', 3_600_000, false).legacy, undefined);
});

test('the re-key is crash-safe: killed after it (before the chain), or between the commit steps current_log and settings, the rerun ends where an uninterrupted run does', {
  skip: FAST_SUITE && 'a kill sweep (npm run test:all)',
}, async () => {
  const reference = node20State(RUN);
  assert.equal((await runner(reference, ARGS)).status, 0);
  const want = snapshot(reference);
  for (const step of ['rekey', 'settings']) {
    const dir = node20State(RUN);
    const killed = await runner(dir, ARGS, { env: { REFLOG_RUNNER_FAILPOINT: `${RUN}:${step}` } });
    assert.equal(killed.signal, 'SIGKILL', `killed before ${step}: ${killed.stderr}`);
    const settings = fs.readFileSync(path.join(dir, 'var/state/settings.json'), 'utf8');
    const current = fs.readFileSync(path.join(dir, 'var/state/current_log'));
    // Either the old state (log and record alike) or, past the commit, the roll forward's.
    if (!/keyed_by/.test(settings))
      assert.ok(current.equals(fs.readFileSync(path.join(FIX, 'node20-state/current_log'))) || step === 'settings', `before ${step}`);
    const rerun = await runner(dir, ARGS);
    assert.equal(rerun.status, 0, rerun.stderr);
    assertSameState(snapshot(dir), want, `killed before ${step}`);
  }
});
