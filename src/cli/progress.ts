// Progress of long work, on stderr only: an `info` log line every 10 s, and on a
// terminal a one-line display redrawn in place. Shared by the stages, the cron runner
// and partner-db; silent when the log level is above info.
import type { Logger } from 'pino';

/** Every how many ms a progress line is logged: 10 s, or MASTER_SERVER_PROGRESS_MS (digits, for tests). */
export function progressEveryMs(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.MASTER_SERVER_PROGRESS_MS;
  return v !== undefined && /^[1-9]\d{0,8}$/.test(v) ? Number(v) : 10_000;
}

/** How often the terminal line is redrawn. */
const DRAW_MS = 500;

/** What the work says of itself when asked: fields for the log line, and the terminal line's text. */
export interface ProgressNow {
  fields: Record<string, unknown>;
  text: string;
}

/** Where progress goes: the log (null: none) and, when a terminal, stderr's one line. */
export interface ProgressSink {
  log: Logger | null;
  /** Draw the terminal line (default: when stderr is a terminal and the log level shows info). */
  terminal?: boolean;
  /** A program without a log: its name, and the text as a plain stderr line `NAME: text` (when it draws no terminal line). */
  plain?: string;
  /** When the work began (Date.now(); default: now), for elapsed_s. */
  since?: number;
}

/**
 * Progress of one piece of work: `tick()` (cheap: a clock read) logs `{progress:
 * {elapsed_s, ...fields}}` at info every progressEveryMs and redraws the terminal line
 * every 0.5 s; `start()` also ticks from a timer, for work that yields to the event
 * loop; synchronous work calls `tick()` itself, once per batch. `stop()` clears the line.
 */
export class Progress {
  private readonly t0: number;
  private readonly everyMs = progressEveryMs();
  private nextLog: number;
  private nextDraw = 0;
  private drawn = false;
  private timer: NodeJS.Timeout | null = null;
  /** The timer's step (0 without one: then the caller's ticks decide). */
  private step = 0;
  private readonly logs: boolean;
  private readonly draws: boolean;

  constructor(
    private readonly sink: ProgressSink,
    private readonly now: () => ProgressNow,
  ) {
    this.t0 = sink.since ?? Date.now();
    this.logs = sink.log === null ? sink.plain !== undefined : sink.log.isLevelEnabled('info');
    this.draws = (sink.terminal ?? process.stderr.isTTY === true) && (sink.log === null || this.logs);
    this.nextLog = this.t0 + this.everyMs;
  }

  /** Seconds since the work began, to a tenth. */
  elapsed(): number {
    return Math.round((Date.now() - this.t0) / 100) / 10;
  }

  /** Ticks every 0.5 s from a timer that does not keep the process alive; returns this. */
  start(): this {
    if (this.timer === null && (this.logs || this.draws)) {
      this.step = Math.max(20, Math.min(DRAW_MS, this.everyMs));
      this.timer = setInterval(() => this.tick(), this.step);
      this.timer.unref();
    }
    return this;
  }

  /** Logs and draws what is due by now. */
  tick(): void {
    if (!this.logs && !this.draws) return;
    const t = Date.now();
    // Logged a tick or two before the line is due: lines stay within everyMs of each
    // other though the timer fires late (a busy machine, a niced process).
    const logDue = this.logs && t + 2 * this.step >= this.nextLog;
    if (!logDue && (!this.draws || t < this.nextDraw)) return;
    const now = this.safely();
    if (now === null) return;
    if (logDue) {
      this.nextLog = t + this.everyMs;
      this.logLine(now);
    }
    if (this.draws) {
      this.nextDraw = t + DRAW_MS;
      process.stderr.write(`\r\x1b[K${this.sink.plain === undefined ? '' : `${this.sink.plain}: `}${now.text}, ${Math.round(this.elapsed())} s`);
      this.drawn = true;
    }
  }

  /** Stops the timer and clears the terminal line. */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.clear();
  }

  /** The log's progress line; without a log, the text as a line (unless the terminal shows it). */
  private logLine(now: ProgressNow): void {
    if (this.sink.log === null) {
      if (!this.draws) process.stderr.write(`${this.sink.plain}: ${now.text}, ${Math.round(this.elapsed())} s\n`);
      return;
    }
    this.clear();
    this.sink.log.info({ progress: { elapsed_s: this.elapsed(), ...now.fields } }, 'progress');
  }

  /** Clears the terminal line (drawn again at the next tick): before another line goes to stderr. */
  clear(): void {
    if (!this.drawn) return;
    process.stderr.write('\r\x1b[K');
    this.drawn = false;
  }

  /** What the work says, or null when asking failed (progress must never fail the work). */
  private safely(): ProgressNow | null {
    try {
      return this.now();
    } catch {
      return null;
    }
  }
}

/** `n` bytes in MiB or GiB, one decimal. */
export function sizeText(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${(n / 2 ** 20).toFixed(1)} MiB`;
}

/** `n` with thousands separators (1,234,567). */
export function countText(n: number): string {
  return n.toLocaleString('en-US');
}

/** `part` of `whole` as a whole percentage (0 when there is no whole). */
export function percentOf(part: number, whole: number): number {
  return whole > 0 ? Math.floor((100 * Math.min(part, whole)) / whole) : 0;
}
