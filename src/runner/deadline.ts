// --max-run-time: how long one invocation may run. Reached while a chain runs, that
// chain's stages are stopped (SIGTERM, then SIGKILL --kill-after later) and its run
// fails, naming the stage still running; reached between runs, no further run starts.
// Either way the lock is let go in bounded time, and the next invocation goes on.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { formatDuration } from '../core/time.js';
import { stopChildren } from './pipeline.js';
import { PROG } from './options.js';

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

/** The invocation's time limit; `failure` is the step and message of the run it stopped, if it stopped one. */
export class Deadline {
  expired = false;
  failure: { step: string; error: string } | null = null;

  /** Starts counting `ms` now; `chain()` tells which chain runs when the time is up, and where its stages' binaries are. */
  constructor(
    readonly ms: number,
    private readonly killAfterMs: number,
    private readonly log: Logger,
    private readonly chain: () => RunningChain | null,
    private readonly binDir: string,
  ) {
    // Not keeping the process alive: an invocation that ended has nothing left for it to stop.
    setTimeout(() => this.expire(), ms).unref();
  }

  /** Time is up: names the stage still running, stops the chain, and SIGKILLs what is left --kill-after later. */
  private expire(): void {
    this.expired = true;
    const chain = this.chain();
    const live = chain === null ? [] : stagesStillRunning(chain, this.binDir);
    if (!stopChildren('SIGTERM')) return;
    this.failure = overTime(this.ms, live);
    this.log.error({ max_run_time_ms: this.ms, still_running: live.map((s) => s.name) }, 'max-run-time reached; stopping the stages');
    process.stderr.write(`${PROG}: ${this.failure.error}; stopping the stages\n`);
    setTimeout(() => {
      if (stopChildren('SIGKILL'))
        process.stderr.write(`${PROG}: the stages did not stop within ${formatDuration(this.killAfterMs)} of --max-run-time: killing them (SIGKILL)\n`);
    }, this.killAfterMs).unref();
  }
}

/**
 * The step and message of a run stopped at --max-run-time: the stage it blames is
 * a stopped one (its process held by SIGSTOP or Ctrl-Z), else the first of the chain
 * still running (the ones after it wait for its output).
 */
export function overTime(ms: number, live: readonly LiveStage[]): { step: string; error: string } {
  const limit = `--max-run-time ${formatDuration(ms)} reached`;
  const culprit = live.find((s) => s.stopped) ?? live[0];
  if (culprit === undefined) return { step: 'chain', error: `${limit} while the chain was still running` };
  const others = live.filter((s) => s !== culprit).map((s) => s.name);
  const how = culprit.stopped ? ' (its process was stopped: SIGSTOP or Ctrl-Z?)' : '';
  const also = others.length > 0 ? `; also still running: ${others.join(', ')}` : '';
  return { step: culprit.name, error: `${limit} while ${culprit.name} was still running${how}${also}` };
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
    for (const p of todo) for (const c of children.get(p) ?? []) out.push(c), next.push(c);
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
