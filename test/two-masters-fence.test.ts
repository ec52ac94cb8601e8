// A claim is a master's own only if its state made it: two masters of one name on one
// host, and a copied state directory, given the same hours at once, publish each hour
// once; and new_domains counts what a master's own transaction added, so that after a
// COMMIT dropped with its master killed the sum over both masters is the domains owned.
// On a shared SQLite file and on PostgreSQL; the fast suite runs a short part on SQLite.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, RUNNER, runRunner, scratch, testEnv } from './lib/run.js';
import { type Backend, SQLITE, backends } from './lib/backends.js';
import { FAST_SUITE } from './lib/pg.js';
import {
  type HourCounts,
  type Master,
  allRecords,
  assertOneRemembered,
  checkHour,
  giveHour,
  master,
  memory,
  publisherOf,
  records,
  runMaster,
  runName,
  runOk,
  soloRuns,
  withYacobots,
} from './lib/masters.js';

/** How much of a scenario a backend runs: the fast suite a short part, on SQLite. */
interface Sizes {
  /** Whether the copied-state scenario runs. */
  copy: boolean;
  /** Hours given to both masters at once. */
  hours: number;
  /** The kills of the count scenario: before COMMIT (the COMMIT dropped), after it. */
  kills: readonly ('before' | 'after')[];
}

function sizes(be: Backend): Sizes {
  if (be.name === 'sqlite' && FAST_SUITE) return { copy: false, hours: 1, kills: ['before'] };
  return { copy: true, hours: be.name === 'sqlite' ? 2 : 4, kills: ['before', 'after'] };
}

/** A new partner database of `be` with the Yacobots, shared by the masters under `root`. */
function sharedDb(be: Backend, root: string): string {
  const db = be.newDb(root);
  return withYacobots(root, be.name === 'sqlite' ? path.resolve(root, db) : db);
}

/** The rows of partner_domain. */
function ownedIn(be: Backend, root: string, db: string): number {
  return Number(be.rows(root, db, 'SELECT COUNT(*) FROM partner_domain')[0]![0]);
}

/** Master `m`'s state identity. */
function identityOf(m: Master): string {
  return (JSON.parse(fs.readFileSync(path.join(m.dir, 'var/state/identity.json'), 'utf8')) as { id: string }).id;
}

/** Gives hour `h` to both masters at once; returns their stderr (both must exit 0) and the hour's counts. */
async function bothAtOnce(a: Master, b: Master, solo: Master, h: number): Promise<{ counts: HourCounts; said: Map<Master, string> }> {
  giveHour([a, b], h);
  const [ra, rb] = await Promise.all([runMaster(a), runMaster(b)]);
  assert.equal(ra.status, 0, `${a.dir}, hour ${h}: ${ra.stderr}`);
  assert.equal(rb.status, 0, `${b.dir}, hour ${h}: ${rb.stderr}`);
  const run = runName(h);
  const counts = checkHour(a, b, solo, run);
  assertOneRemembered(a, b, run, publisherOf(a, b, run));
  return {
    counts,
    said: new Map([
      [a, ra.stderr],
      [b, rb.stderr],
    ]),
  };
}

/** Prints the counts of a scenario's hours. */
function report(what: string, counts: HourCounts[]): void {
  process.stdout.write(`# ${what} (URLs published per hour: by the first, by the second, by both, by a master alone):\n`);
  for (const c of counts) process.stdout.write(`#   ${c.run}: ${c.a}, ${c.b}, both ${c.both}, alone ${c.solo}\n`);
}

/** `status --json` in master `m`'s directory: its exit code and JSON. */
function statusOf(m: Master): { code: number | null; s: { healthy: boolean; reason: string | null; fenced: Record<string, string> | null } } {
  const r = runRunner(m.dir, ['status', '--json']);
  return { code: r.status, s: JSON.parse(r.stdout) };
}

/** The value of the sample `name` (no labels) in metrics file `file`. */
function sample(file: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(fs.readFileSync(file, 'utf8'));
  return m ? Number(m[1]) : undefined;
}

test('a fenced copy of a state fails check and is not healthy in status and the metrics, from invocation to invocation, until it is given a new identity [sqlite]', {
  timeout: 300_000,
}, async () => {
  const root = scratch('ms-fence-status-');
  const db = sharedDb(SQLITE, root);
  const a = master(root, 'm', db, 'a');
  giveHour([a], 1);
  await runOk(a, 'hour 1');
  fs.cpSync(a.dir, path.join(root, 'b'), { recursive: true, preserveTimestamps: true });
  const b: Master = { ...a, dir: path.join(root, 'b') };
  giveHour([a], 2);
  await runOk(a, 'hour 2');
  // The copy gets the hour the original published: it remembers it and exits 0, publishing nothing.
  giveHour([b], 2);
  const metrics = path.join(b.dir, 'metrics.prom');
  const fenced = await runMaster(b, undefined, {}, ['--metrics-file', metrics]);
  assert.equal(fenced.status, 0, fenced.stderr);
  assert.match(fenced.stderr, /this state \(identity [0-9a-f]{8}\) is a copy/);
  const seen = statusOf(b);
  assert.equal(seen.code, 1);
  assert.match(
    seen.s.reason ?? '',
    /^this state \(identity [0-9a-f]{8}\) is a copy: another state with the same identity \(master m at [^)]*[/]a[/]var[/]state, /,
  );
  assert.match(seen.s.reason ?? '', /give it a new identity with: reflog-to-yacobot-queue new-identity/);
  assert.equal(seen.s.fenced?.identity, identityOf(b));
  assert.equal(seen.s.fenced?.master, 'm');
  assert.match(runRunner(b.dir, ['status']).stdout, /\nidentity: fenced, a copy of master m's state at [^\n]*[/]a[/]var[/]state \(last at /);
  assert.equal(sample(metrics, 'master_server_state_fenced'), 1);
  assert.equal(sample(metrics, 'master_server_healthy'), 0);
  assert.deepEqual([statusOf(a).code, statusOf(a).s.fenced], [0, null], 'the original is healthy');
  // check asks the database, before any invocation: the copy fails it, the original passes.
  const checkOf = (m: Master) => runRunner(m.dir, ['check', '--db', db]);
  const copyCheck = checkOf(b);
  assert.equal(copyCheck.status, 1, copyCheck.stdout);
  assert.match(copyCheck.stdout, /^FAIL identity: this state \(identity [0-9a-f]{8}\) is a copy: another state with the same identity \(master m at /m);
  assert.match(checkOf(a).stdout, /^ok identity: [0-9a-f]{8}, held by this state$/m);
  // An invocation that claims no hour does not ask again: what the last one found holds.
  const idle = await runMaster(b, undefined, {}, ['--metrics-file', metrics]);
  assert.equal(idle.status, 0, idle.stderr);
  assert.equal(statusOf(b).code, 1, 'still fenced after an invocation with nothing to do');
  assert.equal(sample(metrics, 'master_server_state_fenced'), 1);
  // A new identity ends it, at once in status, and in the next metrics file.
  const renew = spawnSync(RUNNER, ['new-identity', '--db', db], { cwd: b.dir, env: testEnv(), encoding: 'utf8' });
  assert.equal(renew.status, 0, renew.stderr);
  assert.deepEqual([statusOf(b).code, statusOf(b).s.fenced], [0, null]);
  assert.match(checkOf(b).stdout, /^ok identity: [0-9a-f]{8}, which has claimed no hour yet$/m);
  await runOk(b, 'after new-identity');
  assert.equal(statusOf(b).s.fenced, null);
  giveHour([b], 3);
  const after = await runMaster(b, undefined, {}, ['--metrics-file', metrics]);
  assert.equal(after.status, 0, after.stderr);
  assert.match(checkOf(b).stdout, /^ok identity: [0-9a-f]{8}, held by this state$/m);
  assert.equal(sample(metrics, 'master_server_state_fenced'), 0);
  assert.equal(sample(metrics, 'master_server_healthy'), 1);
});

for (const be of backends()) {
  const size = sizes(be);
  test(`two masters of one name on one host, two states, the same hours at once: each hour published once, the other remembers it and says another master uses its name [${be.name}]`, {
    timeout: 900_000,
  }, async () => {
    const root = scratch('ms-fence-name-');
    const db = sharedDb(be, root);
    const a = master(root, 'm', db, 'a');
    const b = master(root, 'm', db, 'b');
    const hours = Array.from({ length: size.hours }, (_, i) => i + 1);
    const { solo, memoryAfter } = await soloRuns(root, hours);
    const counts: HourCounts[] = [];
    for (const h of hours) {
      const { counts: c, said } = await bothAtOnce(a, b, solo, h);
      counts.push(c);
      const publisher = publisherOf(a, b, runName(h));
      const other = publisher === a ? b : a;
      assert.match(
        said.get(other)!,
        new RegExp(
          `${runName(h)}: master m published this hour .*: not this state .*another master uses the same name m; give each master its own --master-name; this master remembers it in current_log and publishes nothing`,
        ),
      );
      assert.match(
        said.get(other)!,
        /1 run\(s\) committed in [\d.]+ s; none published \(another master published them: remembered in current_log, not published\); run records in /,
      );
      const ro = records(other).get(runName(h))!;
      assert.deepEqual([ro.state_id, ro.published_by_state], [identityOf(other), identityOf(publisher)]);
    }
    assert.notEqual(identityOf(a), identityOf(b));
    assert.equal(memory(a), memoryAfter.get(size.hours), "a's memory is a master alone's");
    assert.equal(memory(b), memoryAfter.get(size.hours), "b's memory is a master alone's");
    report(`one name, two states [${be.name}]`, counts);
  });

  test(`a copied state directory given the same hours at once: the copy that comes second is fenced and publishes nothing; new-identity makes it a master of its own [${be.name}]`, {
    timeout: 900_000,
    skip: !size.copy && 'in the whole suite',
  }, async () => {
    const root = scratch('ms-fence-copy-');
    const db = sharedDb(be, root);
    const a = master(root, 'm', db, 'a');
    const hours = Array.from({ length: size.hours + 2 }, (_, i) => i + 1);
    const { solo, memoryAfter } = await soloRuns(root, hours);
    giveHour([a], 1);
    await runOk(a, 'hour 1');
    fs.cpSync(a.dir, path.join(root, 'b'), { recursive: true, preserveTimestamps: true });
    const b: Master = { ...a, dir: path.join(root, 'b') };
    assert.equal(identityOf(a), identityOf(b));
    const counts: HourCounts[] = [];
    let fenced: Master | null = null;
    for (const h of hours.slice(1, -1)) {
      const { counts: c, said } = await bothAtOnce(a, b, solo, h);
      counts.push(c);
      const other = publisherOf(a, b, runName(h)) === a ? b : a;
      fenced ??= other;
      assert.equal(other, fenced, `hour ${h}: the same copy stays fenced`);
      assert.match(
        said.get(other)!,
        /warning: this state \(identity [0-9a-f]{8}\) is a copy: another state with the same identity \(master m at [^)]*, last at [^)]*\) has claimed hours since this one last did, so this one publishes nothing/,
      );
      assert.match(
        said.get(other)!,
        new RegExp(
          `${runName(h)}: master m published this hour .*: a copy of this state \\(the same identity\\), which holds the identity now; this master remembers it`,
        ),
      );
    }
    // The fenced copy goes on as a master of its own.
    const renew = spawnSync(RUNNER, ['new-identity', '--db', db], { cwd: fenced!.dir, env: testEnv(), encoding: 'utf8' });
    assert.equal(renew.status, 0, renew.stderr);
    assert.match(renew.stdout, /identity\.json: new identity [0-9a-f]{32} \(was [0-9a-f]{32}\): this state is a master of its own/);
    assert.notEqual(identityOf(a), identityOf(b));
    const last = hours.at(-1)!;
    const { counts: c, said } = await bothAtOnce(a, b, solo, last);
    counts.push(c);
    const other = publisherOf(a, b, runName(last)) === a ? b : a;
    assert.doesNotMatch(said.get(other)!, /is a copy: another state/);
    assert.match(said.get(other)!, /another master uses the same name m/);
    assert.equal(memory(a), memoryAfter.get(last), "a's memory is a master alone's");
    assert.equal(memory(b), memoryAfter.get(last), "b's memory is a master alone's");
    report(`a copied state [${be.name}], the copy fenced until hour ${last}`, counts);
  });

  test(`new_domains after a COMMIT dropped with its master killed, and after one made just before the kill: summed over both masters, the domains owned [${be.name}]`, {
    timeout: 900_000,
  }, async () => {
    const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/kill-at-commit.js')).href;
    for (const when of size.kills) {
      const root = scratch(`ms-fence-count-${when}-`);
      const db = sharedDb(be, root);
      const a = master(root, 'A', db);
      const b = master(root, 'B', db);
      giveHour([a], 1);
      const killed = await runMaster(a, undefined, { NODE_OPTIONS: `--import=${preload}`, KILL_AT_COMMIT: when, KILL_WHO: 'group-logged' });
      assert.equal(killed.signal, 'SIGKILL', `${when}: ${killed.stderr}`);
      const ownedAtKill = ownedIn(be, root, db);
      assert.ok(when === 'before' ? ownedAtKill === 0 : ownedAtKill > 0, `${when}: ${ownedAtKill} domains owned when A was killed`);
      giveHour([b], 1);
      await runOk(b, 'hour 1');
      const back = await runOk(a, 'back');
      assert.match(
        back.stderr,
        /"msg":"upload-domains died during its commit; the database tells whether it happened"/,
        'A asks about the commit its dead attempt announced',
      );
      assert.match(back.stderr, /master B published this hour/);
      const sum = (m: Master) => allRecords(m).reduce((n, r) => n + Number(r.new_domains ?? 0), 0);
      const owned = ownedIn(be, root, db);
      assert.ok(owned > 0);
      assert.equal(sum(a) + sum(b), owned, `${when}: new_domains of A ${sum(a)} and B ${sum(b)}, ${owned} domains owned`);
      assert.equal(sum(a), ownedAtKill, `${when}: A counts what its own transaction committed`);
      process.stdout.write(`# COMMIT ${when === 'before' ? 'dropped' : 'made'}, A killed [${be.name}]: new_domains A ${sum(a)}, B ${sum(b)}; owned ${owned}\n`);
    }
  });
}
