// Two masters on one PostgreSQL partner database publish each hour once: the claims
// of hours. Both active (the same hour to both at once), failover and return with the
// runner SIGKILLed at several points of its run, and catch-up of a master that missed
// hours. After each: no URL id in both masters' queue files of one hour, the URLs
// published per hour those a master alone publishes, both memories whole.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, scratch, testEnv } from './lib/run.js';
import { FAST_SUITE, PgCluster, pgSkipReason, pgTest } from './lib/pg.js';
import {
  type HourCounts,
  type Master,
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

const SKIP = pgSkipReason();
let cluster: PgCluster | null = null;
const pg = (): PgCluster => cluster!;

before(async () => {
  // Its tests are the whole suite's (pgTest): no cluster for the fast one.
  if (SKIP === null && !FAST_SUITE) cluster = await PgCluster.start();
});
after(() => cluster?.remove());

/** A partner database with the test's Yacobots on the cluster. */
function partnerDatabase(work: string): string {
  return withYacobots(work, pg().newDatabase());
}

/** The URL of the first line of master `m`'s first queue file of run `run`. */
function firstUrl(m: Master, run: string): string {
  const q = path.join(m.dir, 'var/queue');
  const y = fs
    .readdirSync(q)
    .filter((d) => /^\d+$/.test(d) && fs.existsSync(path.join(q, d, `${run}.tsv`)))
    .sort()[0]!;
  return fs
    .readFileSync(path.join(q, y, `${run}.tsv`), 'utf8')
    .split('\n')[0]!
    .split('\t')[5]!;
}

pgTest(
  'issue scenario: 5 hours, 3 to both at once, a failover with A killed inside hour 4 and its return, hour 5 to A alone: each hour published once',
  { timeout: 900_000 },
  async () => {
    const root = scratch('ms-claims-');
    const db = partnerDatabase(root);
    const a = master(root, 'A', db);
    const b = master(root, 'B', db);
    const { solo, memoryAfter } = await soloRuns(root, [1, 2, 3, 4, 5]);
    const counts: HourCounts[] = [];

    // Hours 1 to 3 reach both masters at once.
    for (const h of [1, 2, 3]) {
      giveHour([a, b], h);
      const [ra, rb] = await Promise.all([runMaster(a), runMaster(b)]);
      assert.equal(ra.status, 0, ra.stderr);
      assert.equal(rb.status, 0, rb.stderr);
      counts.push(checkHour(a, b, solo, runName(h)));
      assertOneRemembered(a, b, runName(h), publisherOf(a, b, runName(h)));
    }
    // Hour 4: A is SIGKILLed inside it, after its COMMIT and before its claim is confirmed;
    // the sender gives the hour to B, which takes the claim over; A comes back.
    giveHour([a], 4);
    const killed = await runMaster(a, `${runName(4)}:confirm`);
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    giveHour([b], 4);
    const rb4 = await runOk(b, 'hour 4 after the failover');
    assert.match(rb4.stderr, /master A claimed this hour and did not publish it within 3s \(--claim-lease\); this master takes it over/);
    const back = await runOk(a, 'back after the failover');
    assert.match(back.stderr, /master B published this hour .*this master remembers it in current_log and publishes nothing/);
    counts.push(checkHour(a, b, solo, runName(4)));
    assertOneRemembered(a, b, runName(4), b);
    // What A says of it: status names the master that published its last run, explain a URL of it.
    const st = spawnSync(RUNNER, ['status', '--json', '--db', a.db], { cwd: a.dir, env: testEnv(), encoding: 'utf8' });
    assert.equal((JSON.parse(st.stdout) as { last_success: { published_by?: string } }).last_success.published_by, 'B', st.stdout + st.stderr);
    const url = firstUrl(b, runName(4));
    const ex = spawnSync(RUNNER, ['explain', '--db', a.db, url], { cwd: a.dir, env: testEnv(), encoding: 'utf8' });
    assert.match(ex.stdout, new RegExp(`verdict: sent in ${runName(4)} by master B; (held back|due again)`), ex.stdout + ex.stderr);
    // Hour 5 to A alone: it holds back what B sent in hour 4.
    giveHour([a], 5);
    await runOk(a, 'hour 5');
    counts.push(checkHour(a, b, solo, runName(5)));
    assert.equal(memory(a), memoryAfter.get(5), "A's memory is the one of a master that ran every hour");
    assert.equal(memory(b), memoryAfter.get(4), "B's memory is the one of a master that ran hours 1 to 4");
    const held = (m: Master, run: string) => (records(m).get(run)!.stages as Record<string, Record<string, number>>)['filter-url']!.held;
    assert.equal(held(a, runName(5)), held(solo, runName(5)), 'A held back in hour 5 what a master alone holds back');
    process.stdout.write(`# scenario counts (URLs published per hour: by A, by B, by both, by a master alone):\n`);
    for (const c of counts) process.stdout.write(`#   ${c.run}: A ${c.a}, B ${c.b}, both ${c.both}, alone ${c.solo}\n`);
    process.stdout.write(`#   hour 5: held back ${held(a, runName(5))} (alone: ${held(solo, runName(5))})\n`);
  },
);

/** The steps at which the failover sweep SIGKILLs master A inside the hour. */
const KILL_POINTS = ['chain', 'claim', 'commit', 'confirm', 'queue:1', 'record', 'uncommit'];

pgTest(
  'failover and return with A SIGKILLed at each point of its run: the hour is published once, both memories whole, no claim left unpublished',
  { timeout: 1_800_000 },
  async () => {
    const root = scratch('ms-claims-kill-');
    const { solo, memoryAfter } = await soloRuns(root, [1, 2]);
    for (const point of KILL_POINTS) {
      const db = partnerDatabase(root);
      const a = master(path.join(root, point), 'A', db);
      const b = master(path.join(root, point), 'B', db);
      giveHour([a, b], 1);
      await Promise.all([runOk(a, 'hour 1'), runOk(b, 'hour 1')]);
      const run = runName(2);
      giveHour([a], 2);
      const killed = await runMaster(a, `${run}:${point}`);
      assert.equal(killed.signal, 'SIGKILL', `${point}: ${killed.stderr}`);
      giveHour([b], 2);
      await runOk(b, `hour 2, A killed at ${point}`);
      await runOk(a, `back, killed at ${point}`);
      const c = checkHour(a, b, solo, run);
      // Killed after its claim was confirmed, A's roll forward publishes; before, B does.
      const publisher = KILL_POINTS.indexOf(point) > KILL_POINTS.indexOf('confirm') ? a : b;
      assert.equal(publisherOf(a, b, run), publisher, `${point}: published by ${publisher.name}`);
      assertOneRemembered(a, b, run, publisher);
      assert.equal(memory(a), memoryAfter.get(2), `${point}: A's memory whole`);
      assert.equal(memory(b), memoryAfter.get(2), `${point}: B's memory whole`);
      const open = pg().psql(PgCluster.dbName(db), 'SELECT run, master FROM hour_claim WHERE published_at IS NULL').trim();
      assert.equal(open, '', `${point}: no hour left claimed and not published`);
      process.stdout.write(`# killed at ${point}: ${run} published by ${publisher.name} (A ${c.a}, B ${c.b}, both ${c.both}, alone ${c.solo})\n`);
    }
  },
);

pgTest(
  "catch-up: a master that missed hours is told which, and remembers them from the other master's done/ without publishing them",
  { timeout: 900_000 },
  async () => {
    const root = scratch('ms-claims-catchup-');
    const db = partnerDatabase(root);
    const a = master(root, 'A', db);
    const b = master(root, 'B', db);
    const { solo, memoryAfter } = await soloRuns(root, [1, 2, 3, 4, 5]);
    giveHour([a, b], 1);
    await Promise.all([runOk(a, 'hour 1'), runOk(b, 'hour 1')]);
    // A is down for hours 2 to 4: B alone gets them.
    for (const h of [2, 3, 4]) {
      giveHour([b], h);
      await runOk(b, `hour ${h}`);
    }
    // A comes back; its first invocation (nothing in its inbox yet) names the hours it missed.
    const back = await runOk(a, 'back');
    assert.match(
      back.stderr,
      new RegExp(
        `warning: 3 hour\\(s\\) that master B published after this master's last run ${runName(1)} are not in its current_log: ${runName(2)}, ${runName(3)}, ${runName(4)}; `,
      ),
    );
    // The way back: those hours from B's done/ into A's inbox; remembered, not published.
    for (const h of [2, 3, 4])
      fs.copyFileSync(path.join(b.dir, 'var/state/done', `${runName(h)}.reflog`), path.join(a.dir, 'var/inbox', `${runName(h)}.reflog`));
    const caught = await runOk(a, 'catching up');
    assert.doesNotMatch(caught.stderr, /are not in its current_log/);
    for (const h of [2, 3, 4]) assertOneRemembered(a, b, runName(h), b);
    for (const h of [1, 2, 3, 4]) checkHour(a, b, solo, runName(h));
    assert.equal(memory(a), memoryAfter.get(4), "A's memory is whole again");
    // Hour 5 to A alone: it holds back what B sent while A was down.
    giveHour([a], 5);
    await runOk(a, 'hour 5');
    const c5 = checkHour(a, b, solo, runName(5));
    assert.equal(memory(b), memoryAfter.get(4), "B's memory whole");
    assert.equal(memory(a), memoryAfter.get(5), "A's memory whole");
    process.stdout.write(`# catch-up: hour 5 published by A ${c5.a} (alone ${c5.solo})\n`);
  },
);
