// Running one of the runner's subcommands (main.ts names them): its command line, its
// usage and version, and its exit status, 1 on an error, 2 on a usage error.
import { packageVersion } from '../../cli/stage.js';
import { DataError, UsageError, formatPlace, visibleName } from '../../core/errors.js';
import { PROG } from '../say.js';
import { Locked } from '../state/lock.js';
import { type SubArgs, parseSubArgs } from './sub-args.js';

/** A subcommand: its usage text and what runs it, returning its exit status. */
export interface Subcommand {
  usage: string;
  run(a: SubArgs): number | Promise<number>;
  /** What a command line or config file that cannot be read gives, when not a usage error (exit 2): the exit status, after saying why. */
  refused?(message: string): number;
}

/** Runs subcommand `name` (`cmd`) with `args` and exits: its own status, 1 on an error, 2 on a usage error, 75 locked. */
export async function subcommand(name: string, cmd: Subcommand, args: readonly string[]): Promise<never> {
  const prog = `${PROG} ${name}`;
  let parsed = false;
  try {
    const a = parseSubArgs(name, args, process.cwd());
    parsed = true;
    if (a === 'help' || a === 'version') {
      process.stdout.write(a === 'help' ? cmd.usage : `${packageVersion()}\n`);
      process.exit(0);
    }
    process.exit(await cmd.run(a));
  } catch (err) {
    if (err instanceof Locked) {
      process.stderr.write(`${prog}: another run holds the lock: ${visibleName(err.message)}; exiting (75)\n`);
      process.exit(75);
    }
    if (err instanceof UsageError && !parsed && cmd.refused !== undefined) process.exit(cmd.refused(err.message));
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
