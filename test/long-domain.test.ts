// A domain longer than the bound (253 bytes, DNS's limit for a host name) is one
// rejected line, not an hour that fails on every retry: analyze-dump rejects it with
// its reason, the runner commits the hour on either backend, partner-db refuses it
// in import (naming the line) and assign, and upload-domains fed by hand refuses it
// as a bad record at its line, storing nothing, by the same rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, hasStackTrace, partnerDb, runBin, scratch, summaryOf } from './lib/run.js';
import { runner } from './lib/runner.js';
import { runsJsonl } from './lib/runner-state.js';
import { backends } from './lib/backends.js';

const BACKENDS = backends();
const SHARED_LONGHOST = path.join(ROOT, '..', 'shared', 'test-data', 'longhost.reflog');

/** A label run of `n` bytes: a host made of them is as long as wanted (WHATWG takes labels over 63). */
const longName = (n: number) => 'q'.repeat(n);

/** A reflog: a header, a host whose domain is `domainBytes` long, then `ok` lines on ordinary domains. */
function longHostReflog(domainBytes: number, ok = 200): string {
  let s = 'reflog header\n';
  s += `1\t5\t20110728060000\t1\thttp://www.${longName(domainBytes - 4)}.com/x\t1\t\n`;
  for (let i = 0; i < ok; i++) s += `1\t5\t201107280601${String(i % 60).padStart(2, '0')}\t${i}\thttp://site${i % 7}.example${i % 3}.org/p${i}\t1\t\n`;
  return s;
}

test('analyze-dump: a domain of 254 bytes is rejected with its reason and counted; one of 253 is a record', () => {
  const work = scratch('ms-longdom-');
  const r = runBin('analyze-dump', ['--rejects', 'rejects.tsv'], longHostReflog(254), work);
  assert.equal(r.status, 0, r.stderr);
  assert.match(fs.readFileSync(path.join(work, 'rejects.tsv'), 'utf8'), /^2\tdomain too long: 254 bytes, max 253\t1\t5\t/);
  const s = summaryOf(r.stderr);
  assert.equal(s.rejected, 1);
  assert.deepEqual(s.rejected_by_reason, { 'domain too long': 1 });
  assert.equal(s.records_out, 200);
  const at = runBin('analyze-dump', [], longHostReflog(253));
  assert.equal(summaryOf(at.stderr).rejected, 0);
  assert.ok(at.stdout.includes(`\t${longName(249)}.com\t`));
  // With --domain-mode host the domain is the whole host: "www." makes it 4 bytes over.
  assert.equal(summaryOf(runBin('analyze-dump', ['--domain-mode', 'host'], longHostReflog(253)).stderr).rejected, 1);
});

for (const be of BACKENDS) {
  test(`the runner commits an hour with a 6 KB domain, one line rejected [${be.name}]`, async () => {
    await commitsWithOneReject(be, longHostReflog(6004));
  });

  test(`the runner commits the long-host reflog with one reject [${be.name}]`, async (t) => {
    if (!fs.existsSync(SHARED_LONGHOST)) return t.skip(`${SHARED_LONGHOST} absent`);
    await commitsWithOneReject(be, fs.readFileSync(SHARED_LONGHOST, 'utf8'));
  });

  test(`partner-db import names the line of a domain over 253 bytes and imports nothing; assign refuses it [${be.name}]`, () => {
    const work = scratch('ms-longdom-');
    const db = be.newDb(work);
    partnerDb(work, db, 'init');
    partnerDb(work, db, 'add', 'alpha');
    const long = `${longName(4000)}.com`;
    fs.writeFileSync(path.join(work, 'd.csv'), `domain,yacobot\nok.com,alpha\n${long},alpha\n`);
    const imp = runBin('partner-db', ['--db', db, 'import', 'd.csv'], '', work);
    assert.equal(imp.status, 1, imp.stderr);
    assert.match(imp.stderr, /^partner-db: d\.csv:3: domain too long \(4004 bytes, max 253\): 'q{60}\.\.\.'$/m);
    assert.deepEqual(be.rows(work, db, 'SELECT domain FROM partner_domain'), []);
    const as = runBin('partner-db', ['--db', db, 'assign', long, 'alpha'], '', work);
    assert.equal(as.status, 2, as.stderr);
    assert.match(as.stderr, /^partner-db: domain too long \(4004 bytes, max 253\)/m);
    partnerDb(work, db, 'assign', `${longName(249)}.com`, 'alpha');
  });
}

/** A filtered_log record of domain `d`, number `i`. */
const record = (i: number, d: string) => `${i.toString(16).padStart(16, '0')}\t20110728060000\t\t1\t${d}\thttp://${d}/\n`;

for (const be of BACKENDS) {
  test(`upload-domains fed by hand: a domain over 253 bytes is a bad record at its line, nothing assigned; one of 253 is routed [${be.name}]`, () => {
    const work = scratch('ms-longdom-');
    const db = be.newDb(work);
    partnerDb(work, db, 'init');
    partnerDb(work, db, 'add', 'alpha');
    for (const bytes of [254, 6004]) {
      const input = record(1, 'ok.com') + record(2, `${longName(bytes - 4)}.com`) + record(3, 'z.com');
      const r = runBin('upload-domains', ['--db', db, '--now', '20110728070000'], input, work);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`^upload-domains: -:2: domain too long \\(${bytes} bytes, max 253\\): 'q{60}\\.\\.\\.'$`, 'm'));
      assert.ok(!hasStackTrace(r.stderr) && !r.stderr.includes('54000'), r.stderr);
      const s = summaryOf(r.stderr);
      assert.deepEqual([s.status, s.error_code, s.records_in], ['failed', 'BAD_RECORD', 1]);
      assert.deepEqual(be.rows(work, db, 'SELECT domain FROM partner_domain'), []);
    }
    const at = runBin('upload-domains', ['--db', db, '--now', '20110728070000'], record(1, `${longName(249)}.com`), work);
    assert.equal(at.status, 0, at.stderr);
    assert.deepEqual(be.rows(work, db, 'SELECT length(domain) FROM partner_domain'), [['253']]);
  });
}

/** Runs the runner on backend `be` over one hour `reflog`: it commits, with one reject, the long domain's. */
async function commitsWithOneReject(be: (typeof BACKENDS)[number], reflog: string): Promise<void> {
  const dir = scratch('ms-longhost-');
  for (const d of ['var/inbox', 'var/state', 'var/queue']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  const db = be.name === 'sqlite' ? path.join(dir, 'var/state/partner.db') : be.newDb(dir);
  partnerDb(dir, db, 'init');
  partnerDb(dir, db, 'add', 'alpha');
  fs.writeFileSync(path.join(dir, 'var/inbox/2011072806.reflog'), reflog);
  const r = await runner(dir, ['--db', db]);
  assert.equal(r.status, 0, r.stderr);
  const [run] = runsJsonl(dir);
  assert.equal(run?.status, 'ok', JSON.stringify(run));
  const rejects = fs.readFileSync(path.join(dir, 'var/state/rejects/2011072806.tsv'), 'utf8').split('\n').filter(Boolean);
  assert.equal(rejects.length, 1);
  assert.match(rejects[0]!, /^\d+\tdomain too long: \d+ bytes, max 253\t/);
  const domains = be.rows(dir, db, 'SELECT max(length(domain)) FROM partner_domain');
  assert.ok(Number(domains[0]![0]) <= 253);
}
