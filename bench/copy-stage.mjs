// The floor of one streaming stage for the benchmark (scripts/bench.ts, "(c)"): a Node
// process that starts as a stage starts (the same shebang flags, given by the bench),
// grows its pipes as the stages do, and copies stdin to stdout in 1 MiB blocks,
// without looking at a byte. Five of them after analyze-dump time what the chain
// would cost if the five streaming stages did no work of their own.
import * as fs from 'node:fs';
import { growPipe } from '../dist/src/core/pipes.js';

// As every stage does at its start (src/cli/stage.ts), where the pipe-size addon was built.
growPipe(0);
growPipe(1);
const buf = Buffer.allocUnsafe(1 << 20);
for (;;) {
  const n = fs.readSync(0, buf, 0, buf.length, null);
  if (n === 0) break;
  for (let o = 0; o < n; ) o += fs.writeSync(1, buf, o, n - o);
}
