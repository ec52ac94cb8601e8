import * as os from 'node:os';
import type { ErrorCode } from './error-codes.js';

export type { ErrorCode };

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
  readonly code: ErrorCode;
  readonly place: Place | undefined;
  constructor(code: ErrorCode, message: string, place?: Place) {
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

// Control characters (C0, DEL, C1), format characters (bidi overrides such as U+202E,
// zero-width ones, U+FEFF, ...) and the line and paragraph separators U+2028/U+2029:
// each may break a message's line or hide or reorder the text around it.
const CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
const HAS_CONTROL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** Whether `s` holds a control or format character (what visibleName would escape). */
export function hasControl(s: string): boolean {
  return HAS_CONTROL.test(s);
}
const NAMED: Record<string, string> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/**
 * `s` fit for a one-line message: each control or format character (see CONTROL) shown
 * as `\t`, `\n`, `\r`, `\xHH` (below U+0080), `\uHHHH` or `\UHHHHHHHH`. For names from the
 * operator (a file name may hold any of them) and for whole messages before they are written.
 */
export function visibleName(s: string): string {
  return s.replace(CONTROL, (c) => {
    const cp = c.codePointAt(0)!;
    return NAMED[c] ?? (cp < 0x80 ? `\\x${hex(cp, 2)}` : cp <= 0xffff ? `\\u${hex(cp, 4)}` : `\\U${hex(cp, 8)}`);
  });
}

/**
 * `s` as the inside of bash's $'...': visibleName's escapes, but a character from
 * U+0080 up as its UTF-8 bytes, `\xHH` each. Bash reads `\uHHHH` as the character only
 * in a UTF-8 locale (in the C locale, as cron's often is, it stays six characters).
 */
function dollarQuoted(s: string): string {
  return s.replace(/[\\']/g, '\\$&').replace(CONTROL, (c) => {
    if (c.codePointAt(0)! < 0x80) return visibleName(c);
    return [...Buffer.from(c, 'utf8')].map((b) => `\\x${hex(b, 2)}`).join('');
  });
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
 * suggest. A word with a control or format character is quoted as $'...' (see
 * dollarQuoted): a message shows the command that works, on one line, in any locale.
 */
export function shellQuote(s: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(s)) return s;
  if (hasControl(s)) return `$'${dollarQuoted(s)}'`;
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
  const why = e?.code ? `${e.code}: ${sysMessage(e)}` : String(e?.message || err);
  // Node decodes a command line's bytes as UTF-8, a byte that is not as U+FFFD: a file whose
  // name is not UTF-8 cannot be named to it, and is then "not found" though `ls` shows it.
  const mangled = e?.code === 'ENOENT' && file.includes('\ufffd') ? ' (if the name is not UTF-8 text, Node cannot open the file by it: rename the file)' : '';
  return new DataError('IO', `cannot ${doing}: ${why}${mangled}`, { file });
}

function sysMessage(e: NodeJS.ErrnoException): string {
  // Node's message repeats the syscall and path; keep only the human part.
  const m = /^[A-Z]+: ([^,]+)/.exec(e.message || '');
  return m ? m[1]! : e.message;
}
