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

const CONTROL = /[\x00-\x1f\x7f]/g;
const HAS_CONTROL = /[\x00-\x1f\x7f]/;

/** Whether `s` holds a control character (what visibleName would escape). */
export function hasControl(s: string): boolean {
  return HAS_CONTROL.test(s);
}
const NAMED: Record<string, string> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/**
 * `s` fit for a one-line message: each control character shown as `\t`, `\n`, `\r` or
 * `\xHH`. For names from the operator (a file name may hold any of them) and for
 * whole messages before they are written.
 */
export function visibleName(s: string): string {
  return s.replace(CONTROL, (c) => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/**
 * Shortens a value quoted in a message, leaving its control characters to visibleName,
 * which every message goes through as it is written (`\n` tells more than a space or
 * `?`). Not for the rejects file, a TSV: records.ts clip() is.
 */
export function clipText(s: string, max = 60): string {
  return s.length > max ? `${s.slice(0, max)}...` : s;
}

/**
 * Quotes one word for bash: for the scripts the runner runs and the commands messages
 * suggest. A word with a control character is quoted as $'...', which spells it in
 * visibleName's escapes: a message shows the command that works, on one line.
 */
export function shellQuote(s: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(s)) return s;
  if (hasControl(s)) return `$'${visibleName(s.replace(/[\\']/g, '\\$&'))}'`;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Formats `file:line: message` (or `file: message`) as GNU tools do, the file name as visibleName shows it. */
export function formatPlace(place: Place | undefined, message: string): string {
  if (!place) return message;
  const file = visibleName(place.file);
  return place.line === undefined ? `${file}: ${message}` : `${file}:${place.line}: ${message}`;
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
