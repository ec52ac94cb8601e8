// The runtime, checked first. Every executable (bin/*, the runner, the scripts) imports
// this module before any other of its own: ES modules are evaluated in import order, so
// on a Node.js that package.json's "engines" does not accept, the process exits 2 with
// one line before a native module (better-sqlite3, the pipe-size addon) is loaded.
// Imports nothing that loads one.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PROJECT_ROOT } from '../core/root.js';

/** A Node.js version: major, minor, patch. */
export type NodeVersion = readonly [number, number, number];

/** The project's package.json, where "engines" says which Node.js it needs. */
export const PACKAGE_JSON = path.join(PROJECT_ROOT, 'package.json');

/** The lowest version an "engines" range of the form ">=MAJOR[.MINOR[.PATCH]]" accepts; throws on any other form. */
export function lowestAccepted(range: string): NodeVersion {
  const m = /^\s*>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$/.exec(range);
  if (m === null) throw new Error(`"engines": {"node": ${JSON.stringify(range)}} is not of the form ">=MAJOR[.MINOR[.PATCH]]"`);
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

/** `v20.20.2` (or `20.20.2`) as numbers; a part that is not a number counts as 0. */
export function versionOf(text: string): NodeVersion {
  const [major, minor, patch] = text
    .replace(/^v/, '')
    .split('.')
    .map((s) => parseInt(s, 10) || 0);
  return [major ?? 0, minor ?? 0, patch ?? 0];
}

/** Whether version `a` comes before `b`. */
function before(a: NodeVersion, b: NodeVersion): boolean {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

/** The one line that refuses Node.js `version` (the binary `execPath`) to `prog`, or null when `range` accepts it. */
export function runtimeRefusal(prog: string, range: string, version: string = process.version, execPath: string = process.execPath): string | null {
  const need = lowestAccepted(range);
  if (!before(versionOf(version), need)) return null;
  const needs = need[1] === 0 && need[2] === 0 ? String(need[0]) : need.join('.');
  return `${prog}: Node.js ${version} (${execPath}) is not supported: master-server needs Node.js ${needs} or later; put one first on PATH (see README "Set up")`;
}

/** The name an executable's messages begin with: its script's file name, without ".js". */
export function programName(script: string | undefined): string {
  return script === undefined || script === '' ? 'master-server' : path.basename(script).replace(/\.js$/, '');
}

/** package.json's "engines"."node". */
export function enginesRange(file: string = PACKAGE_JSON): string {
  const range: unknown = JSON.parse(fs.readFileSync(file, 'utf8'))?.engines?.node;
  if (typeof range !== 'string') throw new Error('no "engines": {"node": ...}');
  return range;
}

/** Exits 2 with runtimeRefusal's line on an unsupported Node.js (1 when package.json cannot say); returns otherwise. */
export function checkRuntime(prog: string = programName(process.argv[1])): void {
  let line: string | null;
  let status = 2;
  try {
    line = runtimeRefusal(prog, enginesRange());
  } catch (err) {
    line = `${prog}: cannot tell which Node.js master-server needs: ${PACKAGE_JSON}: ${(err as Error).message}`;
    status = 1;
  }
  if (line === null) return;
  fs.writeSync(2, `${line}\n`);
  process.exit(status);
}

checkRuntime();
