// Preloaded into a runner (NODE_OPTIONS=--import=...): it sends itself SIGNAL_SEND
// (SIGSTOP, SIGKILL) just after its first call of fs.SIGNAL_AFTER_CALL whose first
// argument contains SIGNAL_ARG returns, as a pause or a crash at that instant would:
// finer than the failpoints, between the operations of one commit step.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const fn = process.env.SIGNAL_AFTER_CALL as keyof typeof fs | undefined;
const arg = process.env.SIGNAL_ARG ?? '';
if (fn && process.argv[1]?.endsWith('/reflog-to-yacobot-queue')) {
  const orig = fs[fn] as (...a: unknown[]) => unknown;
  let sent = false;
  (fs as unknown as Record<string, unknown>)[fn] = function (this: unknown, ...a: unknown[]) {
    const r = orig.apply(this, a);
    if (!sent && String(a[0]).includes(arg)) {
      sent = true;
      process.kill(process.pid, (process.env.SIGNAL_SEND ?? 'SIGSTOP') as NodeJS.Signals);
    }
    return r;
  };
  // The runner's `import * as fs` sees the replaced function only after this.
  syncBuiltinESMExports();
}
