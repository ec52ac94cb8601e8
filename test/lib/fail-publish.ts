// Preloaded into the stages of a runner's run (NODE_OPTIONS=--import=...): with
// FAIL_PUBLISH set, logsaver's rename of a queue file into place fails with EIO, as a
// failing disk would. The run then fails in its last stage, after upload-domains read
// all of its input, committed its new domains and ended with its summary.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

if (process.env.FAIL_PUBLISH && process.argv[1]?.endsWith('/bin/logsaver')) {
  fs.renameSync = () => {
    throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO', errno: -5, syscall: 'rename' });
  };
  // logsaver's `import * as fs` sees the replaced function only after this.
  syncBuiltinESMExports();
}
