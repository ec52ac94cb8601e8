// --max-run-time: how long one invocation may run. Reached while a chain runs, that
// chain's stages are stopped (SIGTERM, then SIGKILL --kill-after later) and its run
// fails, naming the stage still running; reached between runs, no further run starts.
// Either way the lock is let go in bounded time, and the next invocation goes on.
import { formatDuration } from '../../core/time.js';
import { type LiveStage, type RunningChain, stagesStillRunning, stopChildren } from '../run/processes.js';
import type { Say } from '../say.js';

/** The invocation's time limit; `failure` is the step and message of the run it stopped, if it stopped one. */
export class Deadline {
  expired = false;
  failure: { step: string; error: string } | null = null;

  /** Starts counting `ms` now; `chain()` tells which chain runs when the time is up, and where its stages' binaries are. */
  constructor(
    readonly ms: number,
    private readonly killAfterMs: number,
    private readonly say: Say,
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
    this.say.tell(`${this.failure.error}; stopping the stages`, {
      level: 'error',
      fields: { max_run_time_ms: this.ms, still_running: live.map((s) => s.name) },
      msg: 'max-run-time reached; stopping the stages',
    });
    setTimeout(() => {
      if (stopChildren('SIGKILL'))
        this.say.tell(`the stages did not stop within ${formatDuration(this.killAfterMs)} of --max-run-time: killing them (SIGKILL)`);
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
