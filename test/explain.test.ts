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
import { committedJob, deliver, newJob, runJob } from './lib/job.js';
import { idOf } from './lib/model.js';
import { snapshot } from './lib/runner-state.js';
import type { Explained } from '../src/runner/views/explain.js';

/** A job after the fixture hours 06 and 07 were committed (one run of the runner, copied for each test). */
function twoHours(prefix: string): string {
  return committedJob(prefix, ['2011072806', '2011072807']);
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
  // The job's now is hour 07's (the end of its hour): the URL, seen in it, is held back.
  assert.deepEqual(sent!.as_of, { run: '2011072807', now: '20110728080000' });
  assert.equal(sent!.sent_timestamp, firstRecord(queueFile)[1]);
  assert.equal(
    sent!.verdict,
    `sent in 2011072807 to Yacobot ${y}; held back until ${plus(firstRecord(queueFile)[1]!, 3600)}: a sighting before then is sent only with a new updatetag`,
  );

  // The Yacobots take their queue files away: current_log still holds the URL.
  fs.rmSync(path.join(dir, 'var/queue'), { recursive: true });
  const current = fs
    .readFileSync(path.join(dir, 'var/state/current_log'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${id}\t`))!
    .split('\t');
  const [held] = explain(dir, [url]);
  assert.deepEqual(held!.sent_in, []);
  assert.equal(held!.current?.timestamp, current[1]);
  assert.equal(held!.current?.hits, current[3]);
  assert.equal(held!.current?.due_at, plus(current[1]!, 3600));
  assert.equal(held!.verdict, `held back until ${plus(current[1]!, 3600)}: a sighting before then is sent only with a new updatetag`);

  // A URL never seen, on a domain without owner and on one with.
  const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  const loads = db
    .prepare(
      'SELECT y.id, y.name, y.weight, (SELECT COUNT(*) FROM partner_domain d WHERE d.yacobot_id = y.id) AS n FROM yacobot y WHERE active = 1 ORDER BY y.id',
    )
    .all() as { id: number; name: string; weight: number; n: number }[];
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

/** A URL of hour 06's queue files that hour 07 did not send, with its queue file and the record's timestamp. */
function sentOnlyIn06(dir: string): { url: string; file: string; ts: string; y: string } {
  const queue = path.join(dir, 'var/queue');
  const in07 = new Set<string>();
  for (const y of fs.readdirSync(queue)) {
    const f = path.join(queue, y, '2011072807.tsv');
    if (fs.existsSync(f)) for (const l of fs.readFileSync(f, 'utf8').split('\n').filter(Boolean)) in07.add(l.split('\t')[0]!);
  }
  for (const y of fs.readdirSync(queue).sort()) {
    const file = path.join(queue, y, '2011072806.tsv');
    const rec = fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'))
      .find((f) => !in07.has(f[0]!));
    if (rec) return { url: rec[5]!, file, ts: rec[1]!, y };
  }
  throw new Error('every URL of hour 06 came again in hour 07');
}

test('explain: verdicts as of the job now: due again once its time has passed, then forgotten, with the time', () => {
  const dir = newJob('ms-explain-now-');
  deliver(dir, '2011072806');
  deliver(dir, '2011072807');
  assert.equal(runJob(dir, ['--keep', '10h']).status, 0);
  const a = sentOnlyIn06(dir);
  // Hour 07's now (08:00:00) is past the URL's due time (its 06 timestamp + 1h) and before it is forgotten (+ 10h).
  const [due] = explain(dir, [a.url]);
  assert.equal(due!.current?.due_at, plus(a.ts, 3600));
  assert.equal(due!.current?.kept_until, plus(a.ts, 36000));
  assert.equal(due!.verdict, `sent in 2011072806 to Yacobot ${a.y}; due again since ${plus(a.ts, 3600)}: its next sighting is sent`);

  // Hour 18 (now 19:00:00) forgets what was last seen before 09:00:00.
  fs.writeFileSync(path.join(dir, 'var/inbox/2011072818.reflog'), '1\t1\t20110728180000\t1\thttp://hour18.example/\t1\n');
  assert.equal(runJob(dir, ['--keep', '10h']).status, 0);
  const [gone] = explain(dir, [a.url]);
  assert.equal(gone!.current, null);
  assert.deepEqual(gone!.as_of, { run: '2011072818', now: '20110728190000' });
  assert.equal(gone!.verdict, `sent in 2011072806 to Yacobot ${a.y}; forgotten at ${plus(a.ts, 36000)}: its next sighting is sent as new`);
});

test('explain: a URL analyze-dump refuses that no reflog brought: never seen; would be rejected', () => {
  const dir = twoHours('ms-explain-never-');
  const [never, tab] = explain(dir, ['ftp://never.example/x', 'http://a.example/\tx']);
  assert.deepEqual(never!.rejected_in, []);
  assert.equal(never!.verdict, 'never seen; would be rejected: unsupported scheme: ftp');
  assert.equal(tab!.verdict, 'never seen; would be rejected: bad URL: contains a TAB or a line break');
});

test('explain: a URL rejected on many lines lists the first 10 and counts the rest', () => {
  const dir = newJob('ms-explain-cap-');
  const bad = Array.from({ length: 25 }, (_, i) => `1\t1\t20110728069${String(i).padStart(3, '0')}\t1\thttp://broken/\t1\n`);
  fs.writeFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), '1\t1\t20110728060000\t1\thttp://fine.example/\t1\n' + bad.join(''));
  assert.equal(runJob(dir, ['--max-reject-ratio', '1']).status, 0);
  const [e] = explain(dir, ['http://broken/']);
  assert.equal(e!.rejected_in.length, 10);
  assert.deepEqual(
    e!.rejected_in.map((r) => r.line),
    [2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
  );
  assert.equal(e!.rejected_more, 15);
  assert.match(e!.verdict, /^rejected: bad timestamp/);
  const human = runRunner(dir, ['explain', 'http://broken/']);
  assert.equal(human.status, 0, human.stderr);
  assert.equal(human.stdout.match(/^ {2}rejected in: .*:\d+: bad timestamp/gm)?.length, 10);
  assert.match(human.stdout, /\n {2}rejected in: 15 more line\(s\) not listed\n {2}verdict: rejected: bad timestamp/);
});

test('explain: a rejected URL names the rejects file, line and reason; a URL analyze-dump refuses says why', () => {
  const dir = twoHours('ms-explain-rej-');
  const rejects = path.join(dir, 'var/state/rejects/2011072806.tsv');
  const lines = fs
    .readFileSync(rejects, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'));
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
  const urls = [
    'http://Example.CO.UK:80/a/../b/./c?x=1#f',
    'https://bücher.de/ü?q=ä',
    'http://192.168.0.1:8080/x',
    'http://sub.blogspot.com/',
    'http://a.b.c.example.com/%7euser/',
  ];
  const reflog = urls.map((u, i) => `1\t1\t2011072806000${i}\t1\t${u}\t1\n`).join('');
  const ad = runBin('analyze-dump', [], reflog);
  assert.equal(ad.status, 0, ad.stderr);
  const records = new Map(
    ad.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'))
      .map((f) => [f[1]!.slice(-1), f]),
  );
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
    assert.match(r.stdout, /^http:\/\/example\.com\/\n {2}url: http:\/\/example\.com\/\n/);
    assert.match(r.stdout, / {2}verdict: never seen; would be rejected: unsupported scheme: ftp\n$/);
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }
  assert.deepEqual(snapshot(dir), before);
  assert.equal(fs.existsSync(path.join(dir, 'var/state/last-invocation.json')), true);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'var/state/last-invocation.json'), 'utf8')).result, 'committed', 'explain records no invocation');
});
