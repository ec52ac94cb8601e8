// A reflog that is none: a gzip file, an HTML page, lines without a TAB, a cut last
// line; the runner's checks after the chain, and their messages.
import * as path from 'node:path';
import { exists } from '../../core/durable.js';
import { clipText } from '../../core/errors.js';
import { REFLOG_EXT } from '../state/inbox.js';
import { doneReflog } from '../state/layout.js';
import type { ChainResult, RunContext } from './context.js';
import { failureMessage } from './stage-log.js';

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

/** The step and message a run fails with after its chain (a stage failed, no reflog, a cut last line), or null. */
export function chainFailure(
  { o, p }: RunContext,
  chain: ChainResult,
  stages: Record<string, Record<string, unknown>>,
): { step: string; error: string } | null {
  const { head } = chain;
  const bad = chain.outcomes.find((s) => s.exit !== 0);
  const firstLine = () => head && firstHeaderLine(head, head.length >= REFLOG_HEAD_BYTES);
  // A gzip file never is a reflog (with a high --max-reject-ratio it would commit as rejects);
  // an HTML page with TABs fails on its rejects, which is no ratio to raise.
  const kind = head === null ? null : foreignKind(head);
  if (kind === 'gzip' || (kind === 'html' && bad?.name === 'analyze-dump')) return { step: 'reflog', error: foreignReflog(p.reflog, kind, firstLine()) };
  if (bad) return { step: bad.name, error: failureMessage(bad) };
  // Lines without a TAB and nothing else (an HTML page saved as the hour) are no reflog:
  // failed at step 'reflog', as a file that cannot be read is; the stages did their part.
  // Before the cut-last-line warning, which its message takes in.
  const archived = doneReflog(o.state, p.name);
  const notReflog = notAReflog(stages['analyze-dump'], p.reflog, firstLine(), exists(archived) ? archived : undefined);
  if (notReflog !== null) return { step: 'reflog', error: notReflog };
  if (stages['analyze-dump']?.last_line_unterminated === true && !o.allowUnterminated) {
    return { step: 'reflog', error: unterminatedReflog(p.reflog, stages['analyze-dump']?.lines_in) };
  }
  return null;
}
