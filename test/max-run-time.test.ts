// --max-run-time: an invocation whose chain does not end in time stops it, fails the
// run (nothing published, the reflog stays), exits 1 and names the stage still running.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, hasStackTrace, listFiles } from './lib/run.js';
import { runsJsonl } from './lib/runner-state.js';
import { FAST_SUITE } from './lib/pg.js';
import { RUN0, RUNS, freshFirstOnly, processesWhere, runner } from './lib/runner.js';
import { parseArgs } from '../src/runner/options/parse.js';
import { overTime } from '../src/runner/invocation/deadline.js';

const STOP = `--import=${pathToFileURL(path.join(ROOT, 'dist/test/lib/stop-stage.js')).href}`;

test('a stage stopped by SIGSTOP: the run fails at --max-run-time naming it, exit 1, nothing published; the next invocation commits it', {
  timeout: 120_000,
  skip: FAST_SUITE && 'waits 20 s on --max-run-time (npm run test:all)',
}, async () => {
  const dir = freshFirstOnly();
  const ready = path.join(dir, 'stopped');
  // Long enough for the stages to start on a busy machine; the test lasts that long.
  const r = await runner(dir, ['--max-run-time', '20s'], { env: { NODE_OPTIONS: STOP, STOP_STAGE: 'upload-domains', STOP_READY: ready } });
  assert.ok(fs.existsSync(ready), `upload-domains stopped itself: ${r.stderr}`);
  assert.equal(r.status, 1, r.stderr);
  assert.ok(!hasStackTrace(r.stderr), r.stderr);
  // The stopped stage gets SIGTERM and SIGCONT at once: the run ends well within --kill-after (10 s).
  assert.ok(r.ms < 20_000 + 8000, `ended ${r.ms} ms after it started`);
  assert.match(r.stderr, /--max-run-time 20s reached while upload-domains was still running \(its process was stopped: SIGSTOP or Ctrl-Z\?\)/);
  assert.ok(r.stderr.includes(`run ${RUN0} failed: --max-run-time 20s reached while upload-domains was still running`), r.stderr);
  assert.match(r.stderr, /nothing of it was published; 1 reflog\(s\) stay in /);
  const rec = runsJsonl(dir).at(-1)!;
  assert.equal(rec.status, 'failed');
  assert.equal(rec.failed_stage, 'upload-domains');
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), [RUNS[0]], 'the reflog stays in the inbox');
  assert.deepEqual(fs.existsSync(path.join(dir, 'var/queue')) ? listFiles(path.join(dir, 'var/queue')) : [], [], 'no queue file published');
  assert.deepEqual(
    processesWhere((cmd) => cmd.includes(dir)),
    [],
    'no stage outlived the runner',
  );
  const again = await runner(dir);
  assert.equal(again.status, 0, again.stderr);
  assert.equal(runsJsonl(dir).at(-1)!.status, 'ok');
});

test('--max-run-time: 50m by default, from the config file or the command line; 0, over a day or no duration is a usage error', () => {
  const dir = freshFirstOnly();
  assert.equal((parseArgs([], dir) as { maxRunTimeMs: number }).maxRunTimeMs, 50 * 60_000);
  fs.writeFileSync(path.join(dir, 'r.conf'), 'max-run-time = 20m\n');
  assert.equal((parseArgs(['--config', 'r.conf'], dir) as { maxRunTimeMs: number }).maxRunTimeMs, 20 * 60_000);
  assert.equal((parseArgs(['--config', 'r.conf', '--max-run-time', '90s'], dir) as { maxRunTimeMs: number }).maxRunTimeMs, 90_000);
  for (const bad of ['0', '2d', 'soon', '']) {
    assert.throws(() => parseArgs(['--max-run-time', bad], dir), /max-run-time wants a duration like 50m, 2h or seconds, above 0 and at most 1d/);
  }
  fs.writeFileSync(path.join(dir, 'bad.conf'), 'max-run-time = 0\n');
  assert.throws(() => parseArgs(['--config', 'bad.conf'], dir), /^UsageError: bad\.conf:1: max-run-time wants/);
});

test('the stage named is a stopped one, else the first of the chain still running', () => {
  const live = (...s: [string, boolean][]) => s.map(([name, stopped]) => ({ name, stopped }));
  assert.deepEqual(overTime(60_000, live(['filter-url', false], ['upload-domains', true], ['logsaver', false])), {
    step: 'upload-domains',
    error:
      '--max-run-time 1m reached while upload-domains was still running (its process was stopped: SIGSTOP or Ctrl-Z?); also still running: filter-url, logsaver',
  });
  assert.deepEqual(overTime(3_000, live(['upload-domains', false], ['logsaver', false])), {
    step: 'upload-domains',
    error: '--max-run-time 3s reached while upload-domains was still running; also still running: logsaver',
  });
  assert.deepEqual(overTime(3_000, []), { step: 'chain', error: '--max-run-time 3s reached while the chain was still running' });
});
