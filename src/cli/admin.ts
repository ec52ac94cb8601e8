// The runner for administration tools (partner-db, with subcommands) and the
// development scripts (bench, fuzz, gen-reflog): the same conventions as runStage
// -- "<tool>: message" errors, exit 0/1/2, "Try '<tool> --help'", help on stdout,
// no stack traces -- around a commander program instead of one stdin->stdout stage.
import type { Command } from 'commander';
import { loadCommander } from './commander.js';
import { DataError, UsageError, formatPlace, ioError, visibleName } from '../core/errors.js';
import { parseCount } from '../core/numbers.js';
import { packageVersion } from './stage.js';

const commander = loadCommander();

/**
 * Builds the program with `build`, parses argv, runs the chosen subcommand's action
 * and exits the process with 0 (success), 1 (DataError, I/O) or 2 (usage). Never returns.
 */
export async function runAdmin(name: string, build: (program: Command) => void, argv: string[] = process.argv): Promise<never> {
  // A reader that goes away (| head) ends the tool quietly, as it does a stage.
  let writeError: NodeJS.ErrnoException | null = null;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    writeError ??= err;
  });
  const program = new commander.Command(name)
    .version(packageVersion(), '--version', 'print the version and exit')
    .helpOption('-h, --help', 'print this help and exit')
    .helpCommand(false)
    .exitOverride()
    .configureOutput({ outputError: () => undefined, writeErr: () => undefined }) // our own usage message instead of the help on stderr
    .showHelpAfterError(false);
  build(program);
  // The command being parsed: an unknown option is reported by it (a subcommand or the program).
  let parsing: Command = program;
  program.hook('preSubcommand', (_program, sub) => {
    parsing = sub;
  });
  try {
    if (program.commands.length > 0 && argv.length <= 2) throw new UsageError('no command given');
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof commander.CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) process.exit(0);
      if (err.code === 'commander.help') usageExit(name, 'no command given');
      let message = err.message.replace(/^error: /, '');
      const opt = err.code === 'commander.unknownOption' ? /'(.*)'/.exec(message)?.[1] : undefined;
      if (opt !== undefined && !/^--[a-z][a-z0-9-]*$/i.test(opt)) {
        // Commander stops at the first unknown option: the operands before it are the arguments it stands after.
        const hint = dashArgumentHint(parsing, opt, parsing.args.indexOf(opt), parsing.args.length);
        if (typeof hint === 'object' && hint !== null) message = hint.message;
        else if (hint !== null) message += ` (${hint})`;
      }
      usageExit(name, message);
    }
    if (err instanceof UsageError) usageExit(name, err.message);
    let message: string;
    if (err instanceof DataError) {
      message = formatPlace(err.place, err.message);
    } else {
      const e = err as Error;
      message = `internal error: ${e?.message ? e.message : String(err)}`;
      if (process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${e ? e.stack : e}\n`);
    }
    process.stderr.write(`${name}: ${visibleName(message)}\n`); // one line, whatever names it quotes
    process.exit(1);
  }
  // Writes still under way (to a pipe) are waited for by an empty write's callback; with
  // none, there is no write at all: an empty one fails on a full device (/dev/full).
  if (process.stdout.writableLength > 0) await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  // A write that failed says so in an 'error' event on a later tick.
  await new Promise<void>((resolve) => setImmediate(resolve));
  // Output that could not be written (a full disk under a redirection) is a failure, not a success.
  if (writeError) {
    const e = ioError(writeError, 'stdout', 'write output');
    process.stderr.write(`${name}: ${formatPlace(e.place, e.message)}\n`);
    process.exit(1);
  }
  process.exit(0);
}

/**
 * What a command says of an unknown option that may have been meant as an argument: a
 * hint after commander's message, or `{ message }` in its place; see dashArguments.
 */
type Hint = string | { message: string } | null;
export type DashHint = Hint | ((at: number, opt: string, count: number) => Hint | undefined);

const dashHints = new WeakMap<Command, DashHint>();

/**
 * Sets what `cmd` says when an argument that starts with '-' was read as an unknown
 * option: `hint` after commander's "unknown option '-x'", `{ message }` instead of it,
 * or nothing (null); a function is asked with the index of the argument (0 for the
 * first) in whose place the option stood, the option, and the number of arguments given
 * (the option among them), and undefined from it means the default. By default a
 * command that takes arguments says to put it after '--' (a domain `-a-.com` may start
 * with '-', and so may a Yacobot name written before add refused such names), and one
 * that takes none says nothing.
 */
export function dashArguments(cmd: Command, hint: DashHint): Command {
  dashHints.set(cmd, hint);
  return cmd;
}

function dashArgumentHint(cmd: Command, opt: string, at: number, count: number): Hint {
  const set = dashHints.get(cmd);
  const hint = typeof set === 'function' ? set(at, opt, count) : set;
  if (hint !== undefined) return hint;
  return cmd.registeredArguments.length > 0 ? `an argument that starts with '-' goes after '--', e.g. '-- ${opt}'` : null;
}

/** An option's value as an integer in [min, max], or a UsageError naming the option. */
export function intOption(name: string, min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  return (text) => {
    const n = parseCount(text);
    if (n === null || n < min || n > max) throw new UsageError(`${name} must be an integer from ${min} to ${max}, not '${text}'`);
    return n;
  };
}

function usageExit(name: string, message: string): never {
  process.stderr.write(`${name}: ${visibleName(message)}\nTry '${name} --help' for more information.\n`);
  process.exit(2);
}
