// reflog-to-yacobot-queue: the cron entry. Parses the command line and runs one
// invocation (invocation.ts), turning how it ended into the exit status and the
// last-invocation record.
import { packageVersion } from '../cli/stage.js';
import { loadPino } from '../core/cjs.js';
import { DataError, UsageError, formatPlace, visibleName } from '../core/errors.js';
import { REDACTING_HOOKS } from '../core/secrets.js';
import { recordEnd } from './views/record-end.js';
import { Stop } from './invocation/report.js';
import { fenceFound } from './commit/fence.js';
import { invocation } from './invocation/invocation.js';
import { stateOfRefused } from './options/refused.js';
import type { Seen } from './state/last-invocation.js';
import { Locked } from './state/lock.js';
import type { RunnerOptions } from './options/types.js';
import { USAGE } from './options/usage.js';
import { parseArgs } from './options/parse.js';
import { PROG, sayTo } from './say.js';
import { NEW_IDENTITY_USAGE, newIdentity } from './invocation/new-identity.js';
import { CAPS_USAGE, caps } from './views/caps.js';
import { CHECK_USAGE, check, configRefused } from './views/check.js';
import { EXPLAIN_USAGE, explain } from './views/explain.js';
import { STATUS_USAGE, status } from './views/status.js';
import { type Subcommand, subcommand } from './views/subcommand.js';

const pino = loadPino();

/** The subcommands: status, explain, caps and check, which only read; new-identity, which takes the lock. */
const COMMANDS: ReadonlyMap<string, Subcommand> = new Map<string, Subcommand>([
  ['status', { usage: STATUS_USAGE, run: (a) => status(a) }],
  ['explain', { usage: EXPLAIN_USAGE, run: explain }],
  ['caps', { usage: CAPS_USAGE, run: caps }],
  ['check', { usage: CHECK_USAGE, run: check, refused: configRefused }],
  ['new-identity', { usage: NEW_IDENTITY_USAGE, run: (a) => newIdentity(a.o) }],
]);

/** The subcommands' names. */
export const SUBCOMMANDS: ReadonlySet<string> = new Set(COMMANDS.keys());

/** Runs the command line and exits with 0, 1, 2, 75 (locked) or 128+signal. Never returns. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<never> {
  const sub = COMMANDS.get(argv[0] ?? '');
  if (sub !== undefined) return subcommand(argv[0]!, sub, argv.slice(1));
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
  const say = sayTo(log);
  const end = (code: number, error: string | null) => {
    seen.fenced = fenceFound(o.state);
    return recordEnd(o, o.state, seen, code, error);
  };
  try {
    await invocation(o, say, seen);
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
      say.tell(`another run holds the lock: ${visibleName(err.message)}; exiting (75)`);
      process.exit(75);
    }
    const message = err instanceof DataError ? formatPlace(err.place, err.message) : `internal error: ${(err as Error)?.message ?? String(err)}`;
    if (!(err instanceof DataError) && process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    say.tell(visibleName(message), { level: 'error', fields: { error: message }, msg: 'failed' }); // one line, whatever names it quotes
    await end(1, message);
    process.exit(1);
  }
}

function usageExit(message: string): never {
  sayTo(null).tell(visibleName(message));
  process.stderr.write(`Try '${PROG} --help' for more information.\n`);
  process.exit(2);
}
