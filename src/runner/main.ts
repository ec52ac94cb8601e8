// reflog-to-yacobot-queue: the cron entry. Parses the command line and runs one
// invocation (invocation.ts), turning how it ended into the exit status and the
// last-invocation record.
import { packageVersion } from '../cli/stage.js';
import { loadPino } from '../core/cjs.js';
import { DataError, UsageError, formatPlace, visibleName } from '../core/errors.js';
import { REDACTING_HOOKS } from '../core/secrets.js';
import { recordEnd } from './invocation-end.js';
import { Stop } from './invocation-report.js';
import { invocation } from './invocation.js';
import { type Seen, stateOfRefused } from './last-invocation.js';
import { Locked } from './lock.js';
import { PROG, type RunnerOptions, USAGE, parseArgs } from './options.js';
import { SUBCOMMANDS, subcommand } from './subcommand.js';

const pino = loadPino();

/** Runs the command line and exits with 0, 1, 2, 75 (locked) or 128+signal. Never returns. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<never> {
  if (SUBCOMMANDS.has(argv[0] ?? '')) return subcommand(argv[0]!, argv.slice(1));
  const seen: Seen = { started: new Date(), lock: false, committed: [] };
  let o: RunnerOptions;
  try {
    const parsed = parseArgs(argv, process.cwd());
    if (parsed === 'help') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    if (parsed === 'version') {
      process.stdout.write(`${packageVersion()}\n`);
      process.exit(0);
    }
    o = parsed;
  } catch (err) {
    if (err instanceof UsageError) {
      await recordEnd(null, stateOfRefused(argv, process.cwd()), seen, 2, err.message);
      usageExit(err.message);
    }
    throw err;
  }
  const log = pino({ name: PROG, level: o.logLevel, base: { prog: PROG }, hooks: REDACTING_HOOKS }, pino.destination({ fd: 2, sync: true }));
  const end = (code: number, error: string | null) => recordEnd(o, o.state, seen, code, error);
  try {
    await invocation(o, log, seen);
    await end(0, null);
    process.exit(0);
  } catch (err) {
    if (err instanceof Stop) {
      await end(err.code, err.why);
      process.exit(err.code);
    }
    if (err instanceof UsageError) {
      await end(2, err.message);
      usageExit(err.message);
    }
    if (err instanceof Locked) {
      await end(75, `another run holds the lock: ${err.message}`);
      process.stderr.write(`${PROG}: another run holds the lock: ${visibleName(err.message)}; exiting (75)\n`);
      process.exit(75);
    }
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : `internal error: ${(err as Error)?.message ?? String(err)}`;
    if (!(err instanceof DataError) && process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    log.error({ error: message }, 'failed');
    process.stderr.write(`${PROG}: ${visibleName(message)}\n`); // one line, whatever names it quotes
    await end(1, message);
    process.exit(1);
  }
}

function usageExit(message: string): never {
  process.stderr.write(`${PROG}: ${visibleName(message)}\nTry '${PROG} --help' for more information.\n`);
  process.exit(2);
}
