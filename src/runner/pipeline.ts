// Runs the stages of one run as child processes in the runner's own process group
// (a SIGKILL to the group takes them all): domains-from-db and, beside it, the chain
// as one bash pipeline, its upload-domains held until domains-from-db has ended; on a
// signal, stops them and lets the runner exit only after they have. Each stage's
// stderr goes to its own log file; the lock descriptor is inherited as fd 3 so the
// lock outlives a runner killed alone.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { GATE_FD, REFLOG_HEAD_BYTES, chainOf, pipelineScript, readStageLog, stageLog, stageText, type RunPaths, type StageOutcome } from './plan.js';
import type { RunnerOptions } from './options.js';
import { ioError } from '../core/errors.js';

/**
 * The stages' environment: `base` plus glibc's MALLOC_MMAP_THRESHOLD_ held at its
 * initial 128 KiB, unless the operator set it. Left alone, glibc raises that
 * threshold each time it frees a large block, and from then on analyze-dump's
 * 1-4 MiB buffers come from heap arenas that are never given back: at 10M lines
 * its peak RSS crept through the run to 460-474 MiB, against 393 MiB and flat
 * with the variable set, at the same speed (1M-line pipeline: 4.03-4.70 s
 * without, 4.03-4.45 s with, interleaved). Other C libraries ignore it.
 *
 * Also MALLOC_TRIM_THRESHOLD_ at 8 MiB, unless set: setting the mmap threshold
 * fixes the trim threshold at its 128 KiB too, and glibc then gave the top of
 * the heap back to the system and faulted it in again over and over (the 64 KiB
 * blocks the stages read and write). analyze-dump alone on the 1M hour: 80-83k
 * page faults and 2.77-2.81 CPU s with it, against 107-119k and 2.99-3.04 s
 * without; the 1M chain, five interleaved pairs: 3.33-3.37 s against 3.45-3.53 s.
 * Peak RSS: --memory 64M at 10M lines 170 MiB against 173; the default budget
 * 362 MiB against 349.
 */
export function stageEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...base,
    MALLOC_MMAP_THRESHOLD_: base.MALLOC_MMAP_THRESHOLD_ ?? String(128 << 10),
    MALLOC_TRIM_THRESHOLD_: base.MALLOC_TRIM_THRESHOLD_ ?? String(8 << 20),
  };
}

/**
 * Children currently running, so a signal handler can stop them: a stage itself, or
 * the bash that runs the chain (whose children are the stages).
 */
const liveChildren = new Map<ChildProcess, 'stage' | 'shell'>();

/** Shells whose children are being stopped: the timer that repeats it until the shell exits. */
const stopping = new Map<ChildProcess, NodeJS.Timeout>();

/** The signal the stages are being stopped with, once a stop began (SIGTERM, then SIGKILL). */
let stopSignal: NodeJS.Signals = 'SIGTERM';

/**
 * Sends `sig` to every live stage: a stage the runner started, at once; the stages
 * of a chain, through /proc as the children of its bash, again every 10 ms until
 * that bash has exited (with the latest `sig`: a SIGKILL after a SIGTERM replaces
 * it). Each also gets a SIGCONT, as systemd does: a stopped stage (Ctrl-Z, a
 * debugger gone) would otherwise hold its SIGTERM pending, and a stopped bash
 * would never reap its killed stages and end. The shell itself is left to end when
 * its pipeline has ended: a bash killed while still forking the pipeline would
 * orphan a stage forked after the scan, out of reach of the next one, and that
 * stage would run the whole hour on (commit assignments included) after the runner
 * had exited 143. Kept alive, bash keeps every stage it forks its child, so the
 * next scan finds it. Returns whether anything was running.
 */
export function stopChildren(sig: NodeJS.Signals = 'SIGTERM'): boolean {
  stopSignal = sig;
  for (const [c, kind] of liveChildren) {
    if (c.pid === undefined) continue;
    if (kind === 'stage') {
      stop(c.pid, sig);
      continue;
    }
    const pid = c.pid;
    const sweep = () => {
      for (const k of childPids(pid)) stop(k, stopSignal);
      tryKill(pid, 'SIGCONT');
    };
    sweep();
    if (!stopping.has(c)) stopping.set(c, setInterval(sweep, 10));
  }
  return liveChildren.size > 0;
}

/** `sig`, then SIGCONT so that a stopped process acts on it (SIGKILL needs none). */
function stop(pid: number, sig: NodeJS.Signals): void {
  tryKill(pid, sig);
  if (sig !== 'SIGKILL') tryKill(pid, 'SIGCONT');
}

function tryKill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

function childPids(parent: number): number[] {
  const out: number[] = [];
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return out;
  }
  for (const e of entries) {
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      // Field 4 (ppid) follows the parenthesized command name, which may contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) out.push(Number(e));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

function waitExit(child: ChildProcess, kind: 'stage' | 'shell'): Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }> {
  liveChildren.set(child, kind);
  return new Promise((resolve) => {
    let error: Error | undefined;
    child.on('error', (e) => {
      error = e;
    });
    child.on('close', (code, signal) => {
      liveChildren.delete(child);
      clearInterval(stopping.get(child));
      stopping.delete(child);
      resolve({ code, signal, error });
    });
  });
}

/**
 * Progress of the reflog read, for the terminal display: its size, and how far the
 * chain has read it (the offset of the open file the chain reads, or -1 unknown).
 */
export interface Progress {
  size: number;
  read: () => number;
}

/**
 * Which file a run read as its reflog (st_dev, st_ino, and size and mtime as a
 * sanity check against a number reused after an unlink), as decimal strings: the
 * commit moves the file at the inbox name to done/ only while it is still this one.
 */
export interface ReflogIdentity {
  dev: string;
  ino: string;
  size: string;
  mtime_ns: string;
}

/** The identity of an open file or of a stat result (bigint stats). */
export function reflogIdentity(st: fs.BigIntStats): ReflogIdentity {
  return { dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtime_ns: String(st.mtimeNs) };
}

/** Whether two identities are of the same file, unchanged. */
export function sameFile(a: ReflogIdentity, b: ReflogIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtime_ns === b.mtime_ns;
}

/** `lstat(file)` (bigint), or undefined when it cannot be had. */
function lstatQuiet(file: string): fs.BigIntStats | undefined {
  try {
    return fs.lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/**
 * Which inbox entry the reflog `st` was opened through: the symlink's own identity
 * (lstat) when `file` was the same symlink before and after the open, null when it was
 * the file itself, undefined when that cannot be told (the name changed meanwhile).
 * The reflog step recognises the run's own link by it once its target is gone.
 */
function linkRead(file: string, before: fs.BigIntStats | undefined, st: fs.BigIntStats): ReflogIdentity | null | undefined {
  const after = lstatQuiet(file);
  if (before === undefined || after === undefined) return undefined;
  const link = reflogIdentity(after);
  if (!sameFile(reflogIdentity(before), link)) return undefined;
  if (after.isSymbolicLink()) return link;
  return after.dev === st.dev && after.ino === st.ino ? null : undefined;
}

/** The message of a reflog that cannot be opened; a symlink whose target is gone says so. */
function cannotOpen(file: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code ?? String(err);
  if (code === 'ENOENT' || code === 'ENOTDIR') {
    let target: string | null = null;
    try {
      target = fs.readlinkSync(file);
    } catch {
      /* not a symlink (gone meanwhile) */
    }
    if (target !== null) {
      return `${file}: cannot read: ${code}: it is a symbolic link, and its target ${target} is missing (restore that file, or remove the link from the inbox)`;
    }
  }
  return `${file}: cannot read: ${code}`;
}

/**
 * Runs domains-from-db and, beside it, the chain of one run, whose upload-domains
 * starts only once domains-from-db has ended well. Returns each stage's outcome, in
 * chain order (domains-from-db first), and the identity of the reflog the chain
 * read (null when it did not run to its end) and of the inbox entry it was read
 * through (`reflogLink`, see linkRead), and its first REFLOG_HEAD_BYTES bytes
 * (`head`, null when they could not be read). When domains-from-db fails, or
 * `stopped()` (a signal came) by its end, the chain is stopped with upload-domains
 * never started, and domains-from-db's outcome is the only one. `beforeChain`: a
 * test hook, called just before the chain starts.
 */
export async function runStages(
  o: RunnerOptions,
  p: RunPaths,
  now: string,
  lockFd: number,
  binDir: string,
  progress: Progress,
  stopped: () => boolean = () => false,
  beforeChain?: () => void,
): Promise<{ outcomes: StageOutcome[]; reflog: ReflogIdentity | null; reflogLink: ReflogIdentity | null | undefined; head: Buffer | null }> {
  /** What each stage said on stderr (their last bytes), as the runner read it; index as stageLog's. */
  const tails: StreamTail[] = [];
  const readLog = (i: number, name: string, exit: number): StageOutcome => {
    let text = '';
    try {
      text = fs.readFileSync(stageLog(p, i, name), 'utf8');
    } catch {
      /* the stage never started */
    }
    const t = tails[i];
    return readStageLog(name, exit, t === undefined ? text : stageText(text, t.text(), t.cut));
  };
  const statusOf = (r: { code: number | null; signal: NodeJS.Signals | null }) =>
    r.code ?? (r.signal ? 128 + (os.constants.signals[r.signal] ?? 0) : 1);

  // 0: domains-from-db > staged domain_map. The chain starts beside it, with
  // upload-domains (the map's reader) held at a gate until it has ended well: alone
  // before the chain it kept a core idle for its whole run (0.17 s of the 1M hour).
  // Opened and spawned here, not in the promise: an error (ENOSPC, EMFILE) goes to the
  // caller as it did when domains-from-db ran alone, not to an unhandled rejection.
  let dfdb: ChildProcess;
  {
    const out = openForWriting(p.mapNext);
    try {
      const err = openForWriting(stageLog(p, 0, 'domains-from-db'));
      try {
        // Its stderr through the runner, which writes the log and keeps the last of it:
        // on a full disk the log cannot take the stage's message, and the runner's copy can.
        dfdb = spawn(path.join(binDir, 'domains-from-db'), o.dbArgs, { stdio: ['ignore', out, 'pipe', lockFd], env: stageEnv() });
      } catch (e) {
        fs.closeSync(err);
        throw e;
      }
      tails[0] = new StreamTail(dfdb.stderr!, err);
    } finally {
      fs.closeSync(out);
    }
  }
  const mapDone: Promise<StageOutcome> = waitExit(dfdb, 'stage').then(async (r) => {
    await tails[0]!.ended;
    const s = readLog(0, 'domains-from-db', r.error ? 1 : statusOf(r));
    if (r.error) s.messages.push(`domains-from-db: cannot start: ${r.error.message}`);
    return s;
  });
  /** The outcome when the chain did not run (or was stopped because domains-from-db failed): domains-from-db's, then `more`. */
  const without = async (...more: StageOutcome[]) => {
    const s = await mapDone;
    return { outcomes: s.exit === 0 ? [s, ...more] : [s], reflog: null, reflogLink: undefined, head: null };
  };
  beforeChain?.();
  // A signal that came just now found only domains-from-db to stop: without this,
  // the chain would run the whole hour before the runner saw it.
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  if (stopped()) return without();

  // 1..6: the chain. Its first stage reads the reflog itself, through a descriptor opened
  // here and handed over as its stdin: if this process dies (a SIGKILL of the runner
  // alone), the chain still reads the whole file, never a cut one that it would take
  // for the full hour and act on (upload-domains commits assignments). The runner
  // once copied the reflog into a pipe, and its death ended the chain's input early.
  // Opened without blocking: a FIFO named *.reflog would otherwise hold the runner in
  // open(2), deaf to SIGTERM and holding the lock, until some process wrote to it.
  // Only a regular file can be read again, whole, by the rerun after a crash.
  let inFd: number;
  const linkBefore = lstatQuiet(p.reflog);
  try {
    inFd = fs.openSync(p.reflog, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    return without({ name: 'reflog', exit: 1, summary: null, messages: [cannotOpen(p.reflog, err)] });
  }
  const st = fs.fstatSync(inFd, { bigint: true });
  if (!st.isFile()) {
    fs.closeSync(inFd);
    const what = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'not a regular file';
    return without({
      name: 'reflog',
      exit: 1,
      summary: null,
      messages: [`${p.reflog}: is ${what}: a reflog must be a complete regular file (write it under another name, then rename it into the inbox)`],
    });
  }
  // A sender may rename another file over the inbox name while the chain reads this one.
  const reflog = reflogIdentity(st);
  const reflogLink = linkRead(p.reflog, linkBefore, st);
  progress.size = Number(st.size);
  progress.read = () => fileOffset(inFd);
  const chain = chainOf(o, p, now);
  const bashErr = path.join(p.logs, 'bash.log');
  const errFd = openForWriting(bashErr);
  // The gate: the runner holds its only writing end, so if the runner dies, the gated
  // stage reads the end of it and does not start.
  // Each stage's stderr goes to its log and, through tee, to a descriptor of its own
  // (TEE_FD + its index in the chain), whose last bytes the runner keeps (see StreamTail).
  const child = spawn('bash', ['-c', pipelineScript(chain, binDir, p, 1, 'upload-domains', TEE_FD)], {
    stdio: [inFd, 'pipe', errFd, lockFd, 'pipe', ...chain.map(() => 'pipe' as const)],
    env: stageEnv(),
  });
  fs.closeSync(errFd);
  chain.forEach((_, i) => (tails[1 + i] = new StreamTail(child.stdio[TEE_FD + i] as Readable)));
  const gate = child.stdio[GATE_FD] as Writable;
  gate.on('error', () => {
    /* the chain is gone already: its outcome says why */
  });
  let statuses = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (statuses += d));
  const ended = waitExit(child, 'shell');

  const map = await mapDone;
  const go = map.exit === 0 && !stopped();
  let killer: NodeJS.Timeout | undefined;
  if (go) gate.end('go\n');
  else {
    // Nothing of the chain may go on: upload-domains never started, the rest is stopped
    // (a signal's stop has its own --kill-after; this one gets the same).
    gate.destroy();
    if (!stopped()) {
      stopChildren('SIGTERM');
      killer = setTimeout(() => stopChildren('SIGKILL'), o.killAfterMs);
      killer.unref();
    }
  }
  const r = await ended;
  clearTimeout(killer);
  progress.read = () => -1;
  // Through the chain's own descriptor: the file at the inbox name may be another by now.
  const head = readHead(inFd);
  fs.closeSync(inFd);
  if (!go) {
    // The chain stopped part way: what analyze-dump rejected so far is no run's rejects.
    fs.rmSync(p.rejects, { force: true });
    return { outcomes: [map], reflog: null, reflogLink: undefined, head: null };
  }
  const outcomes: StageOutcome[] = [map];
  const codes = statuses.trim().split(/\s+/).map(Number);
  const bashText = fs.readFileSync(bashErr, 'utf8').trim();
  for (let i = 0; i < chain.length; i++) {
    const known = codes.length === chain.length && Number.isInteger(codes[i]);
    const s = readLog(i + 1, chain[i]!.name, known ? codes[i]! : 1);
    if (!known) s.messages.push(`${chain[i]!.name}: no exit status (bash: ${r.error?.message ?? (bashText || statusOf(r))})`);
    outcomes.push(s);
  }
  return { outcomes, reflog, reflogLink, head };
}

/** Opens `file` to write it anew (a DataError naming it when it cannot: a full disk). */
function openForWriting(file: string): number {
  try {
    return fs.openSync(file, 'w', 0o644);
  } catch (err) {
    throw ioError(err, file, 'create');
  }
}

/** The first descriptor of the chain's stages' stderr copies (after the gate's). */
const TEE_FD = GATE_FD + 1;

/** How much of the end of a stage's stderr the runner keeps. */
const TAIL_BYTES = 1 << 20;

/**
 * The last TAIL_BYTES of a stream (a stage's stderr), and, when given `fd`, a copy of all
 * of it written there (closed at the end) for as long as writes succeed.
 */
class StreamTail {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes were dropped from the start. */
  cut = false;
  readonly ended: Promise<void>;
  constructor(stream: Readable, fd?: number) {
    let file = fd;
    stream.on('data', (b: Buffer) => {
      if (file !== undefined) {
        try {
          fs.writeSync(file, b);
        } catch {
          fs.closeSync(file); // a full disk: the copy here still has it
          file = undefined;
        }
      }
      this.chunks.push(b);
      this.size += b.length;
      while (this.size - this.chunks[0]!.length >= TAIL_BYTES) {
        this.size -= this.chunks.shift()!.length;
        this.cut = true;
      }
    });
    this.ended = new Promise((resolve) =>
      stream.on('close', () => {
        if (file !== undefined) fs.closeSync(file);
        resolve();
      }),
    );
    stream.on('error', () => undefined);
  }
  /** What was kept, or null when the stream said nothing. */
  text(): string | null {
    return this.size === 0 ? null : Buffer.concat(this.chunks).toString('utf8');
  }
}

/** The first REFLOG_HEAD_BYTES bytes of open file `fd` (fewer in a shorter file), or null on a read error. */
function readHead(fd: number): Buffer | null {
  try {
    const b = Buffer.alloc(REFLOG_HEAD_BYTES);
    return b.subarray(0, fs.readSync(fd, b, 0, b.length, 0));
  } catch {
    return null;
  }
}

/**
 * The offset of open file `fd`, shared with the processes it was handed to (Linux
 * /proc/self/fdinfo); -1 where that cannot be read.
 */
function fileOffset(fd: number): number {
  try {
    const m = /^pos:\s*(\d+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'));
    return m ? Number(m[1]) : -1;
  } catch {
    return -1;
  }
}
