// filter-url: decide what to send this hour and write the next current_log.
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { addHits } from '../core/hits.js';
import { IdOrder, MISSING, checkJoinedLine } from '../core/records.js';
import { formatTimestamp, isValidTimestamp, parseDuration, timestampToMs } from '../core/time.js';
import { AtomicFileWriter } from '../core/tsv.js';

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

export interface Decision {
  outcome: Outcome;
  /** URL-record line for filtered_log (no LF), or null. */
  send: string | null;
  /** URL-record line for the next current_log (no LF), or null. */
  keep: string | null;
}

/**
 * The pure core: SPEC.md's filter rule for one joined line, checked by
 * checkJoinedLine, which filled in its TAB positions `T`.
 */
export function decide(line: string, T: Int32Array, p: FilterParams): Decision {
  // Fields are slices of the line; "domain TAB url" is one slice (fields 1 and 2).
  const id = line.slice(0, 16);
  const domUrl = line.slice(17, T[2]!);
  const cTs = line.slice(T[2]! + 1, T[3]!);
  const iTs = line.slice(T[3]! + 1, T[4]!);
  const rec = (ts: string, tag: string, hits: string) => `${id}\t${ts}\t${tag}\t${hits}\t${domUrl}`;
  const iTag = line.slice(T[5]! + 1, T[6]!);
  const iHits = line.slice(T[7]! + 1);
  if (cTs === MISSING) {
    const r = rec(iTs, iTag, iHits);
    return { outcome: 'new', send: r, keep: r };
  }
  const cTag = line.slice(T[4]! + 1, T[5]!);
  const cHits = line.slice(T[6]! + 1, T[7]!);
  if (iTs === MISSING) {
    return p.nowMs - timestampToMs(cTs) < p.keepMs
      ? { outcome: 'kept', send: null, keep: rec(cTs, cTag, cHits) }
      : { outcome: 'expired', send: null, keep: null };
  }
  const hits = addHits(cHits, iHits);
  const changed = iTag !== '' && iTag !== cTag;
  const due = timestampToMs(iTs) - timestampToMs(cTs) >= p.resendAfterMs;
  if (due || changed) {
    return {
      outcome: due ? 'due' : 'changed',
      send: rec(iTs, iTag, iHits),
      keep: rec(iTs > cTs ? iTs : cTs, iTag !== '' ? iTag : cTag, hits),
    };
  }
  return { outcome: 'held', send: null, keep: rec(cTs, cTag, hits) };
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
                       (max timestamp, i_updatetag or else c_updatetag, c+i hits)
  both, otherwise      do not send; current gets (c_timestamp, c_updatetag, c+i hits)

  due     = i_timestamp - c_timestamp >= --resend-after
  changed = i_updatetag non-empty and different from c_updatetag

Timestamps are read in the local time zone (set TZ to choose). Durations: 90s,
30m, 1h, 10h, 1d, or seconds. --current-out is written to a temporary file and
renamed over FILE only after the whole input was processed.

Buffers: one record.`,
  options(cmd) {
    cmd
      .requiredOption('--current-out <file>', 'where to write the next current_log')
      .option('--now <YYYYMMDDhhmmss>', 'the time of this run (default: the wall clock, local time)')
      .option('--resend-after <duration>', 'send a URL again after this long', '1h')
      .option('--keep <duration>', 'keep a URL that did not come again this long', '1h');
  },
  normalize(raw) {
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    const duration = (flag: string, v: unknown) => {
      const ms = parseDuration(String(v));
      if (ms === null) throw new UsageError(`${flag} wants a duration like 90s, 30m, 1h, 1d or seconds, got '${v}'`);
      return ms;
    };
    return {
      currentOut: String(raw.currentOut),
      now,
      nowMs: timestampToMs(now),
      resendAfterMs: duration('--resend-after', raw.resendAfter),
      keepMs: duration('--keep', raw.keep),
    };
  },
  async run(ctx, o) {
    const out = ctx.out;
    const next = new AtomicFileWriter(o.currentOut);
    ctx.onExit(() => next.abort());
    const order = new IdOrder();
    const n: Record<Outcome, number> = { new: 0, due: 0, changed: 0, held: 0, kept: 0, expired: 0 };
    let linesIn = 0;
    const T = new Int32Array(8);
    await ctx.eachLine((line, lineNo) => {
      const bad = checkJoinedLine(line, T) ?? order.check(line.slice(0, 16));
      if (bad) throw new DataError('BAD_RECORD', bad, { file: ctx.inputName, line: lineNo });
      linesIn++;
      const d = decide(line, T, o);
      n[d.outcome]++;
      if (d.send !== null) out.write(d.send + '\n');
      if (d.keep !== null) next.write(d.keep + '\n');
    });
    const sent = n.new + n.due + n.changed;
    Object.assign(ctx.counts, {
      now: o.now,
      lines_in: linesIn,
      sent,
      sent_new: n.new,
      sent_due: n.due,
      sent_changed: n.changed,
      held: n.held,
      kept: n.kept,
      expired: n.expired,
      current_out: linesIn - n.expired,
    });
    await out.flush();
    next.commit();
  },
};

