// Preloaded into the node processes of a runner's run (NODE_OPTIONS=--import=...):
// upload-domains is SIGKILLed at its commit of new domains, as a kill at that instant
// would. KILL_AT_COMMIT=before: just after the line it logs inside the transaction,
// before COMMIT; after: just after COMMIT, before the line it logs then. KILL_WHO=group
// kills its whole process group (the runner and every stage), stage only itself;
// group-logged kills the group once the line logged before COMMIT is in the stage's log
// file in the run's staging area (the runner's tee copies it there), so that the next
// invocation finds a commit announced and not confirmed.
import fs from 'node:fs';
import path from 'node:path';

const when = process.env.KILL_AT_COMMIT;
if (when && process.argv[1]?.endsWith('/bin/upload-domains')) {
  const marker = when === 'before' ? '"msg":"committing new domains"' : '"msg":"new domains committed"';
  const who = process.env.KILL_WHO;
  const target = who === 'group' || who === 'group-logged' ? 0 : process.pid;
  const writeSync = fs.writeSync;
  const kill = () => {
    if (who === 'group-logged') untilLogged();
    process.kill(target, 'SIGKILL');
  };
  // pino writes its lines to fd 2 with fs.writeSync.
  fs.writeSync = function (this: unknown, fd: number, data: unknown, ...rest: unknown[]) {
    const hit = fd === 2 && String(data).includes(marker);
    if (hit && when === 'after') kill();
    const n = (writeSync as (...a: unknown[]) => number).call(fs, fd, data, ...rest);
    if (hit) kill();
    return n;
  } as typeof fs.writeSync;
}

/** Waits (at most 10 s) until the stage's log file, beside its --tmp, holds the line it logs before COMMIT. */
function untilLogged(): void {
  const tmp = process.argv[process.argv.indexOf('--tmp') + 1]!;
  const logs = path.join(path.dirname(tmp), 'log');
  for (let i = 0; i < 500; i++) {
    const f = fs.existsSync(logs) ? fs.readdirSync(logs).find((n) => n.endsWith('.upload-domains.log')) : undefined;
    if (f !== undefined && fs.readFileSync(path.join(logs, f), 'utf8').includes('"msg":"committing new domains"')) return;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
}
