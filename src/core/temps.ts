// Temporary files: names that tell which process of which host made them, the ones
// to remove when the process exits, and the sweep of those that killed processes left.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** Temporary files to remove if the process exits before they are committed. */
export const liveTempFiles = new Set<string>();

/**
 * The tag in temporary names of the pid space this process lives in: 8 hex digits of
 * the FNV-1a hash of the host name, the kernel's boot id and the pid namespace (any of
 * them stays a safe file name). A pid names a process only within one pid namespace of
 * one boot of one kernel: a container with its own pid namespace (even one with the
 * host's name, as with --network host) or another host with the same name sharing
 * --tmp gets another tag, so removeStaleTemps never judges its files by a pid that
 * means another process here. Where /proc cannot be read, the host name alone.
 */
export const HOST_TAG = (() => {
  const read = (f: () => string) => {
    try {
      return f();
    } catch {
      return '';
    }
  };
  const boot = read(() => fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  const pidNs = read(() => fs.readlinkSync('/proc/self/ns/pid'));
  let h = 0x811c9dc5;
  for (const c of Buffer.from(`${os.hostname()}\n${boot}\n${pidNs}`, 'utf8')) h = Math.imul(h ^ c, 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
})();

/**
 * A name for a temporary file: `prefix`, this process's pid and HOST_TAG, as
 * `${prefix}${pid}-${HOST_TAG}`. A SIGKILL or a crash leaves such a file behind with
 * no process to remove it; removeStaleTemps finds it by that name.
 */
export function ownedTempName(prefix: string): string {
  return `${prefix}${process.pid}-${HOST_TAG}`;
}

/** ownedTempName(prefix) and a dash, for a name that goes on (mkdtemp's random part, a file name). */
export function ownedTempPrefix(prefix: string): string {
  return `${ownedTempName(prefix)}-`;
}

/**
 * Told each path removeStaleTemps removes: a stage logs a warning (set by the stage
 * runner), so that an operator learns a run was killed.
 */
export const staleTemps = { report: (_removed: string): void => {} };

/**
 * Removes the entries of `dir` named by ownedTempPrefix(prefix) on this host whose
 * process has ended (left by a stage that was SIGKILLed or crashed); returns their
 * paths. A pid that is alive (or reused: it cannot be told apart) keeps its files;
 * the files of other hosts (a shared --tmp), other boots and other pid namespaces
 * (containers) carry another HOST_TAG and are never touched, nor is an entry of another
 * user or a symbolic link (a stage makes neither). Errors are ignored: an
 * unreadable directory or an entry another process removes first is not this run's
 * concern.
 */
export function removeStaleTemps(dir: string, prefix: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const m = /^(\d+)-([0-9a-f]{8})(?:-|$)/.exec(name.slice(prefix.length));
    if (!m || m[2] !== HOST_TAG) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || processAlive(pid)) continue;
    const p = path.join(dir, name);
    try {
      // Only what a stage of this user made: in a shared, world-writable directory (the
      // system temp dir) anyone can give an entry such a name, and a stage run as root
      // would otherwise remove another user's files, walking directories they control.
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink() || (process.getuid !== undefined && st.uid !== process.getuid())) continue;
      fs.rmSync(p, { recursive: true, force: true });
      removed.push(p);
      staleTemps.report(p);
    } catch {
      /* not ours to remove after all (permissions): left as it was */
    }
  }
  return removed;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}

export function removeQuietly(file: string): void {
  try {
    fs.rmSync(file, { force: true, recursive: true });
  } catch {
    /* best effort on the way out */
  }
}
