// Several masters on one partner database, for the two-master tests: each master its
// own var/inbox, var/state and var/queue under a directory, its --master-name and the
// database; the same generated hours given to each; what each published per hour,
// compared with a master alone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RUNNER, partnerDb, testEnv } from './run.js';
import { generateReflog } from '../../scripts/gen-reflog.js';

export const YACOBOTS: [string, number][] = [
  ['alpha', 1],
  ['beta', 1],
  ['gamma', 2],
];
/** Lines per generated hour: enough URLs seen again across hours to be held back. */
export const LINES = 3000;
/** A short lease, so that a takeover comes within a test's time. */
export const LEASE = '3s';

/** Makes partner database `db` (a SQLite path under `work`, or a URI) with YACOBOTS; returns it. */
export function withYacobots(work: string, db: string): string {
  partnerDb(work, db, 'init');
  for (const [n, w] of YACOBOTS) partnerDb(work, db, 'add', n, '--weight', String(w));
  return db;
}

/** A master: its own var/inbox, var/state and var/queue under `dir`, its name, and its database. */
export interface Master {
  name: string;
  dir: string;
  db: string;
}

/** Master `name` under `root`/`dirName` (default: its name) on database `db`. */
export function master(root: string, name: string, db: string, dirName = name): Master {
  const dir = path.join(root, dirName);
  for (const d of ['var/inbox', 'var/state', 'var/queue']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  return { name, dir, db };
}

/** The run name of hour `hour` (1: 2011072805). */
export function runName(hour: number): string {
  return `201107${String(28 + Math.floor((4 + hour) / 24)).padStart(2, '0')}${String((4 + hour) % 24).padStart(2, '0')}`;
}

/** Writes hour `hour`'s reflog, the same bytes, into the inbox of each of `ms`. */
export function giveHour(ms: Master[], hour: number): void {
  for (const m of ms) {
    const fd = fs.openSync(path.join(m.dir, 'var/inbox', `${runName(hour)}.reflog`), 'w');
    generateReflog(fd, { lines: LINES, hour, seed: 44 });
    fs.closeSync(fd);
  }
}

export interface Done {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Runs master `m`'s runner with `env` added, and `args` after its own, in a process
 * group of its own (a stage may kill the group); `failpoint` "RUN:STEP" SIGKILLs it just
 * before that step.
 */
export function runMaster(m: Master, failpoint?: string, env: Record<string, string> = {}, args: string[] = []): Promise<Done> {
  const e = testEnv({ ...env, ...(failpoint === undefined ? {} : { REFLOG_RUNNER_FAILPOINT: failpoint }) });
  const child = spawn(RUNNER, ['--db', m.db, '--master-name', m.name, '--claim-lease', LEASE, ...args], {
    cwd: m.dir,
    env: e,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (status, signal) => resolve({ status, signal, stderr })));
}

/** Runs `m` and asserts it exited 0. */
export async function runOk(m: Master, what: string): Promise<Done> {
  const r = await runMaster(m);
  assert.equal(r.status, 0, `${m.name} (${m.dir}), ${what}: ${r.stderr}`);
  return r;
}

/** The URL ids master `m` published for run `run`: the first field of every line of its queue files of that run. */
export function published(m: Master, run: string): Set<string> {
  const ids = new Set<string>();
  const q = path.join(m.dir, 'var/queue');
  for (const y of fs.readdirSync(q).filter((d) => /^\d+$/.test(d))) {
    for (const f of fs.readdirSync(path.join(q, y)).filter((n) => !n.startsWith('.') && (n === `${run}.tsv` || n.startsWith(`${run}.replay-`)))) {
      for (const line of fs.readFileSync(path.join(q, y, f), 'utf8').split('\n')) if (line !== '') ids.add(line.split('\t')[0]!);
    }
  }
  return ids;
}

/** A master's current_log, the memory of what was sent. */
export function memory(m: Master): string {
  return fs.readFileSync(path.join(m.dir, 'var/state/current_log'), 'utf8');
}

/** Every line of master `m`'s runs.jsonl. */
export function allRecords(m: Master): Record<string, unknown>[] {
  const f = path.join(m.dir, 'var/state/runs.jsonl');
  if (!fs.existsSync(f)) return [];
  return fs
    .readFileSync(f, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Master `m`'s runs.jsonl lines of committed runs, by run name (the last line of each). */
export function records(m: Master): Map<string, Record<string, unknown>> {
  return new Map(
    allRecords(m)
      .filter((r) => r.status === 'ok')
      .map((r) => [r.run as string, r]),
  );
}

/** The counts of one hour: URLs published by each master, by both, and by the master alone. */
export interface HourCounts {
  run: string;
  a: number;
  b: number;
  both: number;
  solo: number;
}

/**
 * Asserts that no URL id of run `run` is in both masters' queue files, and that their
 * union is what the master alone published; returns the counts.
 */
export function checkHour(a: Master, b: Master, solo: Master, run: string): HourCounts {
  const pa = published(a, run);
  const pb = published(b, run);
  const ps = published(solo, run);
  const both = [...pa].filter((id) => pb.has(id));
  assert.deepEqual(both.slice(0, 5), [], `${run}: ${both.length} URL ids published by both masters`);
  const union = new Set([...pa, ...pb]);
  assert.equal(union.size, ps.size, `${run}: ${union.size} URLs published by the two, ${ps.size} by a master alone`);
  for (const id of ps) assert.ok(union.has(id), `${run}: ${id}, published by a master alone, by neither of the two`);
  assert.ok(ps.size > 0, `${run}: the hour publishes something`);
  return { run, a: pa.size, b: pb.size, both: both.length, solo: ps.size };
}

/** The master alone: every hour of `hours`, in order, on its own SQLite database; returns its memory after each hour. */
export async function soloRuns(root: string, hours: number[]): Promise<{ solo: Master; memoryAfter: Map<number, string> }> {
  const solo = master(root, 'solo', withYacobots(root, path.join(root, 'solo.db')));
  const memoryAfter = new Map<number, string>();
  for (const h of hours) {
    giveHour([solo], h);
    await runOk(solo, `hour ${h} alone`);
    memoryAfter.set(h, memory(solo));
  }
  return { solo, memoryAfter };
}

/** The master whose queue files hold run `run`. */
export function publisherOf(a: Master, b: Master, run: string): Master {
  return published(a, run).size > 0 ? a : b;
}

/** Asserts that exactly one of the two recorded `run` as published by the other, naming it. */
export function assertOneRemembered(a: Master, b: Master, run: string, publisher: Master): void {
  const other = publisher === a ? b : a;
  const ro = records(other).get(run);
  assert.equal(ro?.published_by, publisher.name, `${other.dir}'s record of ${run}: ${JSON.stringify(ro)}`);
  assert.equal(ro?.sent, 0);
  assert.equal(records(publisher).get(run)?.published_by, undefined, `${publisher.dir} published ${run} itself`);
}
