// filter-url: decide what to send this hour and write the next current_log.
import { pathOption, refuseOwnStreams, type StageDef } from '../cli/stage.js';
import { DASH, compareBytes, type ByteSink } from '../core/bytes.js';
import { DEFAULT_KEEP, DEFAULT_RESEND_AFTER } from '../core/defaults.js';
import { DataError, UsageError } from '../core/errors.js';
import { MAX_HITS_DIGITS, addHitsAt, hitsTooBig } from '../core/hits.js';
import {
  IdOrder,
  J_CHITS,
  J_CTAG,
  J_CTS,
  J_DOMAIN,
  J_IHITS,
  J_ITAG,
  J_ITS,
  J_URL,
  JOINED_RECORD,
  LineRef,
  TS_BYTES,
  UrlRecordWriter,
} from '../core/records.js';
import { RecordScanner, checkJoinedAt } from '../core/record-checks.js';
import type { ByteLineFn, LineScan } from '../core/lines.js';
import { formatTimestamp, isValidTimestamp, parseDuration, timestampMsAt, timestampToMs } from '../core/time.js';
import { AtomicFileWriter } from '../core/writers.js';

export interface FilterParams {
  /** "now" in ms since the epoch. */
  nowMs: number;
  resendAfterMs: number;
  keepMs: number;
}

export interface FilterUrlOptions extends FilterParams {
  currentOut: string;
  now: string;
}

/** Why a record was sent or not. */
export type Outcome = 'new' | 'due' | 'changed' | 'held' | 'kept' | 'expired';

/** The c+i hits sum (at most 31 digits), and the record writer; one each per process, as the stage is one thread. */
const sum = new Uint8Array(32);
const record = new UrlRecordWriter();

/**
 * The pure core: the contract's filter rule for one joined line, checked by
 * checkJoinedAt. Writes the URL record to send (with LF) to `send` and the one for
 * the next current_log to `keep`, when there are such; returns why.
 */
export function decide(l: LineRef, p: FilterParams, send: ByteSink, keep: ByteSink): Outcome {
  const b = l.buf;
  const cTs = l.fieldStart(J_CTS);
  const iTs = l.fieldStart(J_ITS);
  const cTag = l.fieldStart(J_CTAG);
  const cTagEnd = l.fieldEnd(J_CTAG);
  const iTag = l.fieldStart(J_ITAG);
  const iTagEnd = l.fieldEnd(J_ITAG);
  const cHits = l.fieldStart(J_CHITS);
  const cHitsEnd = l.fieldEnd(J_CHITS);
  const iHits = l.fieldStart(J_IHITS);
  const r = record.setUrl(b, l.start, l.fieldStart(J_DOMAIN), l.fieldEnd(J_URL));
  if (b[cTs] === DASH) {
    timestampMsAt(b, iTs); // throws unless a real time: nothing else may enter current_log
    r.setValues(b, iTs, iTag, iTagEnd).setHits(b, iHits, l.end).writeBoth(send, keep);
    return 'new';
  }
  if (b[iTs] === DASH) {
    if (p.nowMs - timestampMsAt(b, cTs) >= p.keepMs) return 'expired';
    r.setValues(b, cTs, cTag, cTagEnd).setHits(b, cHits, cHitsEnd).write(keep);
    return 'kept';
  }
  const n = addHitsAt(b, cHits, cHitsEnd, iHits, l.end, sum);
  if (n > MAX_HITS_DIGITS) throw new DataError('HITS_TOO_BIG', hitsTooBig(n));
  const iTagLen = iTagEnd - iTag;
  const iTagEmpty = iTagLen === 0;
  const sinceMs = timestampMsAt(b, iTs) - timestampMsAt(b, cTs);
  // A late sighting (older than current_log's) is no news: never a change, never the tag.
  const changed = !iTagEmpty && sinceMs >= 0 && (iTagLen !== cTagEnd - cTag || compareBytes(b, iTag, b, cTag, iTagLen) !== 0);
  const due = sinceMs >= p.resendAfterMs;
  if (due || changed) {
    r.setValues(b, iTs, iTag, iTagEnd).setHits(b, iHits, l.end).write(send);
    const ts = compareBytes(b, iTs, b, cTs, TS_BYTES) > 0 ? iTs : cTs;
    if (iTagEmpty) r.setValues(b, ts, cTag, cTagEnd);
    else r.setValues(b, ts, iTag, iTagEnd);
    r.setHits(sum, 0, n).write(keep);
    return due ? 'due' : 'changed';
  }
  r.setValues(b, cTs, cTag, cTagEnd).setHits(sum, 0, n).write(keep);
  return 'held';
}

export const filterUrl: StageDef<FilterUrlOptions> = {
  name: 'filter-url',
  summary: 'Decide which joined URLs to send this hour; write the next current_log.',
  usage: `
Reads joined records (join-current's output, sorted by id) and writes
filtered_log (URL records to send) to stdout and the next current_log to
--current-out. Per record:

  incoming only        send; current gets the incoming values
  current only         keep unchanged iff now - c_timestamp < --keep, else drop
  both, due or changed send (incoming values); current gets
                       (max timestamp, i_updatetag or else c_updatetag,
                       c+i hits)
  both, otherwise      do not send; current gets (c_timestamp, c_updatetag,
                       c+i hits)

  due     = i_timestamp - c_timestamp >= --resend-after
  changed = i_updatetag non-empty, different from c_updatetag, and
            i_timestamp >= c_timestamp (a late sighting, older than
            current_log's, is no news and never replaces the tag)

Timestamps are read in the local time zone (set TZ to choose). Durations: 90s,
30m, 1h, 10h, 1d, or seconds; at most 3650d. --current-out is written to a
temporary file and renamed over FILE only after the whole input was processed.

Buffers: one record.`,
  options(cmd) {
    cmd
      .requiredOption('--current-out <file>', 'where to write the next current_log (required)')
      .option('--now <YYYYMMDDhhmmss>', 'the time of this run (default: the wall clock, local time)')
      .option('--resend-after <duration>', 'send a URL again after this long', DEFAULT_RESEND_AFTER)
      .option('--keep <duration>', 'keep a URL that did not come again this long', DEFAULT_KEEP);
  },
  normalize(raw) {
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    const duration = (flag: string, v: unknown) => {
      const ms = parseDuration(String(v));
      if (ms === null) throw new UsageError(`${flag} wants a duration like 90s, 30m, 1h, 1d or seconds (at most 3650d), got '${v}'`);
      return ms;
    };
    return {
      currentOut: pathOption('--current-out', raw.currentOut),
      now,
      nowMs: timestampToMs(now),
      resendAfterMs: duration('--resend-after', raw.resendAfter),
      keepMs: duration('--keep', raw.keep),
    };
  },
  async run(ctx, o) {
    refuseOwnStreams('--current-out', o.currentOut, ctx.inputPath);
    if (o.keepMs < o.resendAfterMs) {
      ctx.log.warn(
        { keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs },
        '--keep is shorter than --resend-after: a URL unseen for longer than --keep is sent again as new, before --resend-after',
      );
    }
    const out = ctx.out;
    const next = new AtomicFileWriter(o.currentOut);
    ctx.onExit(() => next.abort());
    const order = new IdOrder();
    const n: Record<Outcome, number> = { new: 0, due: 0, changed: 0, held: 0, kept: 0, expired: 0 };
    let linesIn = 0;
    let committed = false;
    ctx.reportCounts(() => ({
      now: o.now,
      lines_in: linesIn,
      sent: n.new + n.due + n.changed,
      sent_new: n.new,
      sent_due: n.due,
      sent_changed: n.changed,
      held: n.held,
      kept: n.kept,
      expired: n.expired,
      // Records in the next current_log: none unless it was renamed into place.
      current_out: committed ? linesIn - n.expired : 0,
    }));
    const l = new LineRef(JOINED_RECORD.length - 1);
    const scan: LineScan = new RecordScanner('joined', l.tabs).scan;
    const onLine: ByteLineFn = (buf, start, end, lineNo, checked) => {
      l.set(buf, start, end);
      const bad = (checked ? null : checkJoinedAt(l)) ?? order.check(buf, start);
      if (bad) throw new DataError('BAD_RECORD', bad, { file: ctx.inputName, line: lineNo });
      // Counted once decided: a line that fails (a hits sum too long, a full disk) is in
      // none of the counts, so lines_in = sent + held + kept + expired in a failed run too.
      const outcome = decide(l, o, out, next);
      linesIn++;
      n[outcome]++;
    };
    await ctx.eachLine(onLine, undefined, scan);
    await out.flush();
    next.commit();
    committed = true;
  },
};
