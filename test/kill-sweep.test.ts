// The runner killed just before each state-changing system call it makes, one call
// per scenario, then run again: the end must be the uninterrupted run's (SPEC "Runs":
// killed at any instant, a rerun reaches the same final state; at worst a queue file
// is published again, the same bytes). The calls are those of a real, uninterrupted
// run, recorded with strace; each scenario replays that run on a fresh copy of the same
// directory under strace, which SIGKILLs the runner as it enters the chosen call (the
// call is not made; the scenario checks that the call it died in is that one). Then a
// plain run must end with the reference's files (queue files, current_log,
// rejects, done/, inbox, the database's assignments), its directories (no
// temporary file or directory left), one runs.jsonl line per run with a plausible
// `recovered`, the same new_domains, and a second run must change nothing.
//
// What is swept, and what is not:
// - The runner's own process (its main thread, where its synchronous file calls are
//   made), not its stages: at each of its state-changing calls no stage is running
//   (it waits for them to end before its next call), so the runner dying there is what
//   a power loss leaves on disk. The process group is SIGKILLed after it all the
//   same. Kills inside the stages are other tests' (upload-domains at its commit; the
//   group at random instants): what they publish is in the staging area.
// - The calls: rename, link, symlink, unlink, mkdir, rmdir, open with O_CREAT or
//   O_TRUNC, ftruncate, fchmod, copy_file_range, sendfile, and writes to files under
//   the directory. A kill before an fsync leaves on disk what a kill before the next
//   of those calls leaves (SIGKILL does not lose the page cache), so fsyncs are folded
//   into that next call; their order is test/durability.test.ts's business. A call
//   that failed (an rmdir of a directory not yet empty) changed nothing, and is folded
//   the same way.
// - A two-reflog inbox, in two halves from two templates: the first hour on a fresh
//   state directory, the second on the state the first left. From the COMMIT's temp
//   file on (commit, queue:<id> for each Yacobot, current_log, memory, rejects,
//   record, reflog, uncommit, cleanup), the first half sweeps the first and the last
//   call of each kind (system call) at each commit step: where a step repeats a call
//   (per log file, per directory) the ones in between leave states of the same kind.
//   Each Yacobot's queue file is a step of its own, as in the runner: a roll forward
//   decides for each what is left to do from what it finds of it, so a kill between
//   two Yacobots' files is a state of its own (a roll forward that skipped Yacobot 2's
//   file when Yacobot 1's was published showed only when killed before Yacobot 2's
//   rename). The second half sweeps the first call of each step: each step on a state
//   an earlier run left (current_log, runs.jsonl and done/ already there).
//   The calls before the COMMIT leave a run that is redone from scratch, each
//   scenario costing two chains: 4 of them are sampled in the first half and 1 in the
//   second, spread evenly.
// - Small sweeps of what the plain run does not reach, each of its own calls (those
//   the main sweep has are not repeated): a reflog that is a relative symlink, and one
//   whose target is deleted after the run read it (linked anew in done/); a re-sent
//   hour renamed over the inbox name just before the reflog step parks it (put back
//   with link(2)); a failed run (its rejects kept, its line, run.json removed, the
//   last); an error after the commit (the reflog linked back, the summary line marked
//   printed); an inbox on another file system (the reflog copied); a second crash, in
//   a roll forward (queue file 1 copied again, its line) and in the start-up of a rerun
//   (the copies removed, run.json, work/ removed).
// RUNNER_SWEEP=all sweeps every call of each: 241 scenarios instead of 74.
// For development: SWEEP_ONLY=REGEX kills only at those of the chosen calls whose
// `#INDEX CALL` (as SWEEP_LIST=1 lists them, the directory left out) matches, e.g.
// SWEEP_ONLY='rename.*/queue/2/' (indexes shift by a call or two between runs: match the
// call); with --test-name-pattern, only in the sweeps named. SWEEP_ONLY='^$' records
// the references and kills nowhere.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, RUNNER, hasStackTrace, partnerDb, scratch, testEnv } from './lib/run.js';
import { assertSameState, newDomains, runsJsonl, snapshot } from './lib/runner-state.js';

const straceWorks = spawnSync('strace', ['-qq', '-e', 'trace=none', 'true']).status === 0;
const skip = !straceWorks && 'no working strace here';

const REFLOGS = path.join(ROOT, 'fixtures', 'reflogs');
const [R1, R2] = ['2011072806', '2011072807'];

/** The calls that change what is on disk (openat and write: only some of theirs, see changes()). */
const TRACED = [
  'rename',
  'renameat',
  'renameat2',
  'link',
  'linkat',
  'symlink',
  'symlinkat',
  'unlink',
  'unlinkat',
  'mkdir',
  'mkdirat',
  'rmdir',
  'openat',
  'ftruncate',
  'fchmod',
  'copy_file_range',
  'sendfile',
  'write',
  'pwrite64',
  'writev',
  'pwritev',
  'fsync',
  'fdatasync',
];

interface Call {
  sys: string;
  /** Every path it names, as strace's -P matches them: string arguments and descriptors' files (-y). */
  paths: string[];
  ok: boolean;
  text: string;
}

/** The calls of strace output `log` (one process, -y), paths made absolute against `cwd`. */
function parseTrace(log: string, cwd: string): Call[] {
  const calls: Call[] = [];
  for (const line of log.split('\n')) {
    const m = /^(\w+)\((.*)\)\s+= (-?\d+|\?)/.exec(line);
    if (!m) continue;
    const [, sys, args, ret] = m as unknown as [string, string, string, string];
    const paths: string[] = [];
    // Descriptors (-y): `19</a/b>`; AT_FDCWD, which -P does not match, is left out.
    for (const d of args.matchAll(/(?:^|, )(AT_FDCWD)?(?:\d+)?<([^>]*)>/g)) if (!d[1]) paths.push(d[2]!);
    // Path strings (write's data is a string too: it names no path here, and is skipped),
    // each relative one made absolute against the directory descriptor just before it
    // (`unlinkat(7</s/R1>, "run.json", 0)`, as Node 24's rmSync calls it) or the cwd.
    if (!/^(write|pwrite64|writev|pwritev)$/.test(sys)) {
      for (const s of args.matchAll(/(?:(?:^|, )(?:AT_FDCWD|\d+<([^>]*)>), )?"((?:[^"\\]|\\.)*)"/g)) paths.push(path.resolve(s[1] ?? cwd, s[2]!));
    }
    calls.push({ sys, paths, ok: ret === '?' || Number(ret) >= 0, text: line });
  }
  return calls;
}

/** Whether `c` (made in a run under `dir`) changed something on disk there. */
function changes(c: Call, dir: string): boolean {
  if (!c.ok) return false;
  if (c.sys === 'openat') return /O_CREAT|O_TRUNC/.test(c.text);
  if (/^(write|pwrite64|writev|pwritev|ftruncate|fchmod)$/.test(c.sys)) return c.paths.some((p) => p.startsWith(`${dir}/`));
  return !/^f(data)?sync$/.test(c.sys);
}

/**
 * A call to kill the runner at: the `n`th call of `sys` (strace -e
 * inject=SYS:signal=SIGKILL:when=N, which counts per system call and per traced
 * process); for an open or a call on a descriptor, the `n`th on `file` (-P FILE): the
 * runner opens and writes other files (pipes, /proc) a number of times that varies.
 * (-P is not used for the rest: it finds a rename by its source only, and a path that
 * is a symlink when strace starts, an inbox reflog, by its target too.)
 */
interface Target {
  index: number;
  sys: string;
  file: string | null;
  n: number;
  /** The call as recorded, without the directory (for messages). */
  text: string;
}

/** The path by which a target call `c` is found (-P), or null: counted among all calls of its kind. */
function matchedBy(c: Call): string | null {
  return c.sys === 'openat' || ON_FD.test(c.sys) ? c.paths[0]! : null;
}

const ON_FD = /^(write|pwrite64|writev|pwritev|ftruncate|fchmod|fsync|fdatasync)$/;

/** The targets of a recorded run in `dir`: every call that changed something. */
function targets(calls: Call[], dir: string): Target[] {
  const out: Target[] = [];
  calls.forEach((c, index) => {
    if (!changes(c, dir)) return;
    const file = matchedBy(c);
    const n = calls.slice(0, index + 1).filter((d) => d.sys === c.sys && (file === null || matchedBy(d) === file)).length;
    out.push({ index, sys: c.sys, file, n, text: c.text.replaceAll(dir, '') });
  });
  return out;
}

/** Path `p` of a run in `from` as the same run in `to` has it (a path outside named after the directory too). */
function relocate(p: string, from: string, to: string): string {
  return p.replaceAll(from, to).replaceAll(path.basename(from), path.basename(to));
}

interface Done {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** Runs `argv` in `dir` in its own process group; once it ended, SIGKILLs what is left of the group and waits for the lock. */
function run(dir: string, argv: string[], env: Record<string, string> = {}): Promise<Done> {
  const child = spawn(argv[0]!, argv.slice(1), { cwd: dir, env: testEnv(env), detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 120_000);
  return new Promise((resolve) => {
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      try {
        process.kill(-child.pid!, 'SIGKILL'); // a power loss takes the stages too
      } catch {
        /* none left */
      }
      spawnSync('flock', ['-w', '10', path.join(dir, 'var/state/lock'), 'true']);
      resolve({ status, signal, stderr });
    });
  });
}

/** Every directory under `dir`/var (relative), for "no directory left behind". */
function listDirs(dir: string, rel = 'var'): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    out.push(path.join(rel, e.name), ...listDirs(dir, path.join(rel, e.name)));
  }
  return out.sort();
}

let root: string | null = null;
function sub(prefix: string): string {
  root ??= fs.realpathSync(scratch('ms-sweep-'));
  return fs.mkdtempSync(path.join(root, prefix));
}

/** A copy of `template` in a fresh directory. */
function copyOf(template: string, prefix: string): string {
  const dir = sub(prefix);
  fs.cpSync(template, dir, { recursive: true, verbatimSymlinks: true });
  return dir;
}

/**
 * A directory with var/inbox and var/state/partner.db holding three Yacobots (the runner
 * tests' set-up): a copy of one made once per file (four partner-db runs for each sweep
 * gave the same bytes).
 */
let base: string | null = null;
function baseTemplate(): string {
  if (base === null) {
    base = sub('base-');
    fs.mkdirSync(path.join(base, 'var/inbox'), { recursive: true });
    fs.mkdirSync(path.join(base, 'var/state'), { recursive: true });
    const db = path.join(base, 'var/state/partner.db');
    partnerDb(base, db, 'init');
    for (const [n, w] of [
      ['alpha', '1'],
      ['beta', '1'],
      ['gamma', '2'],
    ])
      partnerDb(base, db, 'add', n!, '--weight', w!);
  }
  return copyOf(base, 'tpl-');
}

function addReflog(dir: string, run: string): void {
  fs.copyFileSync(path.join(REFLOGS, `${run}.reflog`), path.join(dir, 'var/inbox', `${run}.reflog`));
}

/** A sweep's reference: the uninterrupted run of its template, with the calls it made. */
interface Reference {
  dir: string;
  calls: Call[];
  snap: Record<string, string>;
  dirs: string[];
  runs: Record<string, unknown>[];
  status: number;
  stderr: string;
}

/** How a sweep runs the runner: its arguments, and an environment made for the directory it runs in. */
interface Setup {
  args?: (dir: string) => string[];
  env?: (dir: string) => Record<string, string>;
  /** Called on each copy of the template before the runner runs there. */
  prepare?: (dir: string) => void;
  /** Where to run instead of a fresh copy of the template (a directory made ready for it). */
  place?: () => string;
}

/** Runs the runner on a copy of `template` under strace, recording its calls; `then`: what follows the run in the reference. */
async function record(template: string, setup: Setup = {}, then?: (dir: string) => Promise<void>): Promise<Reference> {
  const dir = setup.place?.() ?? copyOf(template, 'ref-');
  setup.prepare?.(dir);
  const log = path.join(dir, 'strace.log');
  const r = await run(dir, ['strace', '-qq', '-y', '-o', log, '-e', `trace=${TRACED.join(',')}`, RUNNER, ...(setup.args?.(dir) ?? [])], setup.env?.(dir));
  const calls = parseTrace(fs.readFileSync(log, 'utf8'), dir);
  fs.rmSync(log);
  await then?.(dir);
  return { dir, calls, snap: snapshot(dir), dirs: listDirs(dir), runs: runsJsonl(dir), status: r.status ?? -1, stderr: r.stderr };
}

/**
 * One scenario: a copy of `template`, the runner killed as it enters call `t`; then the
 * next invocation (`recover`, if given: what it does instead), which must end as `ref`
 * did, and, after a recovery that exits 0, another invocation, which must change
 * nothing. Returns the directory and what the killed and the recovering runs printed.
 */
async function killedAt(
  template: string,
  ref: Reference,
  t: Target,
  opts: Setup & { afterKill?: (dir: string) => void; wantStatus?: number; recover?: (dir: string) => Promise<Done>; beforeCheck?: (dir: string) => void } = {},
): Promise<{ dir: string; killed: Done; recovery: Done }> {
  const { dir, killed } = await killOnly(template, ref, t, opts);
  const what = `killed before #${t.index} ${t.text}`;
  opts.afterKill?.(dir);
  const args = opts.args?.(dir) ?? [];
  const recovery = await (opts.recover ?? ((d: string) => run(d, [RUNNER, ...args])))(dir);
  assert.equal(recovery.status, opts.wantStatus ?? 0, `${what}: the next run: ${recovery.stderr}`);
  assert.ok(!hasStackTrace(recovery.stderr), `${what}: ${recovery.stderr}`);
  opts.beforeCheck?.(dir);
  const snap = snapshot(dir);
  assertSameState(snap, ref.snap, what);
  assert.deepEqual(listDirs(dir), ref.dirs, `${what}: the same directories (none left behind)`);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/state/staging')), [], `${what}: staging empty`);
  if ((opts.wantStatus ?? 0) === 0) {
    const lines = runsJsonl(dir);
    const again = await run(dir, [RUNNER, ...args]);
    assert.equal(again.status, 0, `${what}: a second run: ${again.stderr}`);
    assert.match(again.stderr, /nothing to do/, `${what}: a second run`);
    assertSameState(snapshot(dir), snap, `${what}: a second run changed something`);
    assert.deepEqual(runsJsonl(dir), lines, `${what}: a second run recorded something`);
  }
  return { dir, killed, recovery };
}

/** A copy of `template` where the runner was killed as it entered call `t` of `ref`. */
async function killOnly(template: string, ref: Reference, t: Target, setup: Setup = {}): Promise<{ dir: string; killed: Done }> {
  const dir = setup.place?.() ?? copyOf(template, 'k-');
  setup.prepare?.(dir);
  const log = path.join(dir, 'strace.log');
  const only = t.file === null ? [] : ['-P', relocate(t.file, ref.dir, dir)];
  const argv = [
    'strace',
    '-qq',
    '-y',
    '-o',
    log,
    ...only,
    '-e',
    `trace=${t.sys}`,
    '-e',
    `inject=${t.sys}:signal=SIGKILL:when=${t.n}`,
    RUNNER,
    ...(setup.args?.(dir) ?? []),
  ];
  const killed = await run(dir, argv, setup.env?.(dir));
  const what = `killed before #${t.index} ${t.text}`;
  // strace ends as its tracee did; the last call it saw is the one the runner died entering.
  assert.equal(killed.signal, 'SIGKILL', `${what}: the call was reached (${killed.status}): ${killed.stderr}`);
  const last = parseTrace(fs.readFileSync(log, 'utf8'), dir).at(-1);
  fs.rmSync(log);
  assert.ok(last !== undefined && / = \?$/.test(last.text), `${what}: killed in a call: ${last?.text}`);
  assert.deepEqual([last.sys, last.paths], [t.sys, ref.calls[t.index]!.paths.map((p) => relocate(p, ref.dir, dir))], `${what}: killed in that call`);
  return { dir, killed };
}

/**
 * The calls of `ts` a sweep kills at: all of them, or with SWEEP_ONLY=REGEX (for
 * development) those whose `#INDEX CALL` matches; says how many (and which, with
 * SWEEP_LIST set: every call of `ts`, those killed at marked `*`).
 */
function note(t: TestContext, ts: Target[]): Target[] {
  const only = process.env.SWEEP_ONLY;
  const line = (x: Target) => `#${x.index} ${x.text}`;
  const picked = only === undefined ? ts : ts.filter((x) => new RegExp(only).test(line(x)));
  const list = process.env.SWEEP_LIST ? `:\n${ts.map((x) => `${picked.includes(x) ? '*' : ' '} ${line(x)}`).join('\n')}` : '';
  t.diagnostic(`killed before ${picked.length} calls${only === undefined ? '' : ` of ${ts.length} (SWEEP_ONLY)`}${list}`);
  return picked;
}

/** Runs `jobs` two at a time (the machine has two cores), telling each which of the two runs it; every failure is reported, the first thrown. */
async function twoAtATime(jobs: ((worker: number) => Promise<void>)[]): Promise<void> {
  const errors: unknown[] = [];
  let next = 0;
  const worker = async (w: number) => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      await job(w).catch((e: unknown) => errors.push(e));
    }
  };
  await Promise.all([worker(0), worker(1)]);
  if (errors.length > 1) for (const e of errors.slice(1)) console.error(String((e as Error)?.message ?? e));
  if (errors.length > 0) throw errors[0];
}

/** The index of the first call matching `sys` and a path ending in `suffix` (-1: none). */
function callIndex(calls: Call[], sys: RegExp, suffix: string, from = 0): number {
  return calls.findIndex((c, i) => i >= from && sys.test(c.sys) && c.ok && c.paths.some((p) => p.endsWith(suffix)));
}

/**
 * What runs.jsonl's line of `run` must say in `recovered` when the runner was killed
 * before call `k`: redone ('rerun') if killed once its run.json was written and before
 * its COMMIT was; rolled forward if killed after that and before its line was written;
 * nothing if its line was written, or nothing of it had been.
 */
function wantRecovered(calls: Call[], run: string, k: number): string | undefined {
  const runJson = callIndex(calls, /^rename/, `/staging/${run}/run.json`);
  const commit = callIndex(calls, /^rename/, `/staging/${run}/COMMIT`);
  const line = callIndex(calls, /^(write|pwrite64)$/, '/state/runs.jsonl', commit);
  if (k <= runJson || k > line) return undefined;
  return k <= commit ? 'rerun' : 'roll-forward';
}

/** `n` of `ts`, spread evenly (all of them with RUNNER_SWEEP=all). */
function sample<T>(ts: T[], n: number): T[] {
  if (process.env.RUNNER_SWEEP === 'all' || ts.length <= n) return ts;
  const step = ts.length / n;
  return Array.from({ length: n }, (_, i) => ts[Math.floor(i * step + step / 2)]!);
}

/** The targets of `ts` that pass `keep` (all of them with RUNNER_SWEEP=all): a small sweep's own calls, not the main sweep's again. */
function only(ts: Target[], keep: (t: Target) => boolean): Target[] {
  return process.env.RUNNER_SWEEP === 'all' ? ts : ts.filter(keep);
}

/**
 * The commit step (docs/design.md, "The commit protocol") of each call of
 * `run` in `calls` from the COMMIT's temp file on: the steps start, in this order, at
 * the temp file, after the COMMIT's rename (the first Yacobot's queue file), at the
 * rename into place of each further Yacobot's, at the rename of current_log (its
 * copy current_log.last and settings.json with it), after the rename of settings.json
 * (memory.json), after the rename of memory.json, at the open of runs.jsonl, after its write, and at and after
 * the removal of COMMIT. Each Yacobot's queue file is a step of its own, as in the
 * runner (`queue:<id>`): a roll forward decides for each what is left to do from what
 * it finds of it (published, prepared, staged), so the state it starts from differs
 * per Yacobot, not only per call (Yacobot 2 of 3 is the only one with a Yacobot
 * published before it and another still to do).
 */
function commitSteps(calls: Call[], run: string): (index: number) => string {
  const commitTmp = callIndex(calls, /^openat$/, `/staging/${run}/.COMMIT.tmp`);
  const commit = callIndex(calls, /^rename/, `/staging/${run}/COMMIT`, commitTmp);
  const settings = callIndex(calls, /^rename/, '/state/settings.json', commit);
  // A capped run's carry, renamed into place after current_log (none without a cap).
  const carry = callIndex(calls, /^rename/, '/state/carry', commit);
  const memory = callIndex(calls, /^rename/, '/state/memory.json', commit);
  // Each Yacobot's prepared copy renamed to QUEUE/<id>/RUN.tsv (the staged files are removed, not renamed).
  const published = new RegExp(`/queue/(\\d+)/${run}\\.tsv$`);
  const queues = calls.flatMap((c, i): [string, number][] => {
    const id = i > commit && c.ok && /^rename/.test(c.sys) ? published.exec(c.paths[1] ?? '')?.[1] : undefined;
    return id === undefined ? [] : [[`queue:${id}`, i]];
  });
  assert.ok(queues.length > 0, 'queue files published');
  const starts: [string, number][] = [
    ['commit', commitTmp],
    [queues[0]![0], commit + 1],
    ...queues.slice(1),
    ['current_log', callIndex(calls, /^rename/, '/state/current_log', commit)],
    ...(carry > 0 ? [['carry', carry] as [string, number]] : []),
    ['memory', settings + 1],
    ['rejects', memory + 1],
    ['record', callIndex(calls, /^openat$/, '/state/runs.jsonl', commit)],
    ['reflog', callIndex(calls, /^(write|pwrite64)$/, '/state/runs.jsonl', commit) + 1],
    ['uncommit', callIndex(calls, /^unlink/, `/staging/${run}/COMMIT`, commit)],
  ];
  starts.push(['cleanup', starts.at(-1)![1] + 1]);
  for (const [i, [name, at]] of starts.entries())
    assert.ok(at > 0 && (i === 0 || at > starts[i - 1]![1]), `the ${name} step found in order: ${starts.join(' ')}`);
  return (index) => starts.filter(([, at]) => at <= index).at(-1)![0];
}

/**
 * Of targets `ts` (all from the COMMIT's temp file on), the first and the last of each
 * kind of call (system call) at each commit step (all of them with RUNNER_SWEEP=all):
 * where a step repeats a call (an unlink per log file, an rmdir per directory), a kill
 * before one in between leaves a state of the same kind as a kill before the first or
 * the last (some of the staging directory removed). Each Yacobot's queue file being a
 * step (commitSteps), its rename and the removal of its staged file are all swept.
 */
function perStepAndKind(calls: Call[], ts: Target[], run: string): Target[] {
  if (process.env.RUNNER_SWEEP === 'all') return ts;
  const step = commitSteps(calls, run);
  const groups = new Map<string, Target[]>();
  for (const t of ts) groups.set(`${step(t.index)} ${t.sys}`, [...(groups.get(`${step(t.index)} ${t.sys}`) ?? []), t]);
  const keep = new Set([...groups.values()].flatMap((g) => [g[0]!, g.at(-1)!]));
  return ts.filter((t) => keep.has(t));
}

/**
 * Of targets `ts` (all from the COMMIT's temp file on), the first call of each commit
 * step (all of them with RUNNER_SWEEP=all): each step on a state an earlier run left,
 * where the first hour's sweep has every kind of call at each step on a fresh one.
 */
function perStep(calls: Call[], ts: Target[], run: string): Target[] {
  if (process.env.RUNNER_SWEEP === 'all') return ts;
  const step = commitSteps(calls, run);
  return ts.filter((t, i) => i === 0 || step(t.index) !== step(ts[i - 1]!.index));
}

/**
 * The targets of `ref` that the main sweep kills at: from the COMMIT's temp file on, the
 * first and the last of each kind at each commit step (`per` 'kind'), or the first call
 * of each step ('step'); and `before` of those before, spread evenly.
 */
function chosen(ref: Reference, run: string, before: number, per: 'kind' | 'step'): Target[] {
  const all = targets(ref.calls, ref.dir);
  const commitTmp = callIndex(ref.calls, /^openat$/, `/staging/${run}/.COMMIT.tmp`);
  assert.ok(commitTmp > 0, 'the COMMIT was written');
  const after = all.filter((t) => t.index >= commitTmp);
  return [
    ...sample(
      all.filter((t) => t.index < commitTmp),
      before,
    ),
    ...(per === 'kind' ? perStepAndKind : perStep)(ref.calls, after, run),
  ];
}

/** Sweeps the run of `run` on `template` (its inbox holding only that reflog); `recorded`: its reference, recorded already. */
async function sweep(
  t: TestContext,
  template: string,
  run: string,
  before: number,
  per: 'kind' | 'step',
  recorded?: Reference,
  setup: Setup = {},
): Promise<void> {
  const ref = recorded ?? (await record(template, setup));
  assert.equal(ref.status, 0);
  const ts = chosen(ref, run, before, per);
  t.diagnostic(`${targets(ref.calls, ref.dir).length} calls changed something (${ref.calls.length} traced)`);
  const kill = note(t, ts);
  const own = ref.runs.filter((x) => x.run === run);
  assert.equal(own.length, 1);
  await twoAtATime(
    kill.map((x) => async () => {
      const { dir, killed, recovery } = await killedAt(template, ref, x, setup);
      const what = `killed before #${x.index} ${x.text}`;
      const lines = runsJsonl(dir);
      // One line for every run, the earlier runs' as they were.
      assert.deepEqual(lines.slice(0, -1), ref.runs.slice(0, -1), `${what}: earlier lines`);
      assert.equal(lines.length, ref.runs.length, `${what}: one runs.jsonl line per run`);
      const line = lines.at(-1)!;
      assert.equal(line.run, run, what);
      assert.equal(line.status, 'ok', what);
      assert.equal(line.recovered, wantRecovered(ref.calls, run, x.index), `${what}: recovered`);
      assert.deepEqual(newDomains(dir), newDomains(ref.dir), `${what}: new_domains`);
      // Its summary line, printed just before COMMIT's removal: by the killed runner once it
      // got there, by the next run while COMMIT was there; twice only when killed entering
      // that removal, after the print. (The killed runner printed it at its end, and none
      // was printed when it was killed in the cleanup: nothing rolls a run forward then.)
      const uncommitted = callIndex(ref.calls, /^unlink/, `/staging/${run}/COMMIT`);
      const printed = (d: Done) => d.stderr.split('\n').filter((l) => l.startsWith(`reflog-to-yacobot-queue: ${run}: `)).length;
      assert.equal(printed(killed), x.index >= uncommitted ? 1 : 0, `${what}: summary line of the killed run: ${killed.stderr}`);
      assert.equal(printed(recovery), x.index <= uncommitted ? 1 : 0, `${what}: summary line of the next run: ${recovery.stderr}`);
    }),
  );
}

/** A first-hour run on a fresh state directory: its template and its recorded reference (one per file: the first hour's sweep, the second hour's start, and the sweeps that start from one of its kills). */
let firstHour: { template: string; ref: Reference } | null = null;
async function firstHourRef(): Promise<{ template: string; ref: Reference }> {
  if (firstHour === null) {
    const template = baseTemplate();
    addReflog(template, R1);
    const ref = await record(template);
    assert.equal(ref.status, 0);
    firstHour = { template, ref };
  }
  return firstHour;
}

test('killed before each state-changing call of the first hour on a fresh state directory: the next run ends as an uninterrupted one', { skip }, async (t) => {
  const first = await firstHourRef();
  await sweep(t, first.template, R1, 4, 'kind', first.ref);
});

test('killed before each state-changing call of the second hour: the next run ends as an uninterrupted one', { skip }, async (t) => {
  // On what the first hour's uninterrupted run left (a copy of it).
  const template = copyOf((await firstHourRef()).ref.dir, 'tpl-');
  addReflog(template, R2);
  await sweep(t, template, R2, 1, 'step');
});

test("a capped run (--max-per-domain), killed before each state-changing call of its second hour: the carry and current_log end as the uninterrupted run's, together", {
  skip,
}, async (t) => {
  // The first hour carried URLs over; the second merges them with its own and carries some on.
  const capped: Setup = { args: () => ['--max-per-domain', '3', '--carry-keep', '1d'] };
  const first = baseTemplate();
  addReflog(first, R1);
  const ref1 = await record(first, capped);
  assert.equal(ref1.status, 0, ref1.stderr);
  assert.ok(fs.statSync(path.join(ref1.dir, 'var/state/carry')).size > 0, 'the first hour carried URLs over');
  const template = copyOf(ref1.dir, 'tpl-');
  addReflog(template, R2);
  const ref = await record(template, capped);
  assert.ok(callIndex(ref.calls, /^rename/, '/state/carry') > 0, 'the carry is committed');
  assert.ok((ref.runs.at(-1)!.carried_in as number) > 0 && (ref.runs.at(-1)!.carried_out as number) > 0);
  await sweep(t, template, R2, 2, 'step', ref, capped);
});

/** The targets of `ref` from call `from` up to, not including, call `to`. */
function between(ref: Reference, from: number, to: number): Target[] {
  assert.ok(from >= 0 && to > from, `calls ${from}..${to}`);
  return targets(ref.calls, ref.dir).filter((t) => t.index >= from && t.index < to);
}

/** The targets of `ref` from call `from` up to, not including, the removal of R1's COMMIT (the reflog step and what precedes it there). */
function untilCommitRemoved(ref: Reference, from: number): Target[] {
  return between(ref, from, callIndex(ref.calls, /^unlink/, `/staging/${R1}/COMMIT`));
}

/** A base template whose R1 reflog is a relative symlink to var/incoming/x.reflog. */
function linkedReflogTemplate(): string {
  const template = baseTemplate();
  fs.mkdirSync(path.join(template, 'var/incoming'));
  fs.copyFileSync(path.join(REFLOGS, `${R1}.reflog`), path.join(template, 'var/incoming/x.reflog'));
  fs.symlinkSync('../incoming/x.reflog', path.join(template, 'var/inbox', `${R1}.reflog`));
  return template;
}

test('a reflog that is a relative symlink, killed before each call of its reflog step: it ends in done/ as a link to the file it read', {
  skip,
}, async (tc) => {
  const template = linkedReflogTemplate();
  const ref = await record(template);
  assert.equal(ref.status, 0);
  const park = callIndex(ref.calls, /^rename/, `/inbox/${R1}.reflog`);
  // done/ made is the main sweep's.
  const ts = only(untilCommitRemoved(ref, park), (t) => !t.sys.startsWith('mkdir'));
  assert.ok(
    ts.some((t) => t.sys.startsWith('symlink')),
    'the link is made anew in done/',
  );
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir } = await killedAt(template, ref, t);
      const what = `killed before #${t.index} ${t.text}`;
      const done = path.join(dir, 'var/state/done', `${R1}.reflog`);
      assert.ok(fs.lstatSync(done).isSymbolicLink(), `${what}: done/ holds a link`);
      assert.equal(fs.readlinkSync(done), path.join(dir, 'var/incoming/x.reflog'), what);
      const lines = runsJsonl(dir);
      assert.deepEqual(
        lines.map((x) => [x.run, x.status, x.recovered]),
        [[R1, 'ok', wantRecovered(ref.calls, R1, t.index)]],
        what,
      );
    }),
  );
});

test('a re-sent hour renamed over the inbox name just before the reflog step parks it, killed before each call from there: it is put back, and processed next', {
  skip,
}, async (tc) => {
  // The run's own file is gone (replaced); the step parks the newcomer, sees it is not
  // the run's, and links it back. It is the same hour with an empty line more (a skip),
  // so that its run sends nothing new and done/ shows which file went there.
  const template = baseTemplate();
  addReflog(template, R1);
  fs.writeFileSync(path.join(template, 'newcomer'), Buffer.concat([fs.readFileSync(path.join(REFLOGS, `${R1}.reflog`)), Buffer.from('\n')]));
  const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/rename-after-call.js')).href;
  const inboxFile = (dir: string) => path.join(dir, 'var/inbox', `${R1}.reflog`);
  const env = (dir: string) => ({
    NODE_OPTIONS: `--import=${preload}`,
    // Just after the reflog step's look at the inbox name, the runner's first statSync of it.
    RENAME_AFTER_CALL: 'statSync',
    RENAME_ARG: inboxFile(dir),
    RENAME_FROM: path.join(dir, 'newcomer'),
    RENAME_TO: inboxFile(dir),
  });
  // Uninterrupted: the newcomer is put back and waits; the next invocation processes it.
  const ref = await record(template, { env }, async (dir) => {
    assert.ok(fs.readFileSync(inboxFile(dir)).equals(fs.readFileSync(path.join(template, 'newcomer'))), 'the newcomer was put back');
    const next = await run(dir, [RUNNER]);
    assert.equal(next.status, 0, next.stderr);
  });
  assert.equal(ref.status, 0);
  assert.ok(ref.snap[`var/state/done/${R1}.reflog`]?.endsWith('\n\n'), 'done/ holds the newcomer');
  const arrives = callIndex(ref.calls, /^rename/, '/newcomer');
  // Killed before the newcomer arrives, the sender renames it all the same: as killed before the park.
  const ts = only(untilCommitRemoved(ref, arrives), (t) => t.index > arrives);
  assert.ok(
    ts.some((t) => t.sys.startsWith('link')),
    'put back with link(2)',
  );
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir } = await killedAt(template, ref, t, {
        env,
        // The sender renames it whether or not the runner is still there.
        afterKill: (d) => fs.existsSync(path.join(d, 'newcomer')) && fs.renameSync(path.join(d, 'newcomer'), inboxFile(d)),
      });
      const what = `killed before #${t.index} ${t.text}`;
      const lines = runsJsonl(dir);
      assert.deepEqual(
        lines.map((x) => [x.run, x.status, x.recovered]),
        [
          [R1, 'ok', wantRecovered(ref.calls, R1, t.index)],
          [R1, 'ok', undefined],
        ],
        what,
      );
      assert.notEqual(lines[0]!.run_id, lines[1]!.run_id, what);
    }),
  );
});

test('a failed run (its reflog over --max-reject-ratio), killed before each call after its chain: the next attempt fails the same, each attempt recorded once', {
  skip,
}, async (tc) => {
  const template = baseTemplate();
  addReflog(template, R1);
  const args = () => ['--max-reject-ratio', '0'];
  const ref = await record(template, { args });
  assert.equal(ref.status, 1);
  assert.deepEqual(
    ref.runs.map((x) => [x.run, x.status, x.attempt]),
    [[R1, 'failed', 1]],
  );
  assert.ok(ref.snap[`var/state/rejects/failed/${R1}.tsv`], 'its rejects are kept');
  // After the chain: its rejects kept, its line, its staging area removed.
  const all = targets(ref.calls, ref.dir).filter((t) => t.index > callIndex(ref.calls, /^openat$/, `/staging/${R1}/work/log/bash.log`));
  const line = callIndex(ref.calls, /^(write|pwrite64)$/, '/state/runs.jsonl');
  const runJson = callIndex(ref.calls, /^unlink/, `/staging/${R1}/run.json`);
  // Each costs two chains: the rejects kept, the line, run.json removed, and the last.
  const keep = [callIndex(ref.calls, /^rename/, `/staging/${R1}/work/rejects.tsv`), line, runJson, all.at(-1)!.index];
  const ts = process.env.RUNNER_SWEEP === 'all' ? all : all.filter((t) => keep.includes(t.index));
  assert.equal(ts.length, process.env.RUNNER_SWEEP === 'all' ? all.length : 4);
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir } = await killedAt(template, ref, t, { args, wantStatus: 1 });
      const what = `killed before #${t.index} ${t.text}`;
      const lines = runsJsonl(dir);
      // Killed before its line: the next invocation redoes that attempt; after: it was recorded, and the next is a new run.
      const want =
        t.index <= line
          ? [[R1, 'failed', 2, 'rerun']]
          : [
              [R1, 'failed', 1, undefined],
              [R1, 'failed', 1, undefined],
            ];
      assert.deepEqual(
        lines.map((x) => [x.run, x.status, x.attempt, x.recovered]),
        want,
        what,
      );
      assert.equal(new Set(lines.map((x) => x.run_id)).size, lines.length, `${what}: a new run_id for the new run`);
    }),
  );
});

test("an error after the commit (a directory in the way in done/), killed before each call from the reflog step on: every invocation fails the same until it is gone, and the run's line is printed once", {
  skip,
}, async (tc) => {
  // The reflog is linked back to its inbox name (unpark) while the run waits, and the
  // runner marks the run's summary line printed (STATE/staging/RUN/reported).
  const template = baseTemplate();
  addReflog(template, R1);
  const obstacle = (dir: string) => path.join(dir, 'var/state/done', `${R1}.reflog`);
  fs.mkdirSync(obstacle(template), { recursive: true });
  const printed = (...rs: Done[]) => rs.reduce((n, r) => n + r.stderr.split('\n').filter((l) => l.startsWith(`reflog-to-yacobot-queue: ${R1}: `)).length, 0);
  /** One invocation that fails on the obstacle, then, with the obstacle gone, one that finishes. */
  const blockedThenDone = async (dir: string): Promise<Done> => {
    const blocked = await run(dir, [RUNNER]);
    assert.equal(blocked.status, 1, blocked.stderr);
    assert.ok(blocked.stderr.includes(`${obstacle(dir)}: cannot move `), blocked.stderr);
    fs.rmdirSync(obstacle(dir));
    const done = await run(dir, [RUNNER]);
    return { ...done, stderr: blocked.stderr + done.stderr };
  };
  const ref = await record(template, {}, async (dir) => {
    fs.rmdirSync(obstacle(dir));
    const next = await run(dir, [RUNNER]);
    assert.equal(next.status, 0, next.stderr);
    assert.equal(printed(next), 0, `printed by the first invocation only: ${next.stderr}`);
  });
  assert.equal(ref.status, 1);
  const park = callIndex(ref.calls, /^rename/, `/inbox/${R1}.reflog`);
  const ts = between(ref, park, ref.calls.length);
  assert.ok(
    ts.some((t) => t.sys.startsWith('link')),
    'linked back to the inbox',
  );
  // The summary line is written to stderr (a pipe here), then marked printed.
  const lastIndex = (test: (c: Call, i: number) => boolean) => ref.calls.reduce((last, c, i) => (test(c, i) ? i : last), -1);
  const marked = lastIndex((c) => c.ok && c.paths.some((p) => p.endsWith(`/staging/${R1}/reported`)));
  const print = lastIndex(
    (c, i) => i < marked && c.sys === 'write' && c.text.startsWith('write(2<') && c.text.includes(`"reflog-to-yacobot-queue: ${R1.slice(0, 6)}`),
  );
  assert.ok(print > 0 && ts.some((t) => t.index > print && t.index <= marked), 'the printed line is marked');
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir, killed, recovery } = await killedAt(template, ref, t, { recover: blockedThenDone });
      const what = `killed before #${t.index} ${t.text}`;
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status, x.recovered]),
        [[R1, 'ok', undefined]],
        what,
      );
      // Printed once; twice only when killed between the print and its mark (the line
      // comes again rather than not at all).
      assert.equal(printed(killed, recovery), t.index > print && t.index <= marked ? 2 : 1, `${what}: summary lines: ${killed.stderr}${recovery.stderr}`);
    }),
  );
});

test('an inbox on another file system, killed before each call of the reflog step: the reflog is copied to done/ and leaves the inbox, no copy left behind', {
  skip,
}, async (t) => {
  const other = '/dev/shm';
  const template = baseTemplate();
  if (!fs.existsSync(other) || fs.statSync(other).dev === fs.statSync(template).dev) {
    t.skip(`${other} is not a second file system here`);
    return;
  }
  fs.mkdirSync(path.join(template, 'inbox-src'));
  fs.copyFileSync(path.join(REFLOGS, `${R1}.reflog`), path.join(template, 'inbox-src', `${R1}.reflog`));
  const made: string[] = [];
  const inbox = (dir: string) => path.join(other, `ms-sweep-${path.basename(path.dirname(dir))}-${path.basename(dir)}`);
  const setup: Setup = {
    prepare: (dir) => {
      fs.cpSync(path.join(dir, 'inbox-src'), inbox(dir), { recursive: true });
      made.push(inbox(dir));
    },
    args: (dir) => ['--inbox', inbox(dir)],
  };
  try {
    const ref = await record(template, setup);
    assert.equal(ref.status, 0);
    assert.deepEqual(fs.readdirSync(inbox(ref.dir)), []);
    const park = callIndex(ref.calls, /^rename/, `/${R1}.reflog`);
    // The copy's own calls (done/ made is the main sweep's; the copy's ftruncate and
    // fchmod of the file it has just made are as the write that follows).
    const ts = only(untilCommitRemoved(ref, park), (x) => !/^(mkdir|ftruncate|fchmod)/.test(x.sys));
    assert.ok(
      ts.some((x) => /^(copy_file_range|sendfile)$/.test(x.sys)),
      `copied: ${ts.map((x) => x.text).join('\n')}`,
    );
    const kill = note(t, ts);
    await twoAtATime(
      kill.map((x) => async () => {
        const { dir } = await killedAt(template, ref, x, setup);
        const what = `killed before #${x.index} ${x.text}`;
        assert.deepEqual(fs.readdirSync(inbox(dir)), [], `${what}: the inbox is empty, no temporary file left`);
        assert.deepEqual(
          runsJsonl(dir).map((y) => [y.run, y.status, y.recovered]),
          [[R1, 'ok', wantRecovered(ref.calls, R1, x.index)]],
          what,
        );
      }),
    );
  } finally {
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  }
});

/** The first target of `ref` whose call is `sys` on a path ending in `suffix`. */
function targetAt(ref: Reference, sys: RegExp, suffix: string): Target {
  const i = callIndex(ref.calls, sys, suffix);
  const t = targets(ref.calls, ref.dir).find((x) => x.index === i);
  assert.ok(t, `a call ${sys} of ${suffix}`);
  return t;
}

test('a roll forward killed before each of its calls (a second crash): the next one finishes the run the same', { skip }, async (tc) => {
  // Killed once the first queue file was renamed into place and before its staged copy
  // was removed: the roll forward copies that one again (published again, the same
  // bytes), renames the others' prepared copies, and does every later step. The COMMIT
  // names its paths, and the reflog's identity: each scenario runs where that kill was
  // made, on a copy of what it left, the reflog linked back (the same inode).
  const first = await firstHourRef();
  const t1 = targetAt(first.ref, /^unlink$/, `/staging/${R1}/work/queue/1/${R1}.tsv`);
  const reflog = (dir: string) => path.join(dir, 'var/inbox', `${R1}.reflog`);
  const slots = await Promise.all(
    [0, 1].map(async () => {
      const { dir } = await killOnly(first.template, first.ref, t1);
      const saved = sub('saved-');
      fs.cpSync(dir, saved, { recursive: true, verbatimSymlinks: true });
      fs.rmSync(reflog(saved));
      fs.linkSync(reflog(dir), reflog(saved));
      return { dir, saved };
    }),
  );
  const restored = (w: number) => () => {
    const { dir, saved } = slots[w]!;
    fs.rmSync(dir, { recursive: true, force: true });
    fs.cpSync(saved, dir, { recursive: true, verbatimSymlinks: true });
    fs.rmSync(reflog(dir));
    fs.linkSync(reflog(saved), reflog(dir));
    return dir;
  };
  const ref = await record('', { place: restored(0) });
  assert.equal(ref.status, 0);
  assertSameState(ref.snap, first.ref.snap, 'rolled forward');
  // Its own calls: queue file 1 copied again and renamed, its staged file removed, and
  // its line (rolled forward). The others leave what the first run's same steps would
  // (the main sweep's).
  const line = callIndex(ref.calls, /^(write|pwrite64)$/, '/state/runs.jsonl');
  const ts = only(targets(ref.calls, ref.dir), (t) => t.index === line || (/\/queue\/1\//.test(t.text) && !/^(ftruncate|fchmod)/.test(t.sys)));
  assert.ok(
    ts.some((t) => t.sys === 'copy_file_range' && t.text.includes('/queue/1/')),
    'queue file 1 copied again',
  );
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async (w) => {
      const { dir } = await killedAt('', ref, t, { place: restored(w) });
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status, x.recovered]),
        [[R1, 'ok', 'roll-forward']],
        `killed before #${t.index} ${t.text}`,
      );
      assert.deepEqual(newDomains(dir), newDomains(first.ref.dir));
    }),
  );
});

test('the start-up of a rerun killed before each of its calls (a second crash, before the chain runs again): the run is redone the same, its assignments counted once', {
  skip,
}, async (tc) => {
  // Killed after the chain, before the COMMIT: start-up removes the queue-file copies,
  // adds what upload-domains committed to run.json, removes work/, and the run starts
  // again (attempt 2, run.json written again). Inside the removal of work/ the calls
  // are alike (whatever is left of it goes): the first and the last are swept.
  const first = await firstHourRef();
  const { dir: template } = await killOnly(first.template, first.ref, targetAt(first.ref, /^openat$/, `/staging/${R1}/.COMMIT.tmp`));
  const ref = await record(template);
  assert.equal(ref.status, 0);
  assertSameState(ref.snap, first.ref.snap, 'redone');
  // From the first copy removed to run.json written for attempt 2 (the lock and the
  // directories of work/ are the main sweep's): the first copy removed, run.json
  // renamed into place (twice), and the first and last call of work/'s removal.
  const chain = callIndex(ref.calls, /^openat$/, `/staging/${R1}/work/log/bash.log`);
  const from = callIndex(ref.calls, /^unlink$/, '.tsv.publish');
  const rerunJson = ref.calls.reduce((last, c, i) => (i < chain && c.sys === 'rename' && c.paths[1]?.endsWith(`/staging/${R1}/run.json`) ? i : last), -1);
  const all = targets(ref.calls, ref.dir).filter((t) => t.index >= from && t.index <= rerunJson);
  const kind = (t: Target) => (t.text.includes('.tsv.publish') ? 'copies' : t.text.includes(`/staging/${R1}/work/`) ? 'work' : 'run.json');
  const ts = only(all, (t) => {
    const i = all.indexOf(t);
    return (
      t.sys === 'rename' || ((i === 0 || kind(all[i - 1]!) !== kind(t)) && kind(t) !== 'run.json') || (kind(t) === 'work' && kind(all[i + 1] ?? t) !== 'work')
    );
  });
  assert.ok(
    ts.some((t) => t.sys === 'unlink' && t.text.includes('.tsv.publish')),
    'the copies are removed',
  );
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir } = await killedAt(template, ref, t);
      const what = `killed before #${t.index} ${t.text}`;
      // Attempt 2 unless the killed start-up had already written attempt 2 into run.json.
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status, x.recovered, x.attempt]),
        [[R1, 'ok', 'rerun', t.index > rerunJson ? 3 : 2]],
        what,
      );
      assert.deepEqual(newDomains(dir), newDomains(first.ref.dir), `${what}: new_domains`);
    }),
  );
});

test('a symlinked reflog whose target is deleted after the run read it, killed before each call of its reflog step: the link it read ends in done/', {
  skip,
}, async (tc) => {
  const template = linkedReflogTemplate();
  const target = (dir: string) => path.join(dir, 'var/incoming/x.reflog');
  const gone = (dir: string) => path.join(dir, 'gone.reflog');
  const preload = pathToFileURL(path.join(ROOT, 'dist/test/lib/rename-after-call.js')).href;
  // The sender deletes (here: moves out of reach) the target once the COMMIT is written.
  const env = (dir: string) => ({
    NODE_OPTIONS: `--import=${preload}`,
    RENAME_AFTER_CALL: 'renameSync',
    RENAME_ARG: path.join(dir, `var/state/staging/${R1}/.COMMIT.tmp`),
    RENAME_FROM: target(dir),
    RENAME_TO: gone(dir),
  });
  // Put back for the comparison: the snapshot reads done/'s link.
  const restore = (dir: string) => fs.renameSync(gone(dir), target(dir));
  const ref = await record(template, { env }, async (dir) => {
    assert.ok(fs.lstatSync(path.join(dir, 'var/state/done', `${R1}.reflog`)).isSymbolicLink());
    restore(dir);
  });
  assert.equal(ref.status, 0);
  const park = callIndex(ref.calls, /^rename/, `/inbox/${R1}.reflog`);
  const ts = only(untilCommitRemoved(ref, park), (t) => !t.sys.startsWith('mkdir'));
  assert.ok(
    ts.some((t) => t.sys.startsWith('symlink')),
    'linked anew in done/',
  );
  const kill = note(tc, ts);
  await twoAtATime(
    kill.map((t) => async () => {
      const { dir } = await killedAt(template, ref, t, { env, beforeCheck: restore });
      const what = `killed before #${t.index} ${t.text}`;
      assert.equal(fs.readlinkSync(path.join(dir, 'var/state/done', `${R1}.reflog`)), target(dir), what);
      assert.deepEqual(
        runsJsonl(dir).map((x) => [x.run, x.status, x.recovered]),
        [[R1, 'ok', wantRecovered(ref.calls, R1, t.index)]],
        what,
      );
    }),
  );
});
