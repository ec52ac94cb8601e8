// The state directory of a command line the options refused, so that the refusal is
// recorded in its STATE/last-invocation.json too (status then shows the config error).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from '../../core/errors.js';
import { parseArgs, parseConfig } from './parse.js';

/**
 * The state directory of a command line that parseArgs refused, as far as it can be
 * told: --state, else the config file's state key, else the default; null when the
 * config file, refused too, does not say.
 */
export function stateOfRefused(argv: readonly string[], cwd: string): string | null {
  const withState = flagsOf(argv, ['--state', '--config']);
  const stateOnly = flagsOf(argv, ['--state']);
  for (const args of stateOnly.length > 0 ? [withState, stateOnly] : [withState]) {
    try {
      const o = parseArgs(args, cwd);
      return typeof o === 'string' ? null : o.state;
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
    }
  }
  // The config file has another bad line or value: its state key alone, if it has one.
  const file = configArg(withState);
  if (file === null || file === '') return null;
  try {
    const where = path.resolve(cwd, file);
    const lines = fs.readFileSync(where, 'utf8').split('\n');
    const state = parseConfig(lines.map((l) => (/^\s*state\s*=/.test(l) ? l : '')).join('\n'), file).get('state')?.value;
    return state ? path.resolve(path.dirname(where), state) : null;
  } catch {
    return null;
  }
}

/** The options of `argv` named in `names`, each with its value. */
function flagsOf(argv: readonly string[], names: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!names.includes(a.split('=', 1)[0]!)) continue;
    kept.push(a);
    if (!a.includes('=') && i + 1 < argv.length) kept.push(argv[++i]!);
  }
  return kept;
}

/** The value of the last --config of `flags` (as flagsOf gives them), or null. */
function configArg(flags: readonly string[]): string | null {
  let file: string | null = null;
  for (let i = 0; i < flags.length; i++) {
    if (flags[i] === '--config') file = flags[++i] ?? null;
    else if (flags[i]!.startsWith('--config=')) file = flags[i]!.slice('--config='.length);
  }
  return file;
}
