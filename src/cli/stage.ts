// The one stage runner: every bin/<stage> hands its StageDef to runStage(), which
// owns argument parsing, stdin/stdout, line numbering, EPIPE, exit codes, cleanup
// of temporary files, and the summary log line.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { DataError, UsageError, formatPlace, ioError, signalExitStatus, visibleName, type ErrorCode } from '../core/errors.js';
import { growPipe } from '../core/pipes.js';
import { PROJECT_ROOT } from '../core/root.js';
import { ByteLineSplitter, cutMark, type ByteLineFn, type LineScan } from '../core/lines.js';
import { liveTempFiles, removeQuietly, staleTemps } from '../core/temps.js';
import { Output, OutputClosed } from './output.js';
import { fstatQuietly, inputFailure, openInput, readBlocks, systemFailure, type InputSource } from './input.js';
import { onStopSignal } from './signals.js';
import { Progress } from './progress.js';
import { loadPino } from '../core/cjs.js';
import { loadCommander } from './commander.js';
import { REDACTING_HOOKS, guardOutput } from '../core/secrets.js';

/** Values that may appear in the summary line. */
export type Count = number | string | boolean | Record<string, number>;

/** What a stage sees of the process: its input lines, its output, its log. */
export interface StageContext {
  readonly name: string;
  /** Name of the input in messages: the file argument, or for stdin --input-name, else "-". */
  readonly inputName: string;
  /** The input as opened: the file argument, or "-" for stdin. */
  readonly inputPath: string;
  readonly log: Logger;
  readonly out: Output;
  /**
   * Feeds each input line as bytes (LF stripped); the last line must end in LF.
   * `afterChunk` is awaited after each chunk's lines. A line's bytes stay as they are
   * until `afterChunk` has ended (the next chunk may be read into the same buffer).
   * With `scan`, a line it passes comes to `fn` as `checked` (see LineScan).
   */
  eachLine(fn: ByteLineFn, afterChunk?: () => void | Promise<void>, scan?: LineScan): Promise<void>;
  /** Feeds the input's chunks, as read, to `fn` (awaiting it when it returns a promise); a chunk's bytes stay as they are until then. */
  eachChunk(fn: (chunk: Buffer) => void | Promise<void>): Promise<void>;
  /**
   * Reads the input into buffers the stage gives: each time into `room()` (from its
   * start), then `fn(n)` for the `n` bytes put there. A file is read straight into
   * them; a pipe's chunks are copied in.
   */
  eachBlock(room: () => Buffer, fn: (n: number) => void | Promise<void>): Promise<void>;
  /** Runs `fn` on every exit, success or not (before the summary line). */
  onExit(fn: () => void): void;
  /**
   * Registers the stage's counts for its summary line, as a function asked when the
   * line is written: so a stage that fails, is interrupted or loses its reader
   * reports how far it got, not an empty summary.
   */
  reportCounts(fn: () => Record<string, Count>): void;
}

/** A stage: its usage text, options, option normalization and its run over the context. */
export interface StageDef<O> {
  name: string;
  /** One line: what the stage does. */
  summary: string;
  /** The body of --help: what it reads and writes, what it buffers, columns, notes. */
  usage: string;
  /** False for a stage that reads no input (domains-from-db): no [input] argument, stdin untouched. */
  readsInput?: boolean;
  /** False for a stage whose output is files, not stdout (logsaver): its --help says so. */
  writesStdout?: boolean;
  /** The longest input line, without its LF (default DEFAULT_MAX_LINE, the record streams' limit). */
  maxLine?: number;
  /** Adds the stage's options to the command. */
  options?(cmd: Command): void;
  /** Validates and types the parsed options; throws UsageError. The one place options are normalized. */
  normalize(raw: Record<string, unknown>): O;
  run(ctx: StageContext, opts: O): Promise<void>;
}

const commonHelp = (readsInput: boolean, writesStdout: boolean) => `
Common to every stage:
  ${!readsInput ? 'Writes stdout (this stage reads no input);' : writesStdout ? 'Reads the input file (or stdin when it is "-" or absent) and writes stdout;' : 'Reads the input file (or stdin when it is "-" or absent); writes files, nothing\n  on stdout;'}
  logs JSON lines to stderr, ending with one summary line (counts and ms).
  Exit status: 0 success, 1 bad data or I/O failure, 2 usage error, 128+N
  stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP; temporary files
  removed).${
    writesStdout
      ? ` A closed stdout (| head) ends the stage quietly. The output
  of a run that failed or was stopped ends in "<stage>: failed, output incomplete"
  (no newline; not on a terminal), which the next stage refuses; a usage error
  writes nothing to stdout (a chain by hand wants set -o pipefail).`
      : ''
  }
  Errors read "<stage>: <file>:<line>: <message>"${
    readsInput
      ? `; stdin is "-" there, or
  NAME with --input-name NAME (as the cron runner names the reflog it hands over).`
      : '.'
  }
`;

/** A file option's value, or a UsageError: an empty name would fail only after the whole input was read. */
export function pathOption(flag: string, value: unknown, what = 'a file name'): string {
  const v = value === undefined ? '' : String(value);
  if (v === '') throw new UsageError(`${flag} wants ${what}`);
  return v;
}

/** What names one open stream: device and inode of a regular file, pipe or socket (not of a terminal or /dev/null, which many may share). */
function streamIdentity(st: fs.Stats): string | null {
  return st.isFile() || st.isFIFO() || st.isSocket() ? `${st.dev}:${st.ino}` : null;
}

function identityOf(stat: () => fs.Stats): string | null {
  try {
    return streamIdentity(stat());
  } catch {
    return null; // absent or unreadable: opening it will say so
  }
}

/**
 * Refuses a file option that names the stage's own input (`inputPath`, or stdin
 * for "-") or its stdout, such as `/dev/stdin` on a pipe or `> same-file`: the stage
 * would read its input as the option's file (or wait for itself on a pipe), or two
 * of its outputs would overwrite each other.
 */
export function refuseOwnStreams(flag: string, file: string, inputPath: string): void {
  const id = identityOf(() => fs.statSync(file));
  if (id === null) return;
  if (id === identityOf(() => (inputPath === '-' ? fs.fstatSync(0) : fs.statSync(inputPath)))) {
    throw new UsageError(`${flag} ${file} is the input itself`);
  }
  if (id === identityOf(() => fs.fstatSync(1))) throw new UsageError(`${flag} ${file} is stdout itself`);
}

export function packageVersion(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8'));
    return String(pkg.version);
  } catch {
    return 'unknown';
  }
}

/** Parses argv, runs the stage, and exits the process with 0, 1 or 2. Never returns normally. */
export async function runStage<O>(def: StageDef<O>, argv: string[] = process.argv): Promise<never> {
  const started = process.hrtime.bigint();
  // Loaded here, not with this module: a module that imports this one only for its
  // types and helpers has no use for them.
  const commander = loadCommander();
  const pino = loadPino();
  guardOutput(false); // stderr only: stdout is the stream
  const args = parseCommandLine(def, argv, commander);
  const log = pino({ name: def.name, level: args.logLevel, base: { stage: def.name }, hooks: REDACTING_HOOKS }, pino.destination({ fd: 2, sync: true }));
  staleTemps.report = (p) => log.warn({ removed: p }, `removed ${p}, left by a run that was killed (its process has ended)`);
  const out = new Output(process.stdout, undefined, true);
  const end: RunEnd = new RunEnd(def.name, def.writesStdout !== false, log, started);
  refuseReadOnlyStdout(end);
  // A stage runs at most a pipe's worth ahead of its reader: with Linux's 64 KiB the
  // chain's processes wait for each other and leave a core idle (docs/performance.md, "Where the time goes").
  // Not stdin when the input is a file: that pipe is someone else's (`... | while read f; do stage "$f"`).
  const pipes = { stdin: def.readsInput !== false && args.inputPath === '-' ? growPipe(0) : null, stdout: growPipe(1) };
  log.debug({ pipe_bytes: pipes }, 'pipe capacities');
  let input: InputSource;
  try {
    input = openInput(def.readsInput !== false, args.inputPath, args.inputName);
  } catch (err) {
    end.fail(err);
  }
  // A signal that came while the modules loaded (bin/<stage> catches them first) is acted on here.
  onStopSignal((sig) => end.interrupted(sig));
  // One turn of the event loop: a signal delivered during the load is dispatched at its
  // poll (Node 22+ may load without one), so it stops the stage before any work.
  await new Promise((resolve) => setImmediate(resolve));
  // Every way out of a run ends in process.exit: an event loop left with nothing to wait
  // for while the run is pending (a promise no one will settle, e.g. a job handed to a
  // worker thread that ended) would otherwise exit 0 with no output and no summary.
  process.on('beforeExit', () => end.fail(new Error('the stage stopped with its work unfinished (nothing left to wait for)')));
  const io = { bytesIn: 0, inputDone: false };
  // Long work says how far it got: its counts so far, every 10 s, in the log.
  const counts = () => ({ ...end.counts(), bytes_in: io.bytesIn, bytes_out: out.bytesOut, ...(io.inputDone && { input_done: true }) });
  new Progress({ log, terminal: false }, () => ({ fields: counts(), text: '' })).start();
  try {
    await def.run(stageContext(def, args, input, out, end, io), args.opts);
    await out.end();
    // A signal already delivered is acted on at the loop's next poll: a run that did all
    // its work without one (an empty database) must not end 'ok' before it.
    await new Promise((resolve) => setImmediate(resolve));
  } catch (err) {
    if (err instanceof OutputClosed) end.exit('output closed');
    end.fail(systemFailure(err));
  }
  end.exit('ok');
}

/** The command line as a stage takes it: its options (normalized), its input and its log level. */
interface StageArgs<O> {
  opts: O;
  /** The input as opened: the file argument, or "-" for stdin. */
  inputPath: string;
  /** Name of the input in messages. */
  inputName: string;
  logLevel: string;
}

/** The stage's command: the options every stage has, its input argument, its own options. */
function stageCommand(def: StageDef<unknown>, commander: ReturnType<typeof loadCommander>): Command {
  const cmd = new commander.Command(def.name)
    .description(`${def.summary}\n\n${def.usage.trim()}`)
    .version(packageVersion(), '--version', 'print the version and exit')
    .helpOption('-h, --help', 'print this help and exit')
    .option('--log-level <level>', 'stderr log level: debug, info, warn, error, silent', 'info')
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ outputError: () => undefined })
    .addHelpText('after', commonHelp(def.readsInput !== false, def.writesStdout !== false));
  if (def.readsInput !== false) {
    cmd.argument('[input]', 'input file; "-" or absent for stdin');
    cmd.option('--input-name <name>', 'the name messages give stdin (default "-")');
  }
  def.options?.(cmd);
  return cmd;
}

/** Parses argv; --help and --version exit 0, a usage error exits 2 (usageExit). */
function parseCommandLine<O>(def: StageDef<O>, argv: string[], commander: ReturnType<typeof loadCommander>): StageArgs<O> {
  const cmd = stageCommand(def as StageDef<unknown>, commander);
  // Checked after the parse, so that an unknown option is named before a missing one
  // (commander checks required options first: `--bogus` would read as "--current missing").
  const required = cmd.options.filter((opt) => opt.mandatory);
  for (const opt of required) opt.mandatory = false;
  try {
    cmd.parse(argv);
    const raw = cmd.opts();
    const missing = required.find((opt) => raw[opt.attributeName()] === undefined);
    if (missing) throw new UsageError(`required option '${missing.flags}' not specified`);
    const logLevel = String(raw.logLevel);
    if (!['debug', 'info', 'warn', 'error', 'silent', 'trace', 'fatal'].includes(logLevel)) {
      throw new UsageError(`bad --log-level '${logLevel}'`);
    }
    const inputPath = (cmd.args[0] as string | undefined) ?? '-';
    let inputName = inputPath;
    if (raw.inputName !== undefined) {
      const name = pathOption('--input-name', raw.inputName, 'a name');
      if (inputPath !== '-') throw new UsageError(`--input-name names stdin; the input is the file ${inputPath}`);
      inputName = visibleName(name); // the cron runner names its reflog by its path in the inbox
    }
    return { opts: def.normalize(raw), inputPath, inputName, logLevel };
  } catch (err) {
    if (err instanceof commander.CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) {
        process.exit(0);
      }
      usageExit(def.name, err.message.replace(/^error: /, ''));
    }
    if (err instanceof UsageError) usageExit(def.name, err.message);
    throw err;
  }
}

/**
 * Fails the run when stdout is a pipe's end open only for reading (`>&0`, `1<fifo`):
 * every write fails there, and libuv reports that as EPIPE, which would pass for a
 * reader gone (`| head`), exit 0 with nothing written. A write of no bytes gets EBADF
 * there and writes nothing.
 */
function refuseReadOnlyStdout(end: RunEnd): void {
  if (!fstatQuietly(1)?.isFIFO()) return;
  try {
    fs.writeSync(1, Buffer.alloc(0));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EBADF') end.fail(ioError(err, 'stdout', 'write output'));
  }
}

/** What the stage's run sees: its input as lines or chunks, its output, its log, its exit hooks and counts. */
function stageContext(
  def: StageDef<unknown>,
  args: StageArgs<unknown>,
  input: InputSource,
  out: Output,
  end: RunEnd,
  io: { bytesIn: number; inputDone: boolean },
): StageContext {
  const { inputName } = args;
  // Feeds input chunks to a splitter; output is flushed between chunks, never per line.
  const pump = async (push: (chunk: Buffer) => void | Promise<void>) => {
    try {
      for await (const chunk of input.chunks()) {
        io.bytesIn += chunk.length;
        const p = push(chunk);
        if (p) await p;
        await out.flushIfFull();
      }
      io.inputDone = true;
    } catch (err) {
      throw inputFailure(err, inputName);
    }
  };
  return {
    name: def.name,
    inputName,
    inputPath: args.inputPath,
    log: end.log,
    out,
    onExit: (fn) => end.onExit(fn),
    reportCounts: (fn) => end.reportCounts(fn),
    async eachLine(fn, afterChunk, scan) {
      const splitter = new ByteLineSplitter(inputName, def.maxLine);
      await pump((chunk) => {
        try {
          splitter.push(chunk, fn, scan);
        } catch (err) {
          // A stage's core names no place: the line it was given is the one at fault.
          throw err instanceof DataError && !err.place ? new DataError(err.code, err.message, { file: inputName, line: splitter.lineNo }) : err;
        }
        return afterChunk?.();
      });
      splitter.end();
    },
    eachChunk: (fn) => pump(fn),
    async eachBlock(room, fn) {
      // A stream's bytes are counted by pump; a file's, read straight into the blocks, here.
      const counted =
        input.fd === null
          ? fn
          : (n: number) => {
              io.bytesIn += n;
              return fn(n);
            };
      await readBlocks(input, room, counted, pump, () => out.flushIfFull(), inputName);
      io.inputDone = true;
    },
  };
}

/**
 * How a run ends, whichever way: its exit hooks run (then its temporary files go),
 * its counts go into its one summary line, and the process exits with its status.
 */
class RunEnd {
  private readonly hooks: (() => void)[] = [];
  private readonly reporters: (() => Record<string, Count>)[] = [];

  constructor(
    private readonly name: string,
    private readonly writesStdout: boolean,
    readonly log: Logger,
    private readonly started: bigint,
  ) {}

  onExit(fn: () => void): void {
    this.hooks.push(fn);
  }

  reportCounts(fn: () => Record<string, Count>): void {
    this.reporters.push(fn);
  }

  /** The counts for the summary line: every reporter's current values (a reporter that throws is left out). */
  counts(): Record<string, Count> {
    const counts: Record<string, Count> = {};
    for (const fn of this.reporters) {
      try {
        Object.assign(counts, fn());
      } catch {
        /* the summary must still be written */
      }
    }
    return counts;
  }

  /** Ends a run that finished ('ok') or lost its reader ('output closed'): exit 0. */
  exit(status: 'ok' | 'output closed'): never {
    this.runHooks();
    summary(this.log, 'info', { status, ...this.counts() }, this.started);
    process.exit(0);
  }

  /** Ends a run stopped by `sig`, with the signal's exit status. */
  interrupted(sig: NodeJS.Signals): never {
    this.cleanupFailed();
    // Still the run's one summary line (the runner reads the counts of a stopped stage too).
    summary(this.log, 'warn', { status: 'interrupted', signal: sig, ...this.counts() }, this.started);
    process.exit(signalExitStatus(sig));
  }

  /** Ends a failed run: the message on stderr, exit 1 (2 for a usage error). */
  fail(err: unknown): never {
    if (err instanceof UsageError) {
      this.runHooks();
      usageExit(this.name, err.message);
    }
    this.cleanupFailed();
    let message: string;
    let code: ErrorCode;
    if (err instanceof DataError) {
      message = formatPlace(err.place, err.message);
      code = err.code;
    } else {
      // A bug, not bad data: say so plainly; the stack only when asked for.
      const e = err as Error;
      message = `internal error: ${e?.message ? e.message : String(err)}`;
      code = 'INTERNAL';
      if (process.env.MASTER_SERVER_DEBUG) process.stderr.write(`${e ? e.stack : e}\n`);
    }
    // One line, whatever names the message quotes (a file name may hold a newline).
    message = visibleName(message);
    process.stderr.write(`${this.name}: ${message}\n`);
    summary(this.log, 'error', { status: 'failed', error_code: code, error: message, ...this.counts() }, this.started);
    process.exit(1);
  }

  private runHooks(): void {
    for (const fn of this.hooks.splice(0).reverse()) {
      try {
        fn();
      } catch {
        /* cleanup must not mask the real outcome */
      }
    }
    for (const f of liveTempFiles) removeQuietly(f);
  }

  /**
   * The hooks, then a failed run's output is cut: Output holds back its last LF, so the
   * next stage refuses it as cut off; the mark says why to a person who reads it, and
   * stands for the cut when nothing was written yet (an empty output would pass for an
   * empty hour).
   */
  private cleanupFailed(): void {
    this.runHooks();
    if (this.writesStdout) cutOutput(this.name, (m) => this.log.warn(m));
  }
}

/**
 * Ends stdout, after what a failed run handed out (its last line without the LF that
 * Output holds back; gathered bytes not yet handed are dropped), in `text` with no LF.
 * Written straight to the descriptor, which Node keeps non-blocking: a pipe
 * whose reader does not drain it within 2 s goes without (an exit must not hang):
 * 'stalled' then; 'refused' when stdout failed the write (EPIPE: its reader is gone).
 */
function markCut(text: string): 'written' | 'stalled' | 'refused' {
  const b = Buffer.from(text);
  const giveUp = Date.now() + 2000;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      fs.writeSync(1, b); // under PIPE_BUF: all of it or EAGAIN
      return 'written';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return 'refused';
      if (Date.now() > giveUp) return 'stalled';
      Atomics.wait(nap, 0, 0, 5);
    }
  }
}

/**
 * Writes the run's one summary line: `fields` (status first, then counts), the process's
 * peak RSS so far in MiB (worker threads included) and the ms since `started`.
 */
function summary(log: Logger, level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, started: bigint): void {
  const ms = Number((process.hrtime.bigint() - started) / 1_000_000n);
  const peakRssMib = Math.round(process.resourceUsage().maxRSS / 102.4) / 10;
  log[level]({ summary: true, ...fields, peak_rss_mib: peakRssMib, ms }, 'summary');
}

/**
 * Exits 2 with the message and the hint, stdout untouched: a usage error refuses the
 * command line before any work, and says so at once (the cron runner checks every
 * stage's exit status; a shell chain by hand wants `set -o pipefail`).
 */
function usageExit(name: string, message: string): never {
  process.stderr.write(`${name}: ${visibleName(message)}\nTry '${name} --help' for more information.\n`);
  process.exit(2);
}

/**
 * Ends the stdout of a stage that did not finish in the cut mark (markCut), so that the
 * next stage refuses it, also when nothing was written (`a | b` with `a` failing at
 * once: `b` saw an empty input and, down the chain, filter-url wrote a next current_log
 * and logsaver exited 0). Not on a terminal (a person reads the message), and not
 * when the reader is gone (EPIPE: no one reads the stream); `warn` when the reader
 * took nothing for 2 s.
 */
function cutOutput(name: string, warn: (message: string) => void): void {
  if (process.stdout.isTTY) return;
  const r = markCut(cutMark(name));
  if (r === 'stalled') warn('could not mark the output as cut off (its reader took nothing for 2 s): it ends without its last LF all the same');
}
