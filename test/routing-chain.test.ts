// The whole chain, hour after hour, as cron runs it: analyze-dump | group-sum |
// join-current | filter-url | upload-domains | logsaver. Every filtered URL lands in
// exactly one queue file of its hour; every domain in exactly one Yacobot, its owner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { partnerDb, runBin, scratch, testEnv } from './lib/run.js';
import { backends } from './lib/backends.js';
import { FAST_SUITE } from './lib/pg.js';
import { shellQuote } from '../src/core/errors.js';
import { prng } from '../scripts/prng.js';

// Hosts and the registrable domain the URL records must carry for them.
const HOSTS: [string, string][] = [];
for (let i = 0; i < 30; i++) {
  const tld = ['com', 'co.uk', 'org', 'ru'][i % 4]!;
  HOSTS.push([`site${i}.${tld}`, `site${i}.${tld}`]);
  HOSTS.push([`WWW.Site${i}.${tld}`, `site${i}.${tld}`]);
}
HOSTS.push(['user.github.io', 'user.github.io'], ['10.1.2.3', '10.1.2.3']);
// Domains that first appear in the third hour, after a third Yacobot joined.
const LATE: [string, string][] = [];
for (let i = 0; i < 10; i++) LATE.push([`news.late${i}.net`, `late${i}.net`]);

const HOURS = ['2011072806', '2011072807', '2011072808', '2011072809'];

function reflog(hour: string, rnd: () => number, late: boolean): string {
  const hosts = late ? [...HOSTS, ...LATE] : HOSTS;
  let s = 'unknown-field-header\n';
  for (let i = 0; i < 400; i++) {
    const [host] = hosts[Math.floor(rnd() * hosts.length)]!;
    const page = Math.floor(rnd() * 6);
    const mm = String(Math.floor(rnd() * 60)).padStart(2, '0');
    const ss = String(Math.floor(rnd() * 60)).padStart(2, '0');
    const tag = rnd() < 0.2 ? `\tv${Math.floor(rnd() * 3)}` : '';
    s += `7\t1\t${hour}${mm}${ss}\tp${i}\thttp://${host}/page${page}?q=1#frag\t${1 + Math.floor(rnd() * 5)}${tag}\n`;
  }
  return s;
}

const nextHour = (h: string) => {
  const d = new Date(Date.UTC(+h.slice(0, 4), +h.slice(4, 6) - 1, +h.slice(6, 8), +h.slice(8, 10) + 1));
  return d.toISOString().replace(/[-T:]/g, '').slice(0, 14);
};

const BACKENDS = backends({ inFastSuite: true }); // the fast suite's PostgreSQL round

// Through the whole chain, hour after hour, on each backend: with --map (domains-from-db's
// domain_map, as the by-hand chain) and without (the database asked, as the cron runner).
for (const be of BACKENDS) {
  for (const withMap of [true, false]) {
    // The fast suite runs one round per backend: on PostgreSQL the one with --map
    // (domains-from-db and upload-domains on it), on SQLite the one without (the cron
    // runner's chain); test:all runs all four.
    const second = be.name === 'sqlite' ? withMap : !withMap;
    const skip = FAST_SUITE && second && `a second ${be.name} round (npm run test:all)`;
    test(`several hours through the chain ${withMap ? 'with' : 'without'} --map: every URL in one queue, every domain in one Yacobot [${be.name}]`, {
      skip,
    }, () => {
      routeHours(be, withMap);
    });
  }
}

/** Four hours through the chain on backend `be`: each URL in one queue file of its hour, each domain in its owner's queue. */
function routeHours(be: ReturnType<typeof backends>[number], withMap: boolean): void {
  const work = scratch('ms-route-chain-');
  const rnd = prng(20110728);
  fs.mkdirSync(path.join(work, 'state'));
  const db = be.name === 'sqlite' ? 'state/p.db' : be.newDb(work);
  const pdb = (...args: string[]) => partnerDb(work, db, ...args);
  pdb('init');
  pdb('add', 'yb1');
  pdb('add', 'yb2', '--weight', '2');
  pdb('assign', 'site0.com', 'yb1');

  const domainDirs = new Map<string, Set<string>>();
  let sent = 0;
  for (const [n, hour] of HOURS.entries()) {
    if (n === 2) pdb('add', 'yb3'); // a Yacobot joins mid-way: only new domains go to it
    fs.writeFileSync(path.join(work, `${hour}.reflog`), reflog(hour, rnd, n >= 2));
    const now = nextHour(hour);
    const qdb = shellQuote(db);
    const script = `set -euo pipefail
${withMap ? `domains-from-db --db ${qdb} > state/domain_map` : ''}
analyze-dump ${hour}.reflog | group-sum | join-current --current state/current_log \\
  | filter-url --current-out state/current_log.next --now ${now} | tee filtered.${hour} \\
  | upload-domains --db ${qdb} ${withMap ? '--map state/domain_map' : ''} --now ${now} \\
  | logsaver --queue-dir queues --name ${hour}
mv state/current_log.next state/current_log`;
    const r = spawnSync('bash', ['-c', script], { cwd: work, env: testEnv(), encoding: 'utf8' });
    assert.equal(r.status, 0, `hour ${hour}: ${r.stderr}`);

    const filtered = fs
      .readFileSync(path.join(work, `filtered.${hour}`), 'utf8')
      .split('\n')
      .filter((l) => l);
    assert.ok(filtered.length > 0, `hour ${hour} sent something`);
    sent += filtered.length;
    const placed = new Map<string, string>();
    for (const y of fs.readdirSync(path.join(work, 'queues'))) {
      const f = path.join(work, 'queues', y, `${hour}.tsv`);
      if (!fs.existsSync(f)) continue;
      const lines = fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .filter((l) => l);
      // In input order: the file is a subsequence of filtered_log.
      let at = -1;
      for (const l of lines) {
        assert.ok(!placed.has(l), `${l} is in two queue files`);
        placed.set(l, y);
        const i = filtered.indexOf(l, at + 1);
        assert.ok(i > at, `${y}/${hour}.tsv keeps input order`);
        at = i;
        const domain = l.split('\t')[4]!;
        const s = domainDirs.get(domain) ?? new Set<string>();
        s.add(y);
        domainDirs.set(domain, s);
      }
    }
    assert.deepEqual([...placed.keys()].sort(), [...filtered].sort(), `hour ${hour}: every filtered URL in exactly one queue file`);
    assert.deepEqual(
      fs.readdirSync(path.join(work, 'queues')).filter((d) => !/^[1-9]\d*$/.test(d)),
      [],
    );
  }

  const owner = new Map(be.rows(work, db, 'SELECT domain, yacobot_id FROM partner_domain').map(([d, y]) => [d!, y!]));
  const expectedDomains = new Set([...HOSTS, ...LATE].map(([, d]) => d));
  for (const [domain, dirs] of domainDirs) {
    assert.ok(expectedDomains.has(domain), `domain ${domain} is a registrable domain of the fixture`);
    assert.equal(dirs.size, 1, `${domain} in one Yacobot only: ${[...dirs]}`);
    assert.equal([...dirs][0], owner.get(domain), `${domain} is in its owner's queue`);
  }
  assert.equal(domainDirs.get('site0.com')?.has('1'), true, 'a hand-assigned domain stays with its Yacobot');
  assert.equal(domainDirs.size, expectedDomains.size, 'every domain of the fixture was routed');
  const per = new Map<string, number>();
  for (const y of owner.values()) per.set(y, (per.get(y) ?? 0) + 1);
  // The late Yacobot starts empty, so least-loaded gives it the late domains first; old ones stay put.
  assert.ok((per.get('3') ?? 0) >= 5, `the late Yacobot took new domains: ${JSON.stringify([...per])}`);
  for (const [, d] of HOSTS) assert.notEqual(owner.get(d), '3', `${d} was assigned before Yacobot 3 existed`);
  assert.ok(sent > 400, `URLs were sent across hours (${sent})`);
  // The last domain_map written by upload-domains matches the database.
  if (withMap) assert.equal(fs.readFileSync(path.join(work, 'state/domain_map'), 'utf8'), runBin('domains-from-db', ['--db', db], '', work).stdout);
}

test('records of hundreds of KiB (a long URL and updatetag) go through every stage whole, hour after hour', () => {
  const work = scratch('ms-route-big-');
  const pdb = (...args: string[]) => partnerDb(work, 'state/p.db', ...args);
  fs.mkdirSync(path.join(work, 'state'));
  pdb('init');
  pdb('add', 'yb1');
  // Larger than any stage's first write buffer (64 KiB and 256 KiB) and than the URL
  // memory's first arena; the tag makes the joined record larger still.
  const url = `http://big.example.com/${'p'.repeat(300_000)}`;
  const tagOf = (h: number) => `${h}`.repeat(60_000);
  const queued: string[][] = [];
  for (const [n, hour] of ['2011072806', '2011072807'].entries()) {
    const tag = tagOf(n + 1);
    let reflog = '';
    for (let i = 0; i < 3; i++) reflog += `7\t1\t${hour}000${i}\tp${i}\t${url}\t2\t${i === 1 ? tag : ''}\n`;
    reflog += `7\t1\t${hour}0100\tq\thttp://small.example.org/\t1\n`;
    fs.writeFileSync(path.join(work, `${hour}.reflog`), reflog);
    const script = `set -euo pipefail
domains-from-db --db state/p.db > state/domain_map
analyze-dump --max-url-bytes 1048576 ${hour}.reflog | group-sum | join-current --current state/current_log \\
  | filter-url --current-out state/current_log.next --now ${nextHour(hour)} \\
  | upload-domains --db state/p.db --map state/domain_map --now ${nextHour(hour)} \\
  | logsaver --queue-dir queues --name ${hour}
mv state/current_log.next state/current_log`;
    const r = spawnSync('bash', ['-c', script], { cwd: work, env: testEnv(), encoding: 'utf8', maxBuffer: 1 << 26 });
    assert.equal(r.status, 0, `hour ${hour}: ${r.stderr.slice(0, 2000)}`);
    const lines = fs.readFileSync(path.join(work, 'queues/1', `${hour}.tsv`), 'utf8').split('\n');
    assert.equal(lines.pop(), '', 'the queue file ends in LF');
    queued.push(...lines.map((l) => l.split('\t')));
    const current = fs.readFileSync(path.join(work, 'state/current_log'), 'utf8').split('\n');
    assert.equal(current.pop(), '');
    const big = current.map((l) => l.split('\t')).find((f) => f[5] === url);
    assert.deepEqual(big?.slice(1, 5), [`${hour}0002`, tag, String(6 * (n + 1)), 'example.com'], `hour ${hour}: current_log keeps the big record whole`);
    assert.equal(current.length, 2);
  }
  // Both hours send both URLs (an hour apart, so due again).
  const byTime = (a: unknown[], b: unknown[]) => (String(a[1]) < String(b[1]) ? -1 : 1);
  assert.deepEqual(queued.map((f) => [f.length, f[1], f[2], f[3], f[4], f[5] === url ? 'BIG' : f[5]]).sort(byTime), [
    [6, '20110728060002', tagOf(1), '6', 'example.com', 'BIG'],
    [6, '20110728060100', '', '1', 'example.org', 'http://small.example.org/'],
    [6, '20110728070002', tagOf(2), '6', 'example.com', 'BIG'],
    [6, '20110728070100', '', '1', 'example.org', 'http://small.example.org/'],
  ]);
});
