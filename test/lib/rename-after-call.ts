// Preloaded into a runner (NODE_OPTIONS=--import=...): just after its first call of
// fs.RENAME_AFTER_CALL whose first argument is RENAME_ARG returns, renames
// RENAME_FROM to RENAME_TO, as a sender renaming a file into the inbox at that very
// instant would (a SIGSTOP would do the same, but a test under strace cannot resume it).
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const fn = process.env.RENAME_AFTER_CALL as keyof typeof fs | undefined;
if (fn && process.argv[1]?.endsWith('/reflog-to-yacobot-queue')) {
  const orig = fs[fn] as (...a: unknown[]) => unknown;
  let done = false;
  (fs as unknown as Record<string, unknown>)[fn] = function (this: unknown, ...a: unknown[]) {
    const r = orig.apply(this, a);
    if (!done && String(a[0]) === process.env.RENAME_ARG) {
      done = true;
      fs.renameSync(process.env.RENAME_FROM!, process.env.RENAME_TO!);
    }
    return r;
  };
  // The runner's `import * as fs` sees the replaced function only after this.
  syncBuiltinESMExports();
}
