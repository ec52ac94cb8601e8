// The peak RSS of a child process, as the fuzzer and the memory tests watch it.
import * as fs from 'node:fs';

/** A running watch of one process's peak RSS. */
export interface PeakRss {
  /** The highest VmHWM seen so far, in KiB (0 where /proc cannot tell). */
  readonly kb: number;
  /** Stops sampling. */
  stop(): void;
}

/** Samples VmHWM of process `pid` (from /proc/PID/status) every `everyMs` until stop(). */
export function watchPeakRss(pid: number | undefined, everyMs = 25): PeakRss {
  let kb = 0;
  const poll = setInterval(() => {
    try {
      const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) kb = Math.max(kb, Number(m[1]));
    } catch {
      /* exited */
    }
  }, everyMs);
  return {
    get kb() {
      return kb;
    },
    stop: () => clearInterval(poll),
  };
}
