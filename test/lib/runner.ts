// Helpers of the runner's tests: the runner run for real in scratch directories (one
// scratch root per test file), the fixture state they start from, and the uninterrupted
// runs they compare with.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, RUNNER, partnerDb, scratch, testEnv } from './run.js';
import { snapshot } from './runner-state.js';
import { generateReflog } from '../../scripts/gen-reflog.js';

export const REFLOGS = path.join(ROOT, 'fixtures', 'reflogs');
export const RUNS = fs
  .readdirSync(REFLOGS)
  .filter((f) => f.endsWith('.reflog'))
  .sort();

export interface Done {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  ms: number;
}

/**
 * Runs the runner in `dir` (its own process group); `killAfter` ms: SIGKILL the group
 * then; `termWhen`: SIGTERM (or `termSignal`) the runner alone (as `kill PID` or a
 * supervisor would) as soon as it returns true (polled every 5 ms).
 */
export function runner(
  dir: string,
  args: string[] = [],
  opts: { killAfter?: number; termWhen?: () => boolean; termSignal?: NodeJS.Signals; env?: Record<string, string>; started?: (pid: number) => void } = {},
): Promise<Done> {
  const t0 = Date.now();
  const child = spawn(RUNNER, args, { cwd: dir, env: testEnv(opts.env ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  opts.started?.(child.pid!);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let timer: NodeJS.Timeout | undefined;
  if (opts.killAfter !== undefined) {
    timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* finished already */
      }
    }, opts.killAfter);
  }
  if (opts.termWhen !== undefined) {
    const poll = setInterval(() => {
      if (!opts.termWhen!()) return;
      clearInterval(poll);
      try {
        process.kill(child.pid!, opts.termSignal ?? 'SIGTERM');
      } catch {
        /* finished already */
      }
    }, 5);
    child.on('close', () => clearInterval(poll));
  }
  return new Promise((resolve) => {
    child.on('close', (status, signal) => {
      if (timer) clearTimeout(timer);
      // A SIGKILLed group's stages may outlive the runner by a moment; the lock tells when all are gone.
      spawnSync('flock', ['-w', '10', path.join(dir, 'var/state/lock'), 'true']);
      resolve({ status, signal, stderr, ms: Date.now() - t0 });
    });
  });
}

/** The pids of the processes whose command line (arguments joined by spaces) passes `test`. */
export function processesWhere(test: (cmd: string) => boolean): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (test(fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' '))) out.push(Number(e));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Whether some process's command line (arguments joined by spaces) passes `test`. */
export function processRunning(test: (cmd: string) => boolean): boolean {
  return processesWhere(test).length > 0;
}

/** One scratch root for the whole test file (one exit hook), a fresh subdirectory per use. */
let root: string | null = null;
export function sub(prefix: string): string {
  root ??= scratch('ms-runner-');
  return fs.mkdtempSync(path.join(root, prefix));
}

/** A scratch dir with the fixture reflogs in var/inbox and a database with three Yacobots. */
let template: string | null = null;
export function fresh(): string {
  if (template === null) {
    template = sub('tpl-');
    fs.mkdirSync(path.join(template, 'var/inbox'), { recursive: true });
    fs.mkdirSync(path.join(template, 'var/state'), { recursive: true });
    for (const f of RUNS) fs.copyFileSync(path.join(REFLOGS, f), path.join(template, 'var/inbox', f));
    const db = path.join(template, 'var/state/partner.db');
    partnerDb(template, db, 'init');
    for (const [n, w] of [
      ['alpha', '1'],
      ['beta', '1'],
      ['gamma', '2'],
    ])
      partnerDb(template, db, 'add', n!, '--weight', w!);
  }
  const dir = sub('run-');
  fs.cpSync(template, dir, { recursive: true });
  return dir;
}

/** The uninterrupted run everything is compared with. */
export interface Reference {
  dir: string;
  snap: Record<string, string>;
  ms: number;
  stderr: string;
}

/** The uninterrupted run of the directory `make` gives, run once on first use and shared. */
export function sharedRun(make: () => string): () => Promise<Reference> {
  let reference: Reference | null = null;
  return async () => {
    if (reference === null) {
      const dir = make();
      const r = await runner(dir);
      assert.equal(r.status, 0, r.stderr);
      reference = { dir, snap: snapshot(dir), ms: r.ms, stderr: r.stderr };
    }
    return reference;
  };
}

export const ref = sharedRun(fresh);

/** Leaves only the named reflogs in the inbox of `dir`. */
export function keepOnly(dir: string, ...names: string[]): void {
  for (const f of RUNS) if (!names.includes(f)) fs.rmSync(path.join(dir, 'var/inbox', f));
}

/**
 * A fresh directory whose first two fixture hours were committed, each by its own
 * invocation with `args`, with the third in the inbox; DIR/older is STATE/`file` as the
 * first hour left it.
 */
export async function twoHoursCommitted(args: string[], file: string): Promise<string> {
  const dir = fresh();
  keepOnly(dir, RUNS[0]!);
  for (const next of [RUNS[1]!, RUNS[2]!]) {
    const r = await runner(dir, args);
    assert.equal(r.status, 0, r.stderr);
    if (next === RUNS[1]) fs.copyFileSync(path.join(dir, 'var/state', file), path.join(dir, 'older'));
    fs.copyFileSync(path.join(REFLOGS, next), path.join(dir, 'var/inbox', next));
  }
  return dir;
}

/** The run of the first fixture reflog (its name without .reflog). */
export const RUN0 = RUNS[0]!.replace(/\.reflog$/, '');

/** A fresh directory with only the first fixture reflog in its inbox. */
export function freshFirstOnly(): string {
  const dir = fresh();
  keepOnly(dir, RUNS[0]!);
  return dir;
}

/** A copy of directory `from` in a fresh one (a state to start from, left as it was). */
export function copyOf(from: string): string {
  const dir = sub('run-');
  fs.cpSync(from, dir, { recursive: true, verbatimSymlinks: true });
  return dir;
}

/**
 * The uninterrupted run of the first fixture reflog alone (freshFirstOnly): what a test
 * that starts after that hour copies, instead of running it again.
 */
export const ref1 = sharedRun(freshFirstOnly);

/** The Yacobots take (remove) their queue files of `run`. */
export function takeQueueFiles(dir: string, run: string): void {
  for (const id of ['1', '2', '3']) fs.rmSync(path.join(dir, 'var/queue', id, `${run}.tsv`), { force: true });
}

/** Writes INBOX/NAME.reflog: the leading header line, then one record per (timestamp, url). */
export function writeReflog(dir: string, name: string, records: [string, string][]): void {
  const lines = records.map(([ts, url], i) => `1000\t0\t${ts}\t${i}\t${url}\t1\n`);
  fs.writeFileSync(path.join(dir, 'var/inbox', `${name}.reflog`), `reflog-dump v2\n${lines.join('')}`);
}

const bigReflogs = new Map<number, string>(); // generated once per size (the same seed gives the same bytes)
/** A state whose inbox holds one generated reflog of `lines` lines (60,000: over 4 MiB). */
export function freshBig(lines = 60_000): string {
  const dir = fresh();
  keepOnly(dir);
  const reflog = path.join(dir, 'var/inbox/2011072806.reflog');
  let made = bigReflogs.get(lines);
  if (made === undefined) {
    made = path.join(sub('big-'), 'h.reflog');
    const fd = fs.openSync(made, 'w');
    generateReflog(fd, { lines, hour: 1, seed: 3 });
    fs.closeSync(fd);
    bigReflogs.set(lines, made);
  }
  fs.copyFileSync(made, reflog);
  assert.ok(fs.statSync(reflog).size > (lines / 15_000) << 20);
  return dir;
}

/** The runner's warning lines in `stderr`. */
export function warningLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('reflog-to-yacobot-queue: warning: '));
}

let secondHourTemplate: string | null = null;
/**
 * A state dir after hour 1 of a generated pair, with hour 2 in the inbox, and the
 * environment in which hour 2 fails in its last stage: logsaver cannot rename its queue
 * files into place (EIO), after upload-domains committed its new domains and ended.
 * (A failing join-current no longer does: its cut output makes upload-domains fail
 * before its commit.)
 */
export async function failingSecondHour(): Promise<{ dir: string; env: Record<string, string> }> {
  // Hour 1 runs once per file; each test gets a copy of what it left.
  if (secondHourTemplate === null) {
    const dir = fresh();
    keepOnly(dir);
    for (const hour of [1, 2]) {
      const fd = fs.openSync(path.join(dir, `var/inbox/201107280${4 + hour}.reflog`), 'w');
      generateReflog(fd, { lines: 20_000, hour, seed: 5 });
      fs.closeSync(fd);
    }
    fs.renameSync(path.join(dir, 'var/inbox/2011072806.reflog'), path.join(dir, 'hour2'));
    assert.equal((await runner(dir)).status, 0);
    fs.renameSync(path.join(dir, 'hour2'), path.join(dir, 'var/inbox/2011072806.reflog'));
    secondHourTemplate = dir;
  }
  const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/fail-publish.js')).href;
  return { dir: copyOf(secondHourTemplate), env: { NODE_OPTIONS: `--import=${preload}`, FAIL_PUBLISH: '1' } };
}
