// Prometheus's promtool, where it is installed: a test that needs it skips with one
// line without it, unless MASTER_SERVER_REQUIRE_PROMTOOL=1 (CI), where it fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { TestContext } from 'node:test';

/** Runs `promtool args` with `input` on stdin; null (the test skipped) when promtool is missing and not required. */
export function promtool(t: TestContext, args: string[], input?: string): { status: number | null; out: string } | null {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8' });
  const missing = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
  if (missing) {
    assert.notEqual(
      process.env.MASTER_SERVER_REQUIRE_PROMTOOL,
      '1',
      'promtool is not installed, and MASTER_SERVER_REQUIRE_PROMTOOL=1 requires it (Debian: apt-get install prometheus)',
    );
    t.skip('promtool is not installed (Debian: prometheus); set MASTER_SERVER_REQUIRE_PROMTOOL=1 to make this a failure');
    return null;
  }
  if (r.error) throw r.error;
  return { status: r.status, out: r.stdout + r.stderr };
}
