// Preloaded into the node processes of a runner's run (NODE_OPTIONS=--import=...): the
// stage named by STOP_STAGE stops itself with SIGSTOP as it starts, as a stage held by
// a debugger or Ctrl-Z would be, after writing its pid to the file STOP_READY.
import * as fs from 'node:fs';

const stage = process.env.STOP_STAGE;
if (stage && process.argv[1]?.endsWith(`/bin/${stage}`)) {
  fs.writeFileSync(process.env.STOP_READY!, String(process.pid));
  process.kill(process.pid, 'SIGSTOP');
}
