// reflog-to-yacobot-queue explain, run for real on the state two fixture hours leave:
// a sent, a held, a new and a rejected URL; canonical form, id and domain as
// analyze-dump gives them; read only, beside a held lock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { runBin, runRunner } from './lib/run.js';
import { deliver, newJob, runJob } from './lib/job.js';
import { idOf } from './lib/model.js';
import { snapshot } from './lib/runner-state.js';
import type { Explained } from '../src/runner/explain.js';

/** A job after the fixture hours 06 and 07 were committed. */
function twoHours(prefix: string): string {
  const dir = newJob(prefix);
  deliver(dir, '2011072806');
  deliver(dir, '2011072807');
  assert.equal(runJob(dir).status, 0);
  return dir;
}

function explain(dir: string, urls: string[]): Explained[] {
  const r = runRunner(dir, ['explain', '--json', ...urls]);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as Explained[];
  assert.equal(out.length, urls.length);
  return out;
}

/** The first record (fields) of a file of URL records. */
function firstRecord(file: string): string[] {
  return fs.readFileSync(file, 'utf8').split('\n')[0]!.split('\t');
}

/** The timestamp `secs` after `ts` (UTC, as the tests run with TZ=UTC). */
function plus(ts: string, secs: number): string {
  const ms = Date.UTC(+ts.slice(0, 4), +ts.slice(4, 6) - 1, +ts.slice(6, 8), +ts.slice(8, 10), +ts.slice(10, 12), +ts.slice(12, 14)) + secs * 1000;
  return new Date(ms).toISOString().replace(/[-T:]/g, '').slice(0, 14);
}

test('explain: a sent URL, then held once its queue file is taken, a new one and a rejected one', () => {
  const dir = twoHours('ms-explain-');
  const y = fs.readdirSync(path.join(dir, 'var/queue')).sort()[0]!;
  const queueFile = path.join(dir, 'var/queue', y, '2011072807.tsv');
  const [id, , , , domain, url] = firstRecord(queueFile) as [string, string, string, string, string, string];
  assert.equal(idOf(url), id);
  const spelled = url.replace('http://', 'HTTP://').replace(domain, domain.toUpperCase()) + '#frag';

  const [sent] = explain(dir, [spelled]);
  assert.equal(sent!.url, url);
  assert.equal(sent!.id, id);
  assert.equal(sent!.domain, domain);
  assert.equal(sent!.owner?.id, Number(y));
  assert.ok(sent!.sent_in.includes(queueFile), JSON.stringify(sent!.sent_in));
  assert.match(sent!.verdict, new RegExp(`^sent in 2011072807 to Yacobot ${y}\\b`));

  // The Yacobots take their queue files away: current_log still holds the URL.
  fs.rmSync(path.join(dir, 'var/queue'), { recursive: true });
  const current = fs.readFileSync(path.join(dir, 'var/state/current_log'), 'utf8').split('\n').find((l) => l.startsWith(`${id}\t`))!.split('\t');
  const [held] = explain(dir, [url]);
  assert.deepEqual(held!.sent_in, []);
  assert.equal(held!.current?.timestamp, current[1]);
  assert.equal(held!.current?.hits, current[3]);
  assert.equal(held!.current?.due_at, plus(current[1]!, 3600));
  assert.equal(held!.verdict, `held until ${plus(current[1]!, 3600)}`);

  // A URL never seen, on a domain without owner and on one with.
  const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  const loads = db.prepare('SELECT y.id, y.name, y.weight, (SELECT COUNT(*) FROM partner_domain d WHERE d.yacobot_id = y.id) AS n FROM yacobot y WHERE active = 1 ORDER BY y.id').all() as { id: number; name: string; weight: number; n: number }[];
  const owned = db.prepare('SELECT domain, yacobot_id FROM partner_domain ORDER BY domain LIMIT 1').get() as { domain: string; yacobot_id: number };
  db.close();
  const least = loads.reduce((a, b) => (b.n / b.weight < a.n / a.weight ? b : a));
  const [fresh, ownedNew] = explain(dir, ['http://never-seen.unassigned-domain.example/x', `http://${owned.domain}/never-seen-path`]);
  assert.equal(fresh!.current, null);
  assert.equal(fresh!.owner, null);
  assert.deepEqual(fresh!.pick, { id: least.id, name: least.name });
  assert.equal(fresh!.verdict, `new: goes out when next seen, to Yacobot ${least.id} (${least.name}) (least-loaded pick now)`);
  assert.equal(ownedNew!.owner?.id, owned.yacobot_id);
  assert.equal(ownedNew!.pick, null);
  assert.match(ownedNew!.verdict, new RegExp(`^new: goes out when next seen, to Yacobot ${owned.yacobot_id} `));
});

test('explain: a rejected URL names the rejects file, line and reason; a URL analyze-dump refuses says why', () => {
  const dir = twoHours('ms-explain-rej-');
  const rejects = path.join(dir, 'var/state/rejects/2011072806.tsv');
  const lines = fs.readFileSync(rejects, 'utf8').split('\n').filter(Boolean).map((l) => l.split('\t'));
  const timestampReject = lines.find((f) => f[1]!.startsWith('bad timestamp'))!;
  const schemeReject = lines.find((f) => f[1]!.startsWith('unsupported scheme'))!;
  const [badTs, badScheme] = explain(dir, [timestampReject[2 + 4]!, schemeReject[2 + 4]!]);
  assert.deepEqual(badTs!.rejected_in, [{ file: rejects, line: Number(timestampReject[0]), reason: timestampReject[1] }]);
  assert.equal(badTs!.verdict, `rejected: ${timestampReject[1]}`);
  assert.notEqual(badTs!.id, null, 'its URL itself is fine');
  assert.equal(badScheme!.id, null);
  assert.equal(badScheme!.invalid, schemeReject[1]);
  assert.deepEqual(badScheme!.rejected_in, [{ file: rejects, line: Number(schemeReject[0]), reason: schemeReject[1] }]);
  assert.equal(badScheme!.verdict, `rejected: ${schemeReject[1]}`);
});

test('explain: url, id and domain are what analyze-dump writes for the same URL', () => {
  const dir = newJob('ms-explain-canon-');
  const urls = ['http://Example.CO.UK:80/a/../b/./c?x=1#f', 'https://bücher.de/ü?q=ä', 'http://192.168.0.1:8080/x', 'http://sub.blogspot.com/', 'http://a.b.c.example.com/%7euser/'];
  const reflog = urls.map((u, i) => `1\t1\t2011072806000${i}\t1\t${u}\t1\n`).join('');
  const ad = runBin('analyze-dump', [], reflog);
  assert.equal(ad.status, 0, ad.stderr);
  const records = new Map(ad.stdout.split('\n').filter(Boolean).map((l) => l.split('\t')).map((f) => [f[1]!.slice(-1), f]));
  const out = explain(dir, urls);
  out.forEach((e, i) => {
    const f = records.get(String(i))!;
    assert.deepEqual([e.id, e.domain, e.url], [f[0], f[4], f[5]], urls[i]);
  });
});

test('explain: reads only, takes no lock: the same files after it, and it answers while the lock is held', async () => {
  const dir = twoHours('ms-explain-ro-');
  const before = snapshot(dir);
  const lockFile = path.join(dir, 'var/state/lock');
  const holder = spawn('flock', [lockFile, 'sleep', '30'], { stdio: 'ignore', detached: true });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const r = runRunner(dir, ['explain', 'http://example.com/', 'ftp://x/']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^http:\/\/example\.com\/\n  url: http:\/\/example\.com\/\n/);
    assert.match(r.stdout, /  verdict: rejected: unsupported scheme: ftp\n$/);
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }
  assert.deepEqual(snapshot(dir), before);
  assert.equal(fs.existsSync(path.join(dir, 'var/state/last-invocation.json')), true);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/last-invocation.json'), 'utf8')).result, 'committed', 'explain records no invocation');
});
