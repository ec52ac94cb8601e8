// One invocation per state directory: flock(2) on STATE/lock, taken through the
// util-linux flock(1) tool on a descriptor this process keeps open. The kernel
// drops the lock when the last holder of that descriptor dies, however it dies;
// the stages inherit it, so stray stages of a killed runner keep it too. Seen from
// outside (status, the metrics), without taking it: lockNow.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { ioError } from '../../core/errors.js';

/** A held lock: the open descriptor to pass to children as fd 3. */
export interface Lock {
  fd: number;
  file: string;
}

/** The lock is held by someone else; `holder` describes them as well as we know. */
export class Locked extends Error {
  constructor(
    readonly file: string,
    readonly holder: string,
  ) {
    super(`${file} is locked by ${holder}`);
    this.name = 'Locked';
  }
}

/**
 * Takes the lock on `file` without waiting, and writes this process's pid, host
 * and start time into it. Throws Locked when another process holds it, a
 * DataError when flock cannot be run.
 */
export function acquireLock(file: string): Lock {
  let fd: number;
  try {
    // a+: create if missing, never truncate what the holder wrote before we hold the lock.
    fd = fs.openSync(file, 'a+', 0o644);
  } catch (err) {
    throw ioError(err, file, 'open the lock file');
  }
  const r = spawnSync('flock', ['--nonblock', '--conflict-exit-code', '75', '3'], {
    stdio: ['ignore', 'ignore', 'pipe', fd],
  });
  if (r.error || (r.status !== 0 && r.status !== 75)) {
    fs.closeSync(fd);
    const why = r.error ? ((r.error as NodeJS.ErrnoException).code ?? r.error.message) : r.stderr.toString().trim() || `exit ${r.status}`;
    throw ioError(new Error(`cannot run flock (util-linux): ${why}`), file, 'lock');
  }
  if (r.status === 75) {
    // A holder that has only just taken the lock writes its pid a moment later: until
    // then the file names the previous holder (or none). Give it up to a second.
    let holder = describeHolder(file);
    for (let i = 0; i < 50 && !holder.live; i++) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      holder = describeHolder(file);
    }
    fs.closeSync(fd);
    throw new Locked(file, holder.text);
  }
  const info = `pid=${process.pid} host=${os.hostname()} started=${new Date().toISOString()} cmd=reflog-to-yacobot-queue\n`;
  try {
    fs.ftruncateSync(fd, 0);
    fs.writeSync(fd, info);
  } catch (err) {
    fs.closeSync(fd);
    throw ioError(err, file, 'write the holder into the lock file');
  }
  return { fd, file };
}

/**
 * What the lock file says about its holder, checked against /proc when it names a
 * pid; `live` when it names a process that has not ended.
 */
function describeHolder(file: string): { text: string; live: boolean } {
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    /* unreadable: say so below */
  }
  const pid = /pid=(\d+)/.exec(text)?.[1];
  if (!pid) return { text: 'another process (it has not written its pid yet)', live: false };
  const started = /started=(\S+)/.exec(text)?.[1];
  const host = /host=(\S+)/.exec(text)?.[1];
  const gone = host === os.hostname() && !fs.existsSync(`/proc/${pid}`);
  const says =
    `process ${pid}${host ? ` on ${host}` : ''}${started ? `, running since ${started}` : ''}` +
    (gone ? ' (that process has ended; stages it started still hold the lock)' : '');
  return { text: says, live: !gone };
}

/** Whether a process holds STATE/lock, and what the lock file says of it. */
export interface LockState {
  held: boolean;
  pid: number | null;
  host: string | null;
  since: string | null;
}

/**
 * Whether `file` is flock'ed now, from /proc/locks (read only: trying the lock would
 * take it for a moment, and a runner starting then would exit 75), and its holder as
 * the lock file names it. Without /proc/locks: whether the pid it names is alive.
 */
export function lockNow(file: string): LockState {
  let text = '';
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file, { throwIfNoEntry: false });
    if (st !== undefined) text = fs.readFileSync(file, 'utf8');
  } catch {
    /* unreadable: not held as far as can be told */
  }
  const pidText = /pid=(\d+)/.exec(text)?.[1];
  const pid = pidText === undefined ? null : Number(pidText);
  const holder = { pid, host: /host=(\S+)/.exec(text)?.[1] ?? null, since: /started=(\S+)/.exec(text)?.[1] ?? null };
  if (st === undefined) return { held: false, pid: null, host: null, since: null };
  const held = flockedNow(st) ?? (pid !== null && fs.existsSync(`/proc/${pid}`));
  return held ? { held, ...holder } : { held, pid: null, host: null, since: null };
}

/** Whether /proc/locks lists a FLOCK on the file of `st`; null when /proc/locks cannot be read. */
function flockedNow(st: fs.Stats): boolean | null {
  let locks: string;
  try {
    locks = fs.readFileSync('/proc/locks', 'utf8');
  } catch {
    return null;
  }
  // major:minor:inode, major and minor in hex (the kernel's encoding of st_dev).
  const major = ((st.dev >> 8) & 0xfff).toString(16).padStart(2, '0');
  const minor = ((st.dev & 0xff) | ((st.dev >> 12) & 0xfff00)).toString(16).padStart(2, '0');
  const id = `${major}:${minor}:${st.ino}`;
  return locks.split('\n').some((l) => l.includes(' FLOCK ') && l.split(/\s+/).includes(id));
}
