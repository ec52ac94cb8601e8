// What the runner tells its operator: each message once on stderr (`PROG: text`, a
// warning as `PROG: warning: text`), after the pino event that records it, if any.
import type { Logger } from 'pino';

export const PROG = 'reflog-to-yacobot-queue';

/** A pino event: its level (warn for a warning, info otherwise, unless given), fields and message. */
export interface LogEvent {
  level?: 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  msg: string;
}

/** The runner's voice: the log (null before there is one) and its two kinds of lines on stderr. */
export interface Say {
  readonly log: Logger | null;
  /** `event` (level warn unless given) to the log, then `PROG: warning: text` on stderr. */
  warn(text: string, event?: LogEvent): void;
  /** `event` (level info unless given) to the log, then `PROG: text` on stderr. */
  tell(text: string, event?: LogEvent): void;
}

/** A Say that logs to `log` (nothing when null) and writes to stderr. */
export function sayTo(log: Logger | null): Say {
  const record = (e: LogEvent | undefined, level: 'info' | 'warn') => {
    if (e !== undefined && log !== null) log[e.level ?? level](e.fields, e.msg);
  };
  return {
    log,
    warn(text, event) {
      record(event, 'warn');
      process.stderr.write(`${PROG}: warning: ${text}\n`);
    },
    tell(text, event) {
      record(event, 'info');
      process.stderr.write(`${PROG}: ${text}\n`);
    },
  };
}
