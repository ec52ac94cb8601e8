// What a stage's log says: its summary line, messages and warnings, the message a
// failed stage gives, its counts for runs.jsonl, and what an upload-domains log says it
// committed.
import { UNTERMINATED_WARNING } from '../../core/records.js';

/**
 * What a stage said on stderr, from its log file (`file`) and the runner's copy of the
 * last bytes of the stream (`tail`; `cut`: its start was dropped): the file when it holds
 * the whole of that copy, else the copy (the file could not be written: a full disk),
 * from its first whole line.
 */
export function stageText(file: string, tail: string | null, cut: boolean): string {
  if (tail === null || file.endsWith(tail)) return file;
  if (!cut) return tail;
  const lf = tail.indexOf('\n');
  return lf < 0 ? '' : tail.slice(lf + 1);
}

/** What a stage left in its log: its summary line (pino JSON) and its plain-text messages. */
export interface StageOutcome {
  name: string;
  exit: number;
  summary: Record<string, unknown> | null;
  messages: string[];
  /** The `msg` of each warning the stage logged (level warn, not its summary). */
  warnings?: string[];
}

/**
 * Splits a stage's stderr into the last summary line, the non-JSON lines and the
 * messages of its warnings.
 */
export function readStageLog(name: string, exit: number, text: string): StageOutcome {
  let summary: Record<string, unknown> | null = null;
  const messages: string[] = [];
  const warnings: string[] = [];
  for (const l of text.split('\n')) {
    if (l.trim() === '') continue;
    const o = jsonLogLine(l);
    if (o === null) messages.push(l);
    else if (o.summary === true) summary = o;
    else if (o.level === 40 && typeof o.msg === 'string') warnings.push(o.msg);
  }
  return { name, exit, summary, messages, warnings };
}

/**
 * The stages' warnings the runner repeats on its stderr (their logs are removed with
 * the staging area), in stage order: all but analyze-dump's cut last line, which the
 * runner says in its own words.
 */
export function repeatedWarnings(outcomes: readonly StageOutcome[]): { stage: string; warning: string }[] {
  const out: { stage: string; warning: string }[] = [];
  for (const s of outcomes) {
    for (const w of s.warnings ?? []) {
      if (s.name === 'analyze-dump' && w === UNTERMINATED_WARNING) continue;
      out.push({ stage: s.name, warning: w });
    }
  }
  return out;
}

/** A pino log line as an object, or null for anything else (a plain message, a line torn by a crash). */
export function jsonLogLine(l: string): Record<string, unknown> | null {
  if (!l.startsWith('{')) return null;
  try {
    const o: unknown = JSON.parse(l);
    return o !== null && typeof o === 'object' ? (o as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** A commit an upload-domains log announced and did not confirm: it died during its COMMIT. */
export interface PendingCommit {
  /** The rows the transaction inserts. */
  rows: number;
  /** The transaction's own token: in domain_commit iff COMMIT happened (absent from a line of a stage before domain_commit). */
  token?: string;
  /** One domain among them (null when none): with `added_at`, what a line without a token is decided by. */
  witness: string | null;
  added_at: string;
}

/**
 * What an upload-domains log says its transaction assigned: `assigned_by_us` of the
 * last JSON line that carries it (the line logged right after the commit, or the
 * summary), or 0 (it never committed); `pending` when the last such line is instead
 * the one logged just before COMMIT (the stage died in between: the database knows).
 */
export function assignedInLog(text: string): { assigned: number; pending: PendingCommit | null } {
  let assigned = 0;
  let pending: PendingCommit | null = null;
  for (const l of text.split('\n')) {
    const o = jsonLogLine(l);
    if (typeof o?.assigned_by_us === 'number') {
      assigned = o.assigned_by_us;
      pending = null;
    } else if (typeof o?.committing === 'number' && typeof o.added_at === 'string') {
      pending = {
        rows: o.committing,
        ...(typeof o.token === 'string' && { token: o.token }),
        witness: typeof o.witness === 'string' ? o.witness : null,
        added_at: o.added_at,
      };
    }
  }
  return { assigned, pending };
}

/**
 * The message of an exception a stage did not catch (one it could not, as a module
 * that fails to load), as Node prints it after the source excerpt: the line
 * "Error [CODE]: text" or "TypeError: text" and its continuation lines, up to the
 * stack, joined by spaces; null when there is none.
 */
function uncaughtMessage(messages: readonly string[]): string | null {
  // V8 itself reports running out of heap ("FATAL ERROR: ... JavaScript heap out of memory").
  const fatal = messages.find((m) => m.startsWith('FATAL ERROR: '));
  if (fatal) return fatal;
  const i = messages.findIndex((m) => /^(?:[A-Z]\w*)?(?:Error|Exception)(?: \[\w+\])?(?:: |$)/.test(m));
  if (i < 0) {
    // A thrown value that is not an Error (`throw "text"`): Node prints it alone, just
    // before its hint "(Use `node --trace-uncaught ...`".
    const hint = messages.findIndex((m) => m.startsWith('(Use `node --trace-uncaught'));
    return hint > 0 ? `uncaught exception: ${messages[hint - 1]}` : null;
  }
  const lines = [messages[i]!];
  for (let j = i + 1; j < messages.length && !/^\s+at /.test(messages[j]!) && !/^Node\.js v/.test(messages[j]!); j++) lines.push(messages[j]!.trim());
  return lines.join(' ');
}

/**
 * The one-line reason a failed stage gives: its own message, else the message of
 * an exception it did not catch (not Node's first line, a source location), else
 * its first line of stderr, its summary's error or its status.
 */
export function failureMessage(s: StageOutcome): string {
  const own = s.messages.find((m) => m.startsWith(`${s.name}:`));
  if (own) return own;
  const uncaught = uncaughtMessage(s.messages);
  if (uncaught) return `${s.name}: ${uncaught}`;
  if (s.messages[0]) return s.messages[0];
  if (s.summary && typeof s.summary.error === 'string') return `${s.name}: ${s.summary.error}`;
  return s.exit > 128 ? `${s.name}: killed by signal ${s.exit - 128}` : `${s.name}: exit status ${s.exit}`;
}

const PINO_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'name', 'stage', 'summary', 'msg']);

/** Per-stage counts for runs.jsonl: lines_in, records_out, rejected, skipped (as each stage names them) and the rest. */
export function stageCounts(s: StageOutcome): Record<string, unknown> {
  const c: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.summary ?? {})) if (!PINO_FIELDS.has(k)) c[k] = v;
  const num = (...keys: string[]): number | null => {
    for (const k of keys) if (typeof c[k] === 'number') return c[k] as number;
    return null;
  };
  const linesIn = num('lines_in', 'records_in', 'incoming');
  const out = num('records_out', 'sent', 'domains_out');
  const norm: Record<string, unknown> = { exit: s.exit };
  norm.lines_in = linesIn;
  norm.records_out = s.name === 'logsaver' ? num('records_in') : out;
  norm.rejected = num('rejected') ?? 0;
  norm.skipped = num('skipped') ?? 0;
  return { ...norm, ...c };
}
