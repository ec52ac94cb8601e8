// Preloaded into the node processes of a runner's run (NODE_OPTIONS=--import=...): the
// stage named by DEAF_STAGE takes SIGTERM and SIGINT and does nothing with them, and
// never ends by itself, as a stage stuck in a hung read would. A SIGKILL ends it. It
// creates the file DEAF_READY once it is so (its handlers in place).
import * as fs from 'node:fs';

const stage = process.env.DEAF_STAGE;
if (stage && process.argv[1]?.endsWith(`/bin/${stage}`)) {
  process.on('SIGTERM', () => {});
  process.on('SIGINT', () => {});
  fs.writeFileSync(process.env.DEAF_READY!, String(process.pid));
  // The thread sleeps for good: the handlers above never run, and the stage never reads on.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}
