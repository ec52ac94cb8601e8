// Preloaded into a stage (NODE_OPTIONS=--import=...): sends it SIGNAL_ON_LOAD (SIGTERM,
// SIGINT, SIGHUP) while its modules load, as the bin's import of dist/src/cli/stage.js is
// resolved: an instant of the time before runStage installs its handlers that no
// timer hits reliably. The hooks (module.register) run on a thread of their own while
// the stage's main thread waits for the module.
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

interface Target {
  pid: number;
  signal: NodeJS.Signals;
}

let target: Target | null = null;
let sent = false;

if (isMainThread && process.env.SIGNAL_ON_LOAD && /\/bin\/[a-z-]+$/.test(process.argv[1] ?? '')) {
  register(import.meta.url, { data: { pid: process.pid, signal: process.env.SIGNAL_ON_LOAD as NodeJS.Signals } satisfies Target });
}

/** On the hooks thread: what to send, to whom. */
export function initialize(data: Target): void {
  target = data;
}

export async function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Promise<{ url: string }>,
): Promise<{ url: string }> {
  const r = await next(specifier, context);
  if (target !== null && !sent && r.url.endsWith('/dist/src/cli/stage.js')) {
    sent = true;
    process.kill(target.pid, target.signal);
  }
  return r;
}
