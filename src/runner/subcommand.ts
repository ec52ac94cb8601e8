// The runner's subcommands: status and explain, which only read, and new-identity: their
// own flags, then the runner's options (and --config) as the cron line gives them.
import { DataError, UsageError, formatPlace, visibleName } from '../core/errors.js';
import { parseDuration } from '../core/time.js';
import { packageVersion } from '../cli/stage.js';
import { PROG, KEYS, parseArgs, type RunnerOptions } from './options.js';
import { EXPLAIN_USAGE, explain } from './views/explain.js';
import { STATUS_USAGE, status } from './views/status.js';
import { Locked } from './state/lock.js';
import { NEW_IDENTITY_USAGE, newIdentity } from './new-identity.js';

export const SUBCOMMANDS: ReadonlySet<string> = new Set(['status', 'explain', 'new-identity']);

const USAGES: Record<string, string> = { status: STATUS_USAGE, explain: EXPLAIN_USAGE, 'new-identity': NEW_IDENTITY_USAGE };

/** A subcommand's command line: its own flags, its operands, the runner's options. */
export interface SubArgs {
  json: boolean;
  maxAgeMs: number | null;
  operands: string[];
  o: RunnerOptions;
}

/** Runs `name` with `args` and exits: its own status, 1 on an error, 2 on a usage error. */
export async function subcommand(name: string, args: readonly string[]): Promise<never> {
  const usage = USAGES[name]!;
  const prog = `${PROG} ${name}`;
  try {
    const a = parseSubArgs(name, args, process.cwd());
    if (a === 'help' || a === 'version') {
      process.stdout.write(a === 'help' ? usage : `${packageVersion()}\n`);
      process.exit(0);
    }
    process.exit(name === 'status' ? status(a) : name === 'explain' ? await explain(a) : await newIdentity(a.o));
  } catch (err) {
    if (err instanceof Locked) {
      process.stderr.write(`${prog}: another run holds the lock: ${visibleName(err.message)}; exiting (75)\n`);
      process.exit(75);
    }
    if (err instanceof UsageError) {
      process.stderr.write(`${prog}: ${visibleName(err.message)}\nTry '${prog} --help' for more information.\n`);
      process.exit(2);
    }
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : `internal error: ${(err as Error)?.message ?? String(err)}`;
    if (!(err instanceof DataError) && process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    process.stderr.write(`${prog}: ${visibleName(message)}\n`);
    process.exit(1);
  }
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
