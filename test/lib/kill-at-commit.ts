// Preloaded into the node processes of a runner's run (NODE_OPTIONS=--import=...):
// upload-domains is SIGKILLed at its commit of new domains, as a kill at that instant
// would. KILL_AT_COMMIT=before: just after the line it logs inside the transaction,
// before COMMIT; after: just after COMMIT, before the line it logs then. KILL_WHO=group
// kills its whole process group (the runner and every stage), stage only itself.
import fs from 'node:fs';

const when = process.env.KILL_AT_COMMIT;
if (when && process.argv[1]?.endsWith('/bin/upload-domains')) {
  const marker = when === 'before' ? '"msg":"committing new domains"' : '"msg":"new domains committed"';
  const target = process.env.KILL_WHO === 'group' ? 0 : process.pid;
  const writeSync = fs.writeSync;
  // pino writes its lines to fd 2 with fs.writeSync.
  fs.writeSync = function (this: unknown, fd: number, data: unknown, ...rest: unknown[]) {
    const hit = fd === 2 && String(data).includes(marker);
    if (hit && when === 'after') process.kill(target, 'SIGKILL');
    const n = (writeSync as (...a: unknown[]) => number).call(fs, fd, data, ...rest);
    if (hit) process.kill(target, 'SIGKILL');
    return n;
  } as typeof fs.writeSync;
}
