// A stage for test/cli.test.ts whose run never settles and leaves nothing for the
// event loop to wait for, as a job handed to a worker thread that ended would.
// It runs only with STALLED_STAGE=1: the test runner runs every file under test/ too
// (as a script, with its stdin left open), and there it must do nothing.
import { runStage, type StageDef } from '../../src/cli/stage.js';

const stalled: StageDef<Record<string, never>> = {
  name: 'stalled-stage',
  summary: 'never ends its run',
  usage: 'Reads its input, then waits for a promise no one settles.',
  normalize: () => ({}),
  async run(ctx) {
    let n = 0;
    ctx.reportCounts(() => ({ lines_in: n }));
    await ctx.eachLine(() => void n++);
    await new Promise(() => {});
  },
};

if (process.env.STALLED_STAGE === '1') void runStage(stalled);
