// Preloaded into the processes of a runner's run (NODE_OPTIONS=--import=...), as a
// failing or full disk would make them fail:
// - FAIL_PUBLISH set: logsaver's rename of a queue file into place fails with EIO. The
//   run then fails in its last stage, after upload-domains read all of its input,
//   committed its new domains and ended with its summary.
// - FAIL_QUEUE_COPY=ID: the runner's copy of a queue file into Yacobot ID's directory
//   (beside its place, before the COMMIT) fails with ENOSPC, what the check of QUEUE
//   before the chain cannot see.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const script = process.argv[1] ?? '';
if (process.env.FAIL_PUBLISH && script.endsWith('/bin/logsaver')) {
  fs.renameSync = () => {
    throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO', errno: -5, syscall: 'rename' });
  };
  // logsaver's `import * as fs` sees the replaced function only after this.
  syncBuiltinESMExports();
}
const full = process.env.FAIL_QUEUE_COPY;
if (full && script.endsWith('/reflog-to-yacobot-queue')) {
  const copy = fs.copyFileSync;
  fs.copyFileSync = (src, dst, mode) => {
    if (String(dst).includes(`/queue/${full}/`)) {
      throw Object.assign(new Error('ENOSPC: no space left on device, copyfile'), { code: 'ENOSPC', errno: -28, syscall: 'copyfile' });
    }
    copy(src, dst, mode);
  };
  syncBuiltinESMExports();
}
