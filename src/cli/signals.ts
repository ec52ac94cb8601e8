// The stop signals of a stage (SIGINT, SIGTERM, SIGHUP), caught from the first line of
// its bin on. While the stage's modules load (some 50 ms), a signal took Node's default
// action (the process died of it: no summary line, no cut mark on stdout), while a
// later one gets both and exit 128+N. Imports nothing, so that it loads first.

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

let caught = false;
let pending: NodeJS.Signals | null = null;
let handler: ((sig: NodeJS.Signals) => void) | null = null;

/** Catches the stop signals from now on; the first that comes before onStopSignal is kept for it. Idempotent. */
export function catchStopSignals(): void {
  if (caught) return;
  caught = true;
  for (const s of STOP_SIGNALS) {
    process.on(s, (sig: NodeJS.Signals) => {
      if (handler !== null) handler(sig);
      else pending ??= sig;
    });
  }
}

/** Hands the stop signals to `fn`: the one kept since catchStopSignals at once, later ones as they come. */
export function onStopSignal(fn: (sig: NodeJS.Signals) => void): void {
  catchStopSignals();
  handler = fn;
  if (pending !== null) fn(pending);
}
