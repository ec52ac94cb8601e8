// analyze-dump | group-sum | join-current | filter-url over random multi-batch
// scenarios, held to an independent model of the contract's rules written here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scratch, testEnv } from './lib/run.js';
import { loadUrlHasher } from '../src/core/url.js';
import { prng } from '../scripts/prng.js';

const fmt = (ms: number) => new Date(ms).toISOString().replace(/[-T:]/g, '').slice(0, 14);
const parse = (ts: string) => Date.UTC(+ts.slice(0, 4), +ts.slice(4, 6) - 1, +ts.slice(6, 8), +ts.slice(8, 10), +ts.slice(10, 12), +ts.slice(12, 14));

interface Entry {
  ts: string;
  tag: string;
  hits: bigint;
  domain: string;
  url: string;
}

// Canonical URLs and their registrable domains, chosen by hand.
const HOSTS: [string, string][] = [
  ['www.site1.com', 'site1.com'],
  ['site2.co.uk', 'site2.co.uk'],
  ['a.b.site3.org', 'site3.org'],
  ['shop.example.com.ru', 'example.com.ru'],
  ['user.github.io', 'user.github.io'],
  ['10.0.0.7', '10.0.0.7'],
];

interface Scenario {
  seed: number;
  batches: number;
  batchMinutes: number;
  resend: number;
  keep: number;
}

async function runScenario(s: Scenario): Promise<void> {
  const hash = await loadUrlHasher();
  const rnd = prng(s.seed);
  const pool: { url: string; domain: string }[] = [];
  for (const [host, domain] of HOSTS) for (let p = 0; p < 12; p++) pool.push({ url: `http://${host}/p${p}`, domain });
  const work = scratch('ms-chain-');
  const cur = path.join(work, 'current_log');
  let model = new Map<string, Entry>();
  const start = Date.UTC(2011, 6, 27, 6, 0, 0);

  for (let b = 0; b < s.batches; b++) {
    const bStart = start + b * s.batchMinutes * 60_000;
    const now = bStart + s.batchMinutes * 60_000;
    const n = 20 + Math.floor(rnd() * 80);
    const lines: string[] = ['unknown field'];
    const incoming = new Map<string, { ts: string; seq: number; tag: string; hits: bigint; domain: string; url: string }[]>();
    for (let i = 0; i < n; i++) {
      const u = pool[Math.floor(rnd() * rnd() * pool.length)]!; // skewed towards the first URLs
      // Mostly this batch; some late arrivals from up to 40 minutes before it.
      const ts = fmt(bStart - 40 * 60_000 * (rnd() < 0.2 ? 1 : 0) + Math.floor(rnd() * s.batchMinutes * 60) * 1000);
      const tag = rnd() < 0.6 ? '' : ['x', 'y', 'z'][Math.floor(rnd() * 3)]!;
      const hits = BigInt(Math.floor(rnd() * 5));
      const raw = rnd() < 0.2 ? `${u.url}#frag${i}` : u.url;
      lines.push(['b', '5', ts, '1', raw, String(hits), tag].join('\t'));
      const id = hash(u.url);
      const list = incoming.get(id) ?? [];
      list.push({ ts, seq: i, tag, hits, domain: u.domain, url: u.url });
      incoming.set(id, list);
    }
    fs.writeFileSync(path.join(work, 'hour.reflog'), lines.join('\n') + '\n');

    // The model: group (order by timestamp, stable), then the filter rules.
    const grouped = new Map<string, Entry>();
    for (const [id, list] of incoming) {
      list.sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : a.seq - b.seq));
      let tag = '';
      for (const e of list) if (e.tag !== '') tag = e.tag;
      grouped.set(id, {
        ts: list[list.length - 1]!.ts,
        tag,
        hits: list.reduce((a, e) => a + e.hits, 0n),
        domain: list[0]!.domain,
        url: list[0]!.url,
      });
    }
    const ids = [...new Set([...grouped.keys(), ...model.keys()])].sort();
    const sent: string[] = [];
    const next = new Map<string, Entry>();
    const line = (id: string, e: Entry) => [id, e.ts, e.tag, String(e.hits), e.domain, e.url].join('\t');
    for (const id of ids) {
      const i = grouped.get(id);
      const c = model.get(id);
      if (i && !c) {
        sent.push(line(id, i));
        next.set(id, i);
      } else if (c && !i) {
        if (now - parse(c.ts) < s.keep) next.set(id, c);
      } else if (c && i) {
        const changed = i.tag !== '' && i.tag !== c.tag && parse(i.ts) >= parse(c.ts);
        const due = parse(i.ts) - parse(c.ts) >= s.resend;
        if (due || changed) {
          sent.push(line(id, i));
          next.set(id, { ...i, ts: i.ts > c.ts ? i.ts : c.ts, tag: i.tag !== '' ? i.tag : c.tag, hits: c.hits + i.hits });
        } else {
          next.set(id, { ...c, hits: c.hits + i.hits });
        }
      }
    }
    model = next;

    const r = spawnSync(
      'bash',
      [
        '-c',
        `set -eo pipefail; analyze-dump hour.reflog | group-sum | join-current --current current_log ` +
          `| filter-url --now ${fmt(now)} --resend-after ${s.resend / 1000} --keep ${s.keep / 1000} --current-out current_log.next > filtered_log; ` +
          `mv current_log.next current_log`,
      ],
      { cwd: work, env: testEnv({ MS_LOG: '' }), encoding: 'utf8' },
    );
    assert.equal(r.status, 0, `batch ${b}: ${r.stderr}`);
    const want = sent.map((l) => l + '\n').join('');
    assert.equal(fs.readFileSync(path.join(work, 'filtered_log'), 'utf8'), want, `seed ${s.seed} batch ${b}: filtered_log`);
    const wantCur = ids
      .filter((id) => model.has(id))
      .map((id) => line(id, model.get(id)!) + '\n')
      .join('');
    assert.equal(fs.readFileSync(cur, 'utf8'), wantCur, `seed ${s.seed} batch ${b}: current_log`);
  }
}

const H = 3600_000;
for (const seed of [1, 2, 3]) {
  test(`random 60-minute batches, resend 1h, keep 1h (seed ${seed})`, () => runScenario({ seed, batches: 5, batchMinutes: 60, resend: H, keep: H }));
  test(`random 20-minute batches, resend 1h, keep 10h (seed ${seed})`, () =>
    runScenario({ seed: seed + 100, batches: 8, batchMinutes: 20, resend: H, keep: 10 * H }));
}
test('random 20-minute batches, resend 1h, keep 1h', () => runScenario({ seed: 77, batches: 8, batchMinutes: 20, resend: H, keep: H }));

/** Runs the four dedup stages on `reflog` at `now` in `work`; returns filtered_log. */
function chainHour(work: string, reflog: string, now: string): string {
  fs.writeFileSync(path.join(work, 'hour.reflog'), reflog);
  const r = spawnSync(
    'bash',
    [
      '-c',
      `set -eo pipefail; analyze-dump hour.reflog | group-sum | join-current --current current_log ` +
        `| filter-url --now ${now} --keep 10h --current-out current_log.next > filtered_log; mv current_log.next current_log`,
    ],
    { cwd: work, env: testEnv({ MS_LOG: '' }), encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  return fs.readFileSync(path.join(work, 'filtered_log'), 'utf8');
}

// Hour 14 sends x with tag v2; a late hour 13 (x at 13:30, tag v1) is no news and leaves
// v2 in current_log; hour 15 (x with v2, 35 minutes after 14:10) is neither due nor changed.
test('a late hour with an older updatetag sends nothing and keeps the newer tag', () => {
  const work = scratch('ms-late-');
  const row = (ts: string, tag: string) => `b\t5\t${ts}\t1\thttp://late.example/x\t1\t${tag}\n`;
  assert.match(chainHour(work, row('20110728141000', 'v2'), '20110728150000'), /\tv2\t1\tlate\.example\t/);
  assert.equal(chainHour(work, row('20110728133000', 'v1'), '20110728150500'), '');
  assert.match(fs.readFileSync(path.join(work, 'current_log'), 'utf8'), /^[0-9a-f]{16}\t20110728141000\tv2\t2\t/);
  assert.equal(chainHour(work, row('20110728144500', 'v2'), '20110728160000'), '');
});
