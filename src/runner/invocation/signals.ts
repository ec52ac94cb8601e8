// SIGINT, SIGTERM and SIGHUP stop the stages of the run under way; the invocation ends
// once they have, and the next one finishes or redoes that run.
import { stopChildren } from '../run/processes.js';
import type { Say } from '../say.js';

/** Installs the SIGINT/SIGTERM/SIGHUP handlers that stop the stages; the returned object holds the first signal. */
export function watchSignals(killAfterMs: number, say: Say): { signal: NodeJS.Signals | null } {
  // The first signal asks the stages to stop (SIGTERM; they clean up and exit within
  // milliseconds). A stage that has not ended --kill-after later, or when a second
  // signal comes (a second Ctrl-C), is SIGKILLed: the runner must not wait forever on
  // a stuck stage, and a killed run is redone by the next invocation like any crash.
  const stop: { signal: NodeJS.Signals | null } = { signal: null };
  let killed = false;
  const kill = (why: string) => {
    if (killed) return;
    killed = true;
    if (stopChildren('SIGKILL')) say.tell(`${why}: killing them (SIGKILL)`, { level: 'warn', fields: { why }, msg: 'killing the stages (SIGKILL)' });
  };
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal !== null) {
      kill(`${sig} again while the stages stop`);
      return;
    }
    stop.signal = sig;
    if (stopChildren('SIGTERM')) {
      setTimeout(() => kill(`the stages did not stop within ${killAfterMs / 1000}s of ${sig}`), killAfterMs).unref();
    }
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, onSignal);
  return stop;
}
