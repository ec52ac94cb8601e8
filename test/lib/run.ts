// Runs the real binaries in scratch directories, as an operator would.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export { PROJECT_ROOT as ROOT, BIN_DIR as BIN } from '../../src/core/root.js';
import { PROJECT_ROOT as ROOT, BIN_DIR as BIN } from '../../src/core/root.js';

/** Environment for every spawned stage: fixed zone and collation, bin/ on PATH. */
export function testEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, TZ: 'UTC', LC_ALL: 'C', PATH: `${BIN}:${process.env.PATH}`, ...extra };
}

export interface RunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

/** Runs `bin/<stage> args` with `input` on stdin in `cwd`. */
export function runBin(stage: string, args: string[], input: string | Buffer = '', cwd: string = ROOT, env: Record<string, string> = {}): RunResult {
  const r: SpawnSyncReturns<Buffer> = spawnSync(path.join(BIN, stage), args, {
    input,
    cwd,
    env: testEnv(env),
    maxBuffer: 1 << 28,
    timeout: 120_000,
    // A stage stuck in a synchronous loop never runs its SIGTERM handler: the test
    // must fail then, not hang.
    killSignal: 'SIGKILL',
  });
  if (r.error) throw r.error;
  return {
    status: r.status,
    signal: r.signal,
    stdout: r.stdout.toString('utf8'),
    stderr: r.stderr.toString('utf8'),
    stdoutBytes: r.stdout,
  };
}

/** Runs `partner-db --db DB ...args` in `cwd`, asserting it succeeded; returns its stdout. */
export function partnerDb(cwd: string, db: string, ...args: string[]): string {
  const r = runBin('partner-db', ['--db', db, ...args], '', cwd);
  assert.equal(r.status, 0, `partner-db ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const madeDbs = new Map<string, string>();

/**
 * Makes the partner database `db` (a path from `cwd`) that `partner-db init`, then
 * `partner-db ARGS` for each ARGS of `commands` make, each asserted to succeed: run so
 * once per test process for each list of commands, and copied from there (the same
 * bytes). A list that starts with one made before goes on from a copy of that one's
 * database. A set-up of a few partner-db runs in every test was much of some files' time.
 */
export function madeDb(cwd: string, db: string, commands: string[][] = []): void {
  const made = madeDbOf(commands);
  const to = path.resolve(cwd, db);
  // With any -wal or -shm file beside it (none once the last writer closed it).
  for (const f of fs.readdirSync(path.dirname(made))) if (f.startsWith('p.db')) fs.copyFileSync(path.join(path.dirname(made), f), to + f.slice('p.db'.length));
}

/** The path of the made database of `commands` (see madeDb), making it and each shorter one first. */
function madeDbOf(commands: string[][]): string {
  const key = JSON.stringify(commands);
  let made = madeDbs.get(key);
  if (made !== undefined) return made;
  made = path.join(scratch('ms-db-'), 'p.db');
  if (commands.length === 0) partnerDb(path.dirname(made), made, 'init');
  else {
    madeDb(path.dirname(made), made, commands.slice(0, -1));
    partnerDb(path.dirname(made), made, ...commands[commands.length - 1]!);
  }
  madeDbs.set(key, made);
  return made;
}

/** The cron runner. */
export const RUNNER = path.join(ROOT, 'scripts', 'reflog-to-yacobot-queue');

/** Runs the cron runner with `args` in `cwd` (its defaults put everything under `cwd/var`). */
export function runRunner(cwd: string, args: string[] = [], timeout = 120_000): SpawnSyncReturns<string> {
  return spawnSync(RUNNER, args, { cwd, env: testEnv(), encoding: 'utf8', timeout });
}

const scratchDirs: string[] = [];

/** A fresh scratch directory, removed when the process exits. */
export function scratch(prefix = 'ms-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  // One exit listener for them all: one per directory passed Node's limit of 10 in a test
  // file that makes more, and its MaxListenersExceededWarning went into the suite's output.
  if (scratchDirs.length === 0)
    process.on('exit', () => {
      for (const d of scratchDirs) fs.rmSync(d, { recursive: true, force: true });
    });
  scratchDirs.push(dir);
  return dir;
}

/** The JSON summary line a stage wrote to stderr. */
export function summaryOf(stderr: string): Record<string, unknown> {
  const lines = stderr.split('\n').filter((l) => l.startsWith('{'));
  for (let i = lines.length - 1; i >= 0; i--) {
    const obj = JSON.parse(lines[i]!);
    if (obj.summary) return obj;
  }
  throw new Error(`no summary line in stderr:\n${stderr}`);
}

/** True when stderr looks like a JavaScript stack trace. */
export function hasStackTrace(stderr: string): boolean {
  return /^\s+at .+\(.*:\d+:\d+\)$/m.test(stderr) || /^\s+at .+:\d+:\d+$/m.test(stderr);
}

/** Every file under `dir` (relative paths, sorted), for "nothing else was written" checks. */
export function listFiles(dir: string, rel = ''): string[] {
  if (!fs.existsSync(path.join(dir, rel))) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = path.join(rel, e.name);
    if (e.isDirectory()) out.push(...listFiles(dir, r));
    else out.push(r);
  }
  return out.sort();
}

/**
 * Awaits `done`, a stage blocked on the FIFO `fifo` (opening it, or in a read or write)
 * that was sent a signal; if it has not ended 10 s later, opens the FIFO's other end
 * (`flags`: O_RDONLY for a stage writing, O_WRONLY for one reading) to release it.
 * Returns its result and whether that was needed (the stage did not act on the signal).
 */
export async function awaitWithLateFifoEnd<T>(done: Promise<T>, fifo: string, flags: number): Promise<{ result: T; endCame: boolean }> {
  let endCame = false;
  const late = setTimeout(() => {
    endCame = true;
    try {
      fs.closeSync(fs.openSync(fifo, flags | fs.constants.O_NONBLOCK));
    } catch {
      /* gone already */
    }
  }, 10_000);
  const result = await done;
  clearTimeout(late);
  return { result, endCame };
}

/**
 * What the stdout of a stage that writes a stream holds when it failed (exit 1 or 2)
 * before writing a record: its cut mark, with no LF, which the next stage refuses
 * (src/cli/stage.ts, cutOutput).
 */
export function failedOutput(stage: string): string {
  return `${stage}: failed, output incomplete`;
}

/** Another process holding the database's write lock (BEGIN EXCLUSIVE) for `holdMs`, or until killed. */
export async function lockHolder(work: string, db: string, holdMs: number): Promise<{ done: Promise<number | null>; kill: () => void }> {
  const script = path.join(work, 'hold.cjs');
  fs.writeFileSync(
    script,
    `const Database = require(${JSON.stringify(path.join(ROOT, 'node_modules', 'better-sqlite3'))});
const db = new Database(process.argv[2]);
db.exec('BEGIN EXCLUSIVE');
db.prepare("INSERT INTO partner_domain (domain, yacobot_id, added_at) VALUES ('held.com', 1, 'x')").run();
process.stdout.write('locked\\n');
const hold = Number(process.argv[3]);
if (hold > 0) setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, hold);
else setInterval(() => {}, 1000);
`,
  );
  const child = spawn(process.execPath, [script, db, String(holdMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const done = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => (d.toString().includes('locked') ? resolve() : undefined));
    child.on('exit', (code) => reject(new Error(`lock holder exited early (${code})`)));
  });
  return { done, kill: () => child.kill('SIGKILL') };
}

/** setpriv's arguments that make root run a command as nobody. */
const AS_NOBODY = ['--reuid=nobody', '--regid=nogroup', '--clear-groups'];

/**
 * Whether this process can run `file` as another user, nobody: it is root, setpriv is
 * there and nobody can reach the project. Tests of what a user may not write return
 * early where it cannot.
 */
export function canRunAsNobody(file: string): boolean {
  return process.getuid?.() === 0 && spawnSync('setpriv', [...AS_NOBODY, 'test', '-x', file]).status === 0;
}

/** Runs `file args` as nobody (setpriv), in `cwd`. */
export function runAsNobody(cwd: string, file: string, args: string[] = [], timeout?: number): SpawnSyncReturns<string> {
  return spawnSync('setpriv', [...AS_NOBODY, file, ...args], { cwd, env: testEnv(), encoding: 'utf8', ...(timeout !== undefined && { timeout }) });
}
