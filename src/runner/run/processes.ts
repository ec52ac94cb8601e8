// The processes of the runner's runs: the children it started (a stage, or the bash of
// a chain and its stages), stopping them on a signal or at --max-run-time, and which
// stages of a chain still run (/proc).
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The chain that runs now: its bash's pid and its stages' names in chain order. */
export interface RunningChain {
  pid: number;
  stages: readonly string[];
}

/** A stage process still running: its name, and whether it is stopped (SIGSTOP, Ctrl-Z). */
export interface LiveStage {
  name: string;
  stopped: boolean;
}

/**
 * Children currently running, so a signal handler can stop them: a stage itself, or
 * the bash that runs the chain (whose children are the stages).
 */
const liveChildren = new Map<ChildProcess, 'stage' | 'shell'>();

/** Shells whose children are being stopped: the timer that repeats it until the shell exits. */
const stopping = new Map<ChildProcess, NodeJS.Timeout>();

/** The chain that runs now (its bash and its stages' names), for --max-run-time's message (invocation/deadline.ts). */
let chainNow: RunningChain | null = null;
export const runningChain = (): RunningChain | null => chainNow;
/** Sets the chain that runs now (null: none). */
export const chainRunning = (c: RunningChain | null): void => {
  chainNow = c;
};

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

/** The pids of `parent`'s children, from /proc. */
function childPids(parent: number): number[] {
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  return entries.map(Number).filter((pid) => procStat(pid)?.ppid === parent);
}

/** Waits for `child` to end, counted among the live children (stopChildren) until then. */
export function waitExit(child: ChildProcess, kind: 'stage' | 'shell'): Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }> {
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

/** The stages of `chain` whose processes still run (descendants of its bash), in chain order. */
export function stagesStillRunning(chain: RunningChain, binDir: string): LiveStage[] {
  const found = new Map<string, LiveStage>();
  for (const pid of descendants(chain.pid)) {
    const st = procStat(pid);
    const args = procArgs(pid);
    if (st === null || args === null) continue;
    const name = chain.stages.find((s) => args.includes(path.join(binDir, s)));
    if (name === undefined) continue;
    const prev = found.get(name);
    found.set(name, { name, stopped: (prev?.stopped ?? false) || st.state === 'T' || st.state === 't' });
  }
  return chain.stages.filter((s) => found.has(s)).map((s) => found.get(s)!);
}

/** The pids of every process below `root` (its children, theirs, ...), from /proc. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  for (const e of entries) {
    const st = procStat(Number(e));
    if (st === null) continue;
    const list = children.get(st.ppid) ?? [];
    list.push(Number(e));
    children.set(st.ppid, list);
  }
  const out: number[] = [];
  for (let todo = [root]; todo.length > 0; ) {
    const next: number[] = [];
    for (const p of todo) {
      for (const c of children.get(p) ?? []) {
        out.push(c);
        next.push(c);
      }
    }
    todo = next;
  }
  return out;
}

/** A process's state letter and parent pid (/proc/PID/stat), or null once it is gone. */
function procStat(pid: number): { state: string; ppid: number } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name, which is in parentheses and may hold spaces.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: state ?? '', ppid: Number(ppid) };
  } catch {
    return null;
  }
}

/** A process's arguments (/proc/PID/cmdline), or null once it is gone. */
function procArgs(pid: number): string[] | null {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return null;
  }
}
