// A subcommand's command line: its own flags (--json, status's --max-age), its operands,
// then the runner's options (and --config) as the cron line gives them.
import { UsageError } from '../../core/errors.js';
import { parseDuration } from '../../core/time.js';
import { KEYS } from '../options/reader.js';
import type { RunnerOptions } from '../options/types.js';
import { parseArgs } from '../options/parse.js';

/** A subcommand's command line: its own flags, its operands, the runner's options. */
export interface SubArgs {
  json: boolean;
  maxAgeMs: number | null;
  operands: string[];
  o: RunnerOptions;
}

const VALUED: ReadonlySet<string> = new Set([...KEYS, 'config'].map((k) => `--${k}`));

/** Splits `args` into the subcommand's flags and operands and the runner's options, which parseArgs reads. */
export function parseSubArgs(name: string, args: readonly string[], cwd: string): SubArgs | 'help' | 'version' {
  let json = false;
  let maxAgeMs: number | null = null;
  const operands: string[] = [];
  const runner: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const flag = a.split('=', 1)[0]!;
    if (a === '--') {
      operands.push(...args.slice(i + 1));
      break;
    } else if (a === '--json') json = true;
    else if (flag === '--max-age' && name === 'status') {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : args[++i];
      maxAgeMs = v === undefined ? null : parseDuration(v);
      if (maxAgeMs === null) throw new UsageError(`--max-age wants a duration like 90m, 2h, 1d or seconds, got '${v ?? ''}'`);
    } else if (VALUED.has(flag) && !a.includes('=')) runner.push(a, ...(i + 1 < args.length ? [args[++i]!] : []));
    else if (a.startsWith('-') && a !== '-') runner.push(a);
    else operands.push(a);
  }
  const o = parseArgs(runner, cwd);
  if (typeof o === 'string') return o;
  if (name !== 'explain' && operands.length > 0) throw new UsageError(`${name} takes no operands, got '${operands[0]}'`);
  if (name === 'explain' && operands.length === 0) throw new UsageError('explain wants at least one URL');
  return { json, maxAgeMs, operands, o };
}
