// A Node.js that package.json's "engines" refuses, for the tests that run the project on
// one: MASTER_SERVER_OLD_NODE names its binary (.ci/run fetches Node.js 20 for it), else
// the first such `node` on PATH is taken. Without one those tests skip with one line,
// unless MASTER_SERVER_REQUIRE_OLD_NODE=1 (CI) makes that a failure.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { enginesRange, runtimeRefusal } from '../../src/cli/runtime.js';

/** An unsupported Node.js binary and its version. */
export interface OldNode {
  bin: string;
  version: string;
}

/** The version `node --version` prints for `bin`, or null when it does not run. */
export function nodeVersion(bin: string): string | null {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** MASTER_SERVER_OLD_NODE, else the first `node` on PATH that "engines" refuses, or null. */
function findOldNode(): OldNode | null {
  const range = enginesRange();
  const given = process.env.MASTER_SERVER_OLD_NODE;
  const candidates = given
    ? [given]
    : (process.env.PATH ?? '')
        .split(path.delimiter)
        .filter((d) => d !== '')
        .map((d) => path.join(d, 'node'));
  for (const bin of candidates) {
    if (!given && !fs.existsSync(bin)) continue;
    const version = nodeVersion(bin);
    assert.ok(version !== null || !given, `MASTER_SERVER_OLD_NODE=${given}: does not run`);
    if (version !== null && runtimeRefusal('-', range, version, bin) !== null) return { bin, version };
    assert.ok(!given, `MASTER_SERVER_OLD_NODE=${given}: ${version} is a supported Node.js (package.json: "engines" ${range})`);
  }
  return null;
}

/** The unsupported Node.js to test with; null (the test skipped, with one line) when there is none and none is required. */
export function oldNode(t: TestContext): OldNode | null {
  const found = findOldNode();
  if (found !== null) return found;
  const why = 'no unsupported Node.js here (MASTER_SERVER_OLD_NODE unset, none on PATH); .ci/run fetches Node.js 20';
  assert.notEqual(process.env.MASTER_SERVER_REQUIRE_OLD_NODE, '1', `MASTER_SERVER_REQUIRE_OLD_NODE=1 but ${why}`);
  t.skip(`${why}; set MASTER_SERVER_REQUIRE_OLD_NODE=1 to make this a failure`);
  return null;
}

/** PATH with the directory of `node` first. */
export function pathWith(node: string, rest: string = process.env.PATH ?? ''): string {
  return `${path.dirname(node)}${path.delimiter}${rest}`;
}
