// The pure part of the runner: which reflogs, in what order, under which names
// and "now"; the stage command lines; reading stage logs; the runs.jsonl record
// and the human summary. No processes, no file system.
import * as path from 'node:path';
import type { RekeyReport } from './rekey.js';
import { clipText, hasControl, shellQuote, visibleName } from '../core/errors.js';
import { formatDuration, formatTimestamp, isValidTimestamp, timestampToMs } from '../core/time.js';
import { UNTERMINATED_WARNING } from '../core/records.js';
import type { RunnerOptions } from './options.js';
import { limitStage } from './carry.js';

export const REFLOG_EXT = '.reflog';

/** Why a run name cannot be used, or null. The name becomes a file name in several directories. */
export function checkRunName(name: string): string | null {
  if (name === '') return 'is empty';
  if (name.startsWith('.')) return "starts with '.'";
  // hasControl: logsaver refuses a queue name (the run name) with such a character.
  // \p{Zs}: a no-break or ideographic space (U+00A0, U+3000, ...) is a space to the eye too.
  if (!/^[\x21-\x7e\u0080-\uffff]+$/.test(name) || /[/\\\p{Zs}]/u.test(name) || hasControl(name)) return 'contains a space, a slash or a control character';
  if (Buffer.byteLength(name) > 200) return 'is longer than 200 bytes';
  // Node reads a name that is not UTF-8 with U+FFFD in place of its bad bytes: that name
  // cannot be opened again, and the run would fail every time, holding up the inbox.
  if (name.includes('\ufffd')) return 'is not valid UTF-8 (rename the file; ls -b shows its bytes as escapes)';
  return null;
}

/**
 * The reflogs to process, from the inbox's directory entries: `*.reflog` files not
 * starting with '.', in bytewise order of their names (Hour stamps sort oldest
 * first). Names that cannot be run names come back in `skipped` with the reason.
 */
export function planInbox(entries: readonly string[]): { runs: string[]; skipped: { file: string; why: string }[] } {
  const runs: string[] = [];
  const skipped: { file: string; why: string }[] = [];
  for (const f of entries) {
    if (!f.endsWith(REFLOG_EXT) || f.startsWith('.')) continue;
    const name = f.slice(0, -REFLOG_EXT.length);
    const bad = checkRunName(name);
    if (bad) skipped.push({ file: f, why: `run name '${visibleName(name)}' ${bad}` });
    else runs.push(name);
  }
  runs.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return { runs, skipped };
}

/** Where a run's "now" came from. */
export type NowSource = 'flag' | 'name' | 'clock' | 'stored';

/** The start of the hour a run name starts with (YYYYMMDDhh...) as a timestamp, or null when it starts with no real hour. */
function hourStartOf(name: string): string | null {
  const m = /^(\d{10})/.exec(name);
  if (!m) return null;
  const start = `${m[1]}0000`;
  return isValidTimestamp(start) ? start : null;
}

/**
 * The end of the hour a run name starts with (YYYYMMDDhh...), as a timestamp in the
 * local zone, or null when the name does not start with a real hour.
 */
export function hourEndOf(name: string): string | null {
  const start = hourStartOf(name);
  if (start === null) return null;
  const end = formatTimestamp(new Date(timestampToMs(start) + 3_600_000));
  // The last hour of 9999 ends in a year of five digits, which no stage takes as a time.
  return isValidTimestamp(end) ? end : null;
}

/**
 * Why a run whose now comes from its name must wait: its hour has not begun by `clock`
 * (a typo, 2107 for 2011). Its now would have filter-url drop every current_log entry
 * last seen `keepMs` before it, and the hours after it send all of them again. Null
 * when the name starts with no hour, or one that has begun.
 */
export function hourNotBegun(name: string, clock: Date, keepMs: number): string | null {
  const start = hourStartOf(name);
  if (start === null || timestampToMs(start) <= clock.getTime()) return null;
  const end = hourEndOf(name);
  const forgets = end === null ? 'every URL' : `every URL last seen before ${formatTimestamp(new Date(timestampToMs(end) - keepMs))}`;
  return (
    `its hour (${start}) has not begun by this machine's clock (${formatTimestamp(clock)}): a typo in the name? ` +
    `Run now, it would make current_log forget ${forgets}; it runs once its hour has begun (or rename it)`
  );
}

/**
 * Why a run whose now would come from the clock must wait: its name starts with what
 * reads as an hour stamp YYYYMMDDhh (month 01-12, day 01-31, hour 00-29) but is no real
 * hour (2011072824, 2011023112: a typo), so its now would be the clock's, far from the
 * hour meant, and filter-url would drop every current_log entry not seen within `--keep`
 * of that. Null for a real hour, and for other names, ten digits too (epoch seconds
 * 1311836400, a sequence number 0000000042): those run on the clock.
 */
export function notAnHour(name: string): string | null {
  if (!/^\d{4}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])[0-2]\d/.test(name) || hourEndOf(name) !== null) return null;
  return (
    `its name starts with ${name.slice(0, 10)}, which is no real hour (YYYYMMDDhh): a typo in the name? ` +
    "Its now would be this machine's clock, and current_log would forget every URL not seen since --keep before that; rename it (or give --now)"
  );
}

/** The "now" of a new run: --now, else the end of the name's hour, else the clock (see USAGE). */
export function resolveNow(name: string, flagNow: string | null, clock: Date): { now: string; source: NowSource } {
  if (flagNow !== null) return { now: flagNow, source: 'flag' };
  const h = hourEndOf(name);
  if (h !== null) return { now: h, source: 'name' };
  return { now: formatTimestamp(clock), source: 'clock' };
}

/** A committed run's name and now, and the --keep it ran with when its line says. */
export interface CommittedNow {
  run: string;
  now: string;
  keepMs?: number;
}

/** The committed run (status ok, a run name, a real now) of runs.jsonl line `r`, or null. */
function committedNow(r: unknown): CommittedNow | null {
  const { run, now, status, keep_ms } = (r ?? {}) as { run?: unknown; now?: unknown; status?: unknown; keep_ms?: unknown };
  if (status !== 'ok' || typeof run !== 'string' || typeof now !== 'string' || !isValidTimestamp(now)) return null;
  return Number.isSafeInteger(keep_ms) && (keep_ms as number) >= 0 ? { run, now, keepMs: keep_ms as number } : { run, now };
}

/** Up to when run `c` made current_log forget: its now less its --keep (`keepMs` when its line does not say). */
function forgottenUpTo(c: CommittedNow, keepMs: number): number {
  return timestampToMs(c.now) - (c.keepMs ?? keepMs);
}

/**
 * Of `records` (runs.jsonl lines, oldest first) and `from`, the committed run whose
 * forgetting reaches latest (its now less its --keep; `keepMs` for a line without
 * keep_ms), the last of equals; null when there is none. Lines without a run name or a
 * real now are left out. With one --keep throughout, the run with the latest now.
 */
export function mostForgetful(records: readonly unknown[], keepMs: number, from: CommittedNow | null = null): CommittedNow | null {
  let most = from;
  for (const r of records) {
    const c = committedNow(r);
    if (c !== null && (most === null || forgottenUpTo(c, keepMs) >= forgottenUpTo(most, keepMs))) most = c;
  }
  return most;
}

/**
 * For each run name committed (status ok) among `records` (runs.jsonl lines, oldest
 * first): mostForgetful of the lines after its last committed one (null when none).
 * Only those runs can have made current_log forget what that run recorded.
 */
export function mostForgetfulSince(records: readonly unknown[], keepMs: number): Map<string, CommittedNow | null> {
  const out = new Map<string, CommittedNow | null>();
  let most: CommittedNow | null = null;
  for (let i = records.length - 1; i >= 0; i--) {
    const { run, status } = (records[i] ?? {}) as { run?: unknown; status?: unknown };
    if (status !== 'ok' || typeof run !== 'string') continue;
    if (!out.has(run)) out.set(run, most);
    // Read backwards: an equal reach leaves the later line, as mostForgetful does.
    const c = committedNow(records[i]);
    if (c !== null && (most === null || forgottenUpTo(c, keepMs) > forgottenUpTo(most, keepMs))) most = c;
  }
  return out;
}

/**
 * The warning for run `run` with `now` when run `most` (mostForgetful) has made
 * current_log forget what was last seen at `now` (`replayed`: a run of that name was
 * committed before) or after it (a reflog that comes late), else null. filter-url, at
 * that run, dropped every current_log entry last seen its --keep (`most.keepMs`, else
 * `keepMs`) or more before its now: at exactly that, all of this run's own hour, which
 * only a replay had recorded; beyond, the hours after it as well.
 */
export function replayWarning(run: string, now: string, most: CommittedNow | null, keepMs: number, replayed: boolean): string | null {
  if (most === null) return null;
  const keep = most.keepMs ?? keepMs;
  const mostMs = timestampToMs(most.now);
  const older = mostMs - timestampToMs(now);
  if (older <= 0 || older < keep || (older === keep && !replayed)) return null;
  const forgotten = formatTimestamp(new Date(mostMs - keep));
  const ran = most.keepMs === undefined ? `, and --keep is ${formatDuration(keep)}` : `, which ran with --keep ${formatDuration(keep)}`;
  return (
    `${run}: its now (${now}) is ${formatDuration(older)} older than that of run ${most.run} (${most.now})${ran}: ` +
    `current_log has forgotten the URLs last seen up to ${forgotten}, and those in this reflog are sent again (see "Replay a reflog" in docs/operations.md)`
  );
}

/** The files of one run's staging area, all under STATE/staging/RUN/. */
export interface RunPaths {
  name: string;
  /** The name of the run's queue files: its own, or a replay's (see RunJson.queue). */
  queueName: string;
  reflog: string;
  staging: string;
  runJson: string;
  commit: string;
  work: string;
  tmp: string;
  logs: string;
  queue: string;
  currentNext: string;
  /** The current_log join-current reads: STATE/current_log, or its re-keyed copy in work/ (rekey.ts). */
  currentIn: string;
  rejects: string;
  /** STATE/rejects/RUN.tsv, where the staged rejects are kept. */
  rejectsKept: string;
  /** STATE/rejects/failed/RUN.tsv, where a failed attempt's rejects are kept. */
  rejectsFailed: string;
}

/** The staging layout of run `name`. */
export function runPaths(o: Pick<RunnerOptions, 'inbox' | 'state'>, name: string): RunPaths {
  const staging = path.join(o.state, 'staging', name);
  const work = path.join(staging, 'work');
  return {
    name,
    queueName: name,
    reflog: path.join(o.inbox, name + REFLOG_EXT),
    staging,
    runJson: path.join(staging, 'run.json'),
    commit: path.join(staging, 'COMMIT'),
    work,
    tmp: path.join(work, 'tmp'),
    logs: path.join(work, 'log'),
    queue: path.join(work, 'queue'),
    currentNext: path.join(work, 'current_log'),
    currentIn: path.join(o.state, 'current_log'),
    rejects: path.join(work, 'rejects.tsv'),
    rejectsKept: keptRejects(o.state, name),
    rejectsFailed: failedRejects(o.state, name),
  };
}

/** Where a committed run's rejects are kept: STATE/rejects/RUN.tsv. */
export function keptRejects(state: string, run: string): string {
  return path.join(state, 'rejects', `${run}.tsv`);
}

/**
 * Where a failed attempt's rejects are kept: STATE/rejects/failed/RUN.tsv, never the
 * name of a committed run's (a replay that fails must leave those), whatever the run
 * names (RUN.failed.tsv would be the rejects of a run named RUN.failed).
 */
export function failedRejects(state: string, run: string): string {
  return path.join(state, 'rejects', 'failed', `${run}.tsv`);
}

/** One stage command: its name and arguments (the binary is bin/<name>). */
export interface StageCmd {
  name: string;
  args: string[];
}

/**
 * The chain of one run (SPEC "Stages", staged outputs). upload-domains gets no --map:
 * the database's index answers the hour's distinct domains, so a run's cost follows
 * the hour, not the partner table.
 */
export function chainOf(o: RunnerOptions, p: RunPaths, now: string): StageCmd[] {
  // The reflog comes on stdin (pipeline.ts); its messages name it.
  const ad = ['--input-name', p.reflog, '--rejects', p.rejects, '--tmp', p.tmp];
  if (o.maxRejectRatio !== null) ad.push('--max-reject-ratio', o.maxRejectRatio);
  if (o.memory !== null) ad.push('--memory', o.memory);
  const fu = ['--current-out', p.currentNext, '--now', now];
  if (o.resendAfter !== null) fu.push('--resend-after', o.resendAfter);
  if (o.keep !== null) fu.push('--keep', o.keep);
  const limit = limitStage(o, p, now);
  return [
    { name: 'analyze-dump', args: ad },
    { name: 'group-sum', args: [] },
    { name: 'join-current', args: ['--current', p.currentIn] },
    { name: 'filter-url', args: fu },
    ...(limit === null ? [] : [limit]),
    { name: 'upload-domains', args: [...o.dbArgs, '--now', now, '--tmp', p.tmp] },
    { name: 'logsaver', args: ['--queue-dir', p.queue, '--name', p.queueName] },
  ];
}

/** The log file of stage `i` of a run. */
export function stageLog(p: RunPaths, i: number, name: string): string {
  return path.join(p.logs, `${i}.${name}.log`);
}

/**
 * A bash script running `chain` as one pipeline: stdin of the script feeds the first
 * stage, each stage's stderr goes through tee to its own log file (stageLog, numbered
 * from 1) and to descriptor teeFd + its index, the last stage's stdout is discarded,
 * and the script prints the exit statuses (PIPESTATUS) on stdout.
 */
export function pipelineScript(chain: readonly StageCmd[], binDir: string, p: RunPaths, teeFd: number): string {
  const parts = chain.map((s, i) => {
    const cmd = [path.join(binDir, s.name), ...s.args].map(shellQuote).join(' ');
    const file = shellQuote(stageLog(p, i + 1, s.name));
    // The copies' descriptors are the tees' alone (closed after the redirection that hands one over).
    return `${cmd} 2> >(${teeCommand(file, teeFd + i)})${chain.map((_, j) => ` ${teeFd + j}>&-`).join('')}`;
  });
  return `${parts.join(' \\\n  | ')} >/dev/null\necho "\${PIPESTATUS[*]}"\n`;
}

/**
 * The shell command that copies its input (a stage's stderr) to the log file `file`
 * (quoted) and to descriptor `fd`, which the runner reads. Signals that stop the stages
 * are ignored (the stage's last lines still reach both); an output that fails (a full
 * disk, a runner gone) is left and the other kept (tee -p: GNU coreutils).
 */
export function teeCommand(file: string, fd: number): string {
  return `trap '' INT TERM HUP; exec tee -p ${file} >&${fd} 2>/dev/null`;
}

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
  /** One domain among them (null when none): in the database with `added_at` iff COMMIT happened. */
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
      pending = { rows: o.committing, witness: typeof o.witness === 'string' ? o.witness : null, added_at: o.added_at };
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

/** How much of the start of a reflog the runner reads to quote its first line (notAReflog). */
export const REFLOG_HEAD_BYTES = 4096;

/**
 * The first non-empty line of `head` (the start of a reflog; a trailing CR dropped,
 * as analyze-dump does), clipped for a message, control characters left to
 * visibleName; null when `head` holds only empty lines. `more`: the file goes on
 * past `head`, so a line that `head` ends in without its LF is shown as cut.
 */
export function firstHeaderLine(head: Buffer, more: boolean): string | null {
  for (let s = 0; s < head.length; ) {
    const lf = head.indexOf(10, s);
    const e = lf === -1 ? head.length : lf;
    const end = e > s && head[e - 1] === 13 ? e - 1 : e;
    if (end > s) {
      const text = clipText(head.toString('utf8', s, end));
      return lf === -1 && more && !text.endsWith('...') ? `${text}...` : text;
    }
    s = e + 1;
  }
  return null;
}

/**
 * Why a run whose analyze-dump succeeded with the counts `ad` must not commit, or null.
 * A file with no reflog line at all (no record, no reject) but more than one line
 * without a TAB, or one such line without its LF, is taken for no reflog: `first` is
 * its first line (firstHeaderLine). `archived`: STATE/done/RUN.reflog when an earlier
 * run of this name committed and left it there (the file is a re-send).
 */
export function notAReflog(ad: Record<string, unknown> | undefined, file: string, first: string | null, archived?: string): string | null {
  // analyze-dump, as the SPEC says, skips any line without a TAB as a header, wherever
  // it is (concatenated reflogs have several): an HTML error page saved as the hour
  // passes, and would commit as an hour without traffic, its real hour lost unsaid.
  // One such line alone, ended by its LF, is what an hour without traffic looks like, and
  // still commits. Without its LF it is a page without one (minified HTML), or a reflog
  // caught with only its header written: kept in the inbox, it is read whole next time.
  if (ad === undefined || ad.records_out !== 0 || ad.rejected !== 0) return null;
  const headers = ad.skipped_header;
  const cut = ad.last_line_unterminated === true;
  if (typeof headers !== 'number' || headers === 0 || (headers === 1 && !cut)) return null;
  const lines = typeof ad.lines_in === 'number' ? ad.lines_in : headers;
  const quoted = first === null ? '' : ` (the first: '${first}')`;
  const last = cut ? `, the last one without a newline (was it still being written?)` : '';
  // An hour committed before: this file is a re-send of a page, and emptied it would
  // commit as an empty replay of that hour.
  const advice =
    archived === undefined
      ? `put the hour's reflog in its place, or, if it really is an empty hour, empty the file`
      : `run ${path.basename(file, REFLOG_EXT)} was committed before, and its reflog is in ${archived}: remove this file (to replay the hour, move that one here)`;
  return `${file}: not a reflog: ${lines === 1 ? '1 line, without a TAB' : `${lines} lines, none with a TAB`}${quoted}${last}; ${advice}`;
}

/** What the first bytes of a reflog say it is instead: a gzip file (1f 8b), an HTML page, or null. */
export function foreignKind(head: Buffer): 'gzip' | 'html' | null {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  // After a UTF-8 byte order mark and white space.
  const text = head
    .subarray(0, 256)
    .toString('latin1')
    .replace(/^\xef\xbb\xbf/, '')
    .trimStart();
  return /^<(?:!doctype\s+html|html|head|body|\?xml)[\s>]/i.test(text) ? 'html' : null;
}

/**
 * Why a run whose reflog starts as a gzip file or an HTML page (`kind`, foreignKind)
 * fails, in place of analyze-dump's reject ratio (no ratio to raise): `first` is its
 * first line (firstHeaderLine).
 */
export function foreignReflog(file: string, kind: 'gzip' | 'html', first: string | null): string {
  if (kind === 'gzip') {
    return `${file}: is gzip-compressed (it starts with the bytes 1f 8b), not a reflog: decompress it into a file of another name, rename that into the inbox in its place, and run again`;
  }
  const quoted = first === null ? '' : ` (the first line: '${first}')`;
  return `${file}: is an HTML page, not a reflog${quoted}: a download that got an error page? Put the hour's reflog in its place`;
}

/**
 * Why a run whose reflog's last line has no LF fails (SPEC "Runs"): were it
 * committed, the part of the hour after the cut would be lost for good.
 */
export function unterminatedReflog(file: string, linesIn: unknown): string {
  const read = typeof linesIn === 'number' ? ` after ${linesIn} line(s)` : '';
  return (
    `${file}: its last line has no newline: cut off${read} (a broken download renamed into the inbox, or a file still being written?); ` +
    `not committed: that would lose the rest of the hour for good. It stays in the inbox: put the whole hour in its place, or, if the file is whole as it is, ` +
    `run again with --allow-unterminated (config key allow-unterminated = yes), which commits it, its last line included`
  );
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

/** The runs.jsonl line of one run. */
export interface RunRecord {
  run: string;
  run_id: string;
  status: 'ok' | 'failed';
  start: string;
  now: string;
  now_source: NowSource;
  attempt: number;
  recovered?: 'rerun' | 'roll-forward';
  seconds: number;
  reflog: string;
  stages: Record<string, Record<string, unknown>>;
  sent: number;
  sent_per_yacobot: Record<string, number>;
  new_domains: number;
  /**
   * Domains the failed attempts of this run's name (since its last commit) assigned: each
   * failed line counts its own in new_domains, and this line names them too.
   */
  new_domains_failed_attempts?: number;
  /** filter-url's --keep and --resend-after in this run, in ms. */
  keep_ms: number;
  resend_after_ms: number;
  /** With --max-per-domain: the cap and limit-domains' --carry-keep (ms), stored with the state. */
  max_per_domain?: number;
  carry_keep_ms?: number;
  /** limit-domains' counts, when it ran (see carry.ts). */
  carried_in?: number;
  carried_out?: number;
  carry_expired?: number;
  capped_domains?: Record<string, number>;
  /** The oldest `decided` among the URLs carried out. */
  carry_oldest_decided?: string;
  rejects_file?: string;
  failed_stage?: string;
  error?: string;
  backlog?: Record<string, { files: number; urls: number }>;
  backlog_warn?: string[];
  /** The name of the queue files when it is not the run's: a replay beside untaken files of the run's name. */
  queue_name?: string;
  /** current_log re-keyed before the hour for another URL parser (rekey.ts). */
  rekeyed?: RekeyReport;
  /** The master that ran it (--master-name). */
  master?: string;
  /** Another master published this hour: this one remembered it (current_log) and published nothing. */
  published_by?: string;
  /** With published_by: the URLs this master's queue files held, not published. */
  not_published?: number;
}

/**
 * The domains assigned by the failed runs of `run` among `records` (runs.jsonl lines,
 * oldest first) after its last committed line, other than `runId`'s: the sum of their
 * new_domains.
 */
export function failedAttemptsAssigned(records: readonly unknown[], run: string, runId: string): number {
  let n = 0;
  for (let i = records.length - 1; i >= 0; i--) {
    const r = (records[i] ?? {}) as { run?: unknown; run_id?: unknown; status?: unknown; new_domains?: unknown };
    if (r.run !== run || r.run_id === runId) continue;
    if (r.status === 'ok') break;
    if (r.status === 'failed' && Number.isSafeInteger(r.new_domains)) n += r.new_domains as number;
  }
  return n;
}

/** One line of human summary for a run. */
export function humanLine(r: RunRecord): string {
  if (r.status === 'failed') return `${r.run}: FAILED in ${r.failed_stage ?? '?'} after ${r.seconds.toFixed(1)} s: ${r.error ?? ''}`;
  const ad = r.stages['analyze-dump'] ?? {};
  const fu = r.stages['filter-url'] ?? {};
  const per = Object.entries(r.sent_per_yacobot)
    .sort((a, b) => Number(a[0]) - Number(b[0]))
    .map(([id, n]) => `#${id} ${n}`)
    .join(', ');
  const held = typeof fu.held === 'number' ? `, ${fu.held} held back` : '';
  const carried = r.carried_out === undefined ? '' : `, ${r.carried_out} carried over`;
  return (
    `${r.run}: ${ad.lines_in ?? '?'} lines, ${ad.records_out ?? '?'} records, ${ad.rejected ?? '?'} rejected, ` +
    `${ad.skipped ?? '?'} skipped; ${r.sent} URLs sent${per ? ` (${per})` : ''}${held}${carried}; ` +
    `${r.new_domains} new domains${r.new_domains_failed_attempts ? ` (and ${r.new_domains_failed_attempts} by its failed attempts)` : ''}; ${r.seconds.toFixed(1)} s${r.recovered ? ` (${RECOVERED[r.recovered]})` : ''}` +
    (r.queue_name === undefined ? '' : `; queue files named ${r.queue_name}.tsv`) +
    (r.published_by === undefined ? '' : `; master ${r.published_by} published this hour: ${r.not_published ?? 0} URLs remembered, not published`)
  );
}

// Not "after a crash": a signal interrupts an attempt too, and an error (a directory in
// the way at done/RUN.reflog) leaves a commit unfinished as a crash does.
const RECOVERED: Record<NonNullable<RunRecord['recovered']>, string> = {
  rerun: 'rerun of an interrupted attempt',
  'roll-forward': 'roll-forward of an unfinished commit',
};
