import * as os from 'node:os';

/** Where a problem was found: a file name ("-" for stdin) and a 1-based line number. */
export interface Place {
  file: string;
  line?: number;
}

/**
 * Bad data or a failed operation: the stage stops with exit status 1 and prints
 * `<stage>: <file>:<line>: <message>`. `code` is a stable machine-readable name.
 */
export class DataError extends Error {
  readonly code: string;
  readonly place: Place | undefined;
  constructor(code: string, message: string, place?: Place) {
    super(message);
    this.name = 'DataError';
    this.code = code;
    this.place = place;
  }
}

/** Wrong arguments: exit status 2 and a "Try '<stage> --help'" hint. */
export class UsageError extends Error {
  readonly code = 'USAGE';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The exit status of a program stopped by `signal`, as the shell reports one killed by it: 128 + its number (SIGHUP 129, SIGINT 130, SIGTERM 143). */
export function signalExitStatus(signal: NodeJS.Signals): number {
  return 128 + os.constants.signals[signal];
}

/** Quotes one word for bash: for the scripts the runner runs and the commands messages suggest. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Formats `file:line: message` (or `file: message`) as GNU tools do. */
export function formatPlace(place: Place | undefined, message: string): string {
  if (!place) return message;
  return place.line === undefined ? `${place.file}: ${message}` : `${place.file}:${place.line}: ${message}`;
}

/** Turns a Node system error (ENOENT, ENOSPC, EACCES, ...) into a DataError naming the file. */
export function ioError(err: unknown, file: string, doing: string): DataError {
  const e = err as NodeJS.ErrnoException;
  const why = e && e.code ? `${e.code}: ${sysMessage(e)}` : String((e && e.message) || err);
  return new DataError('IO', `cannot ${doing}: ${why}`, { file });
}

function sysMessage(e: NodeJS.ErrnoException): string {
  // Node's message repeats the syscall and path; keep only the human part.
  const m = /^[A-Z]+: ([^,]+)/.exec(e.message || '');
  return m ? m[1]! : e.message;
}
