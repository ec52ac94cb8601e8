// partner-db owner: who owns a domain or a URL's domain, and the least-loaded pick for
// a domain nobody owns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { madeDb, partnerDb, runBin, scratch } from './lib/run.js';
import type { OwnerAnswer } from '../src/admin/owner.js';

test('partner-db owner: a domain, a URL (its registrable domain), and a domain nobody owns', () => {
  const dir = scratch('ms-owner-');
  madeDb(dir, 'p.db', [
    ['add', 'y1'],
    ['add', 'y2', '--weight', '2'],
  ]);
  partnerDb(dir, 'p.db', 'assign', 'example.co.uk', 'y1');
  partnerDb(dir, 'p.db', 'assign', 'shop.com', 'y2');
  partnerDb(dir, 'p.db', 'assign', 'other.com', 'y2');
  const json = JSON.parse(partnerDb(dir, 'p.db', 'owner', '--json', 'shop.com', 'http://WWW.Example.CO.UK:80/a#b', 'new.org')) as OwnerAnswer[];
  assert.deepEqual(json, [
    { input: 'shop.com', domain: 'shop.com', owner: { id: 2, name: 'y2' }, pick: null },
    { input: 'http://WWW.Example.CO.UK:80/a#b', domain: 'example.co.uk', owner: { id: 1, name: 'y1' }, pick: null },
    // y1: 1 domain / weight 1 = 1; y2: 2 / 2 = 1: the tie goes to the smaller id.
    { input: 'new.org', domain: 'new.org', owner: null, pick: { id: 1, name: 'y1' } },
  ]);
  partnerDb(dir, 'p.db', 'assign', 'third.com', 'y1');
  assert.equal(
    partnerDb(dir, 'p.db', 'owner', 'SHOP.com.', 'new.org'),
    'SHOP.com. -> shop.com: Yacobot 2 (y2)\nnew.org: no owner; least-loaded would give it to Yacobot 2 (y2)\n',
  );
});

test('partner-db owner: a host goes to its registrable domain as analyze-dump takes it, and the line says so', () => {
  const dir = scratch('ms-owner-host-');
  madeDb(dir, 'p.db', [
    ['add', 'y1'],
    ['add', 'y2'],
  ]);
  partnerDb(dir, 'p.db', 'assign', 'site1004.ru', 'y1');
  partnerDb(dir, 'p.db', 'assign', 'example.co.uk', 'y2');
  const hosts = ['www.site1004.ru', 'WWW.Site1004.RU.', 'a.b.example.co.uk', 'sub.blogspot.com', 'co.uk', '192.168.0.1'];
  const json = JSON.parse(partnerDb(dir, 'p.db', 'owner', '--json', ...hosts)) as OwnerAnswer[];
  // What analyze-dump writes for a URL on each host.
  const reflog = hosts.map((h, i) => `1\t1\t2011072806000${i}\t1\thttp://${h}/\t1\n`).join('');
  const ad = runBin('analyze-dump', [], reflog, dir);
  assert.equal(ad.status, 0, ad.stderr);
  const domains = new Map(
    ad.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'))
      .map((f) => [Number(f[1]!.slice(-1)), f[4]!]),
  );
  assert.deepEqual(
    json.map((a) => a.domain),
    hosts.map((_, i) => domains.get(i)),
  );
  assert.deepEqual(
    json.map((a) => a.domain),
    ['site1004.ru', 'site1004.ru', 'example.co.uk', 'sub.blogspot.com', 'co.uk', '192.168.0.1'],
  );
  assert.deepEqual(
    json.map((a) => a.owner?.id ?? null),
    [1, 1, 2, null, null, null],
  );
  assert.equal(
    partnerDb(dir, 'p.db', 'owner', 'www.site1004.ru', 'site1004.ru'),
    'www.site1004.ru -> site1004.ru: Yacobot 1 (y1)\nsite1004.ru: Yacobot 1 (y1)\n',
  );
});

test('partner-db owner: bad arguments are usage errors, a missing database says how to make one', () => {
  const dir = scratch('ms-owner-bad-');
  madeDb(dir, 'p.db', [['add', 'y1']]);
  for (const arg of ['bad domain', 'ftp://files.example.com/x']) {
    const r = runBin('partner-db', ['--db', 'p.db', 'owner', arg], '', dir);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /^partner-db: /);
  }
  const r = runBin('partner-db', ['--db', 'nope.db', 'owner', 'a.com'], '', dir);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /nope\.db: database does not exist; create one with: partner-db --db nope\.db init/);
});
