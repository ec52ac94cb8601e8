// The core reflog parser's one-URL API (urlIdentity): the same answer as a reflog line
// holding that URL, for every URL spelling the fixtures and a seeded fuzz hold.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { ROOT } from './lib/run.js';
import { idOf } from './lib/model.js';
import { DEFAULT_URL_OPTIONS, analyzeLine, urlIdentity } from '../src/core/reflog.js';
import { loadUrlHash, type UrlHash } from '../src/core/url.js';

/** What a reflog line holding `raw` as its URL gives, in urlIdentity's terms. */
function viaLine(raw: string, hash: UrlHash): ReturnType<typeof urlIdentity> {
  const line = Buffer.from(`0\t0\t20000101000000\t0\t${raw}\t1`);
  const v = analyzeLine(line, 0, line.length, false, DEFAULT_URL_OPTIONS, hash);
  if (v.kind === 'reject') return { invalid: v.detail ? `${v.reason}: ${v.detail}` : v.reason };
  assert.equal(v.kind, 'record', raw);
  const f = v.kind === 'record' ? v.record.split('\t') : [];
  return { id: f[0]!, domain: f[4]!, url: f[5]! };
}

/** The URL field of every reflog line of the analyze-dump fixtures. */
function fixtureUrls(): string[] {
  const dir = path.join(ROOT, 'fixtures', 'analyze-dump');
  const urls: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    const stdin = path.join(dir, name, 'stdin');
    if (!fs.existsSync(stdin)) continue;
    for (const line of fs.readFileSync(stdin, 'utf8').split('\n')) {
      const f = line.split('\t');
      if (f.length >= 6 && !f[4]!.includes('\r')) urls.push(f[4]!);
    }
  }
  return urls;
}

test('urlIdentity answers as a reflog line holding the URL does: fixtures, odd strings and a seeded fuzz', async () => {
  const hash = await loadUrlHash();
  const odd = [
    '',
    'x',
    'http://',
    'http://a.b/\u{1F600}',
    'http://\ud800.com/',
    `http://a.com/${'x'.repeat(8200)}`,
    'ftp://a.com/',
    'HTTP://WWW.Example.CO.UK/a/../b#f',
  ];
  const urls = [...fixtureUrls(), ...odd];
  assert.ok(urls.length > 100, `${urls.length} fixture URLs`);
  for (const raw of urls) assert.deepEqual(urlIdentity(raw, hash), viaLine(raw, hash), raw);
  const part = fc.constantFrom('http://', 'https://', 'HTTP://', 'a.com', 'xn--', 'ß', '%41', '/', '..', ':80', '?', '#', '@', '[::1]', '\\', ' ', 'é', '.');
  fc.assert(
    fc.property(fc.array(fc.oneof(part, fc.string({ maxLength: 4 })), { maxLength: 8 }), (parts) => {
      const raw = parts.join('').replace(/[\t\r\n]/g, '');
      assert.deepEqual(urlIdentity(raw, hash), viaLine(raw, hash), raw);
    }),
    { seed: 49, numRuns: 3000 },
  );
});

test('urlIdentity refuses a URL that a reflog line could not hold', async () => {
  const hash = await loadUrlHash();
  for (const raw of ['http://a.com/\tb', 'http://a.com/\r', 'http://a.com/\nb']) {
    assert.deepEqual(urlIdentity(raw, hash), { invalid: 'bad URL: contains a TAB or a line break' });
  }
  assert.deepEqual(urlIdentity('http://WWW.Example.COM/a/./b#x', hash), {
    id: idOf('http://www.example.com/a/b'),
    domain: 'example.com',
    url: 'http://www.example.com/a/b',
  });
});
