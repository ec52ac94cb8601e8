// Runs the stages of one run as child processes in the runner's own process group
// (a SIGKILL to the group takes them all): the chain as one bash pipeline, counted
// among the live children that a signal stops (processes.ts). Each stage's stderr
// goes to its own log file; the lock descriptor is inherited as fd 3 so the lock
// outlives a runner killed alone. The reflog is opened here, and read by the chain.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { DB_ENV } from '../../core/secrets.js';
import { REFLOG_HEAD_BYTES } from './reflog-checks.js';
import { chainOf, pipelineScript } from './chain.js';
import { readStageLog, stageText, type StageOutcome } from './stage-log.js';
import { stageLog, type RunPaths } from '../state/layout.js';
import type { RunnerOptions } from '../options/types.js';
import { digestOfFd } from './digest.js';
import { ioError } from '../../core/errors.js';
import { chainRunning, waitExit } from './processes.js';
import { type RunProgress, stageProgressEnv } from './progress.js';
import { type ReflogIdentity, reflogIdentity, sameFile } from '../state/inbox.js';

/**
 * The stages' environment: `base` plus glibc's MALLOC_MMAP_THRESHOLD_ held at its
 * initial 128 KiB, unless the operator set it. Left alone, glibc raises that
 * threshold each time it frees a large block, and from then on analyze-dump's
 * 1-4 MiB buffers come from heap arenas that are never given back: its peak RSS
 * creeps up through a big hour, at no gain in speed. Other C libraries ignore it.
 *
 * Also MALLOC_TRIM_THRESHOLD_ at 8 MiB, unless set: setting the mmap threshold
 * fixes the trim threshold at its 128 KiB too, and glibc would then give the top
 * of the heap back to the system and fault it in again over and over (the 64 KiB
 * blocks the stages read and write), which costs page faults and CPU time.
 */
export function stageEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...base,
    MALLOC_MMAP_THRESHOLD_: base.MALLOC_MMAP_THRESHOLD_ ?? String(128 << 10),
    MALLOC_TRIM_THRESHOLD_: base.MALLOC_TRIM_THRESHOLD_ ?? String(8 << 20),
  };
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
 * Runs the chain of one run. Returns each stage's outcome, in chain order, and the
 * identity of the reflog the chain read (null when it did not run to its end) and of
 * the inbox entry it was read through (`reflogLink`, see linkRead), and its first
 * REFLOG_HEAD_BYTES bytes (`head`, null when they could not be read) and SHA-256
 * (`digest`, null when the chain failed). When
 * `stopped()` (a signal came) before the chain starts, no stage runs and there is no
 * outcome. `beforeChain`: a test hook, called just before the chain starts.
 */
export async function runStages(
  o: RunnerOptions,
  p: RunPaths,
  now: string,
  lockFd: number,
  binDir: string,
  progress: RunProgress,
  stopped: () => boolean = () => false,
  beforeChain?: () => void,
): Promise<{
  outcomes: StageOutcome[];
  reflog: ReflogIdentity | null;
  reflogLink: ReflogIdentity | null | undefined;
  head: Buffer | null;
  digest: string | null;
}> {
  const none = (...outcomes: StageOutcome[]) => ({ outcomes, reflog: null, reflogLink: undefined, head: null, digest: null });
  beforeChain?.();
  // A signal that came just now (its handler runs on a later turn) stops the run here:
  // without this, the chain would run the whole hour before the runner saw it.
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  if (stopped()) return none();
  const input = openReflog(p);
  if ('error' in input) return none({ name: 'reflog', exit: 1, summary: null, messages: [input.error] });
  const { fd: inFd, reflog, reflogLink } = input;
  progress.size = Number(input.size);
  progress.read = () => fileOffset(inFd);
  const chain = chainOf(o, p, now);
  const bashErr = path.join(p.logs, 'bash.log');
  const errFd = openForWriting(bashErr);
  // Each stage's stderr goes to its log and, through tee, to a descriptor of its own
  // (TEE_FD + its index in the chain), whose last bytes the runner keeps (see StreamTail).
  const child = spawn('bash', ['-c', pipelineScript(chain, binDir, p, TEE_FD)], {
    stdio: [inFd, 'pipe', errFd, lockFd, ...chain.map(() => 'pipe' as const)],
    // The database by the environment, not on an argv (bash's or upload-domains'), which `ps` shows.
    env: { ...stageEnv(), ...stageProgressEnv(), [DB_ENV]: o.db },
  });
  fs.closeSync(errFd);
  const tails = chain.map((_, i) => new StreamTail(child.stdio[TEE_FD + i] as Readable));
  progress.chain(chain.map((s) => s.name));
  for (let i = 0; i < chain.length; i++) (child.stdio[TEE_FD + i] as Readable).on('data', (b: Buffer) => progress.feed(i, b));
  let statuses = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (statuses += d));
  chainRunning(child.pid === undefined ? null : { pid: child.pid, stages: chain.map((s) => s.name) });
  const r = await waitExit(child, 'shell');
  chainRunning(null);
  progress.read = () => -1;
  // Through the chain's own descriptor: the file at the inbox name may be another by now.
  const head = readHead(inFd);
  // What names the hour in the claims of hours: the bytes the chain read.
  const digest = r.code === 0 ? digestOfFd(inFd) : null;
  fs.closeSync(inFd);
  const codes = statuses.trim().split(/\s+/).map(Number);
  const bashText = fs.readFileSync(bashErr, 'utf8').trim();
  const outcomes = chain.map((stage, i) => {
    const known = codes.length === chain.length && Number.isInteger(codes[i]);
    const s = readOutcome(p, i + 1, stage.name, known ? codes[i]! : 1, tails[i]!);
    if (!known) s.messages.push(`${stage.name}: no exit status (bash: ${r.error?.message ?? (bashText || statusOf(r))})`);
    return s;
  });
  return { outcomes, reflog, reflogLink, head, digest };
}

/** A process's exit status as a shell gives it (128 + the signal's number for a signal). */
function statusOf(r: { code: number | null; signal: NodeJS.Signals | null }): number {
  return r.code ?? (r.signal ? 128 + (os.constants.signals[r.signal] ?? 0) : 1);
}

/** What stage `name` (number `i` of the chain) said, from its log and the runner's copy of its stderr's end. */
function readOutcome(p: RunPaths, i: number, name: string, exit: number, tail: StreamTail): StageOutcome {
  let text = '';
  try {
    text = fs.readFileSync(stageLog(p, i, name), 'utf8');
  } catch {
    /* the stage never started */
  }
  return readStageLog(name, exit, stageText(text, tail.text(), tail.cut));
}

/**
 * Opens the reflog for the chain, which reads it itself through this descriptor (its
 * stdin): if the runner dies (a SIGKILL of the runner alone), the chain still reads
 * the whole file, never a cut one that it would take for the full hour and act on
 * (upload-domains commits assignments). Opened without blocking: a FIFO named *.reflog
 * would otherwise hold the runner in open(2), deaf to SIGTERM and holding the lock,
 * until some process wrote to it. Only a regular file can be read again, whole, by
 * the rerun after a crash. The error is the message of a run that cannot read it.
 */
function openReflog(p: RunPaths): { fd: number; size: bigint; reflog: ReflogIdentity; reflogLink: ReflogIdentity | null | undefined } | { error: string } {
  let fd: number;
  const linkBefore = lstatQuiet(p.reflog);
  try {
    fd = fs.openSync(p.reflog, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    return { error: cannotOpen(p.reflog, err) };
  }
  const st = fs.fstatSync(fd, { bigint: true });
  if (!st.isFile()) {
    fs.closeSync(fd);
    const what = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : 'not a regular file';
    return { error: `${p.reflog}: is ${what}: a reflog must be a complete regular file (write it under another name, then rename it into the inbox)` };
  }
  // A sender may rename another file over the inbox name while the chain reads this one.
  return { fd, size: st.size, reflog: reflogIdentity(st), reflogLink: linkRead(p.reflog, linkBefore, st) };
}

/** Opens `file` to write it anew (a DataError naming it when it cannot: a full disk). */
function openForWriting(file: string): number {
  try {
    return fs.openSync(file, 'w', 0o644);
  } catch (err) {
    throw ioError(err, file, 'create');
  }
}

/** The first descriptor of the chain's stages' stderr copies (after the lock's, fd 3). */
const TEE_FD = 4;

/** How much of the end of a stage's stderr the runner keeps. */
const TAIL_BYTES = 1 << 20;

/** The last TAIL_BYTES of a stream (a stage's stderr, as its tee copies it). */
class StreamTail {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes were dropped from the start. */
  cut = false;
  constructor(stream: Readable) {
    stream.on('data', (b: Buffer) => {
      this.chunks.push(b);
      this.size += b.length;
      while (this.size - this.chunks[0]!.length >= TAIL_BYTES) {
        this.size -= this.chunks.shift()!.length;
        this.cut = true;
      }
    });
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
