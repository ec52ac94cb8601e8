// filter-url: decide what to send this hour and write the next current_log.
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { addHits } from '../core/hits.js';
import {
  IdOrder,
  J_CHITS,
  J_CTAG,
  J_CTS,
  J_DOMAIN,
  J_ID,
  J_IHITS,
  J_ITAG,
  J_ITS,
  J_URL,
  MISSING,
  checkJoined,
} from '../core/records.js';
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

const rec = (f: string[], ts: string, tag: string, hits: string) =>
  `${f[J_ID]}\t${ts}\t${tag}\t${hits}\t${f[J_DOMAIN]}\t${f[J_URL]}`;

/** The pure core: SPEC.md's filter rule for one joined record (fields). */
export function decide(f: string[], p: FilterParams): Decision {
  const cTs = f[J_CTS]!;
  const iTs = f[J_ITS]!;
  if (cTs === MISSING) {
    const r = rec(f, iTs, f[J_ITAG]!, f[J_IHITS]!);
    return { outcome: 'new', send: r, keep: r };
  }
  if (iTs === MISSING) {
    return p.nowMs - timestampToMs(cTs) < p.keepMs
      ? { outcome: 'kept', send: null, keep: rec(f, cTs, f[J_CTAG]!, f[J_CHITS]!) }
      : { outcome: 'expired', send: null, keep: null };
  }
  const iTag = f[J_ITAG]!;
  const cTag = f[J_CTAG]!;
  const hits = addHits(f[J_CHITS]!, f[J_IHITS]!);
  const changed = iTag !== '' && iTag !== cTag;
  const due = timestampToMs(iTs) - timestampToMs(cTs) >= p.resendAfterMs;
  if (due || changed) {
    return {
      outcome: due ? 'due' : 'changed',
      send: rec(f, iTs, iTag, f[J_IHITS]!),
      keep: rec(f, iTs > cTs ? iTs : cTs, iTag !== '' ? iTag : cTag, hits),
    };
  }
  return { outcome: 'held', send: null, keep: rec(f, cTs, cTag, hits) };
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
    await ctx.eachLine((line, lineNo) => {
      const f = line.split('\t');
      const bad = checkJoined(f) ?? order.check(f[J_ID]!);
      if (bad) throw new DataError('BAD_RECORD', bad, { file: ctx.inputName, line: lineNo });
      linesIn++;
      const d = decide(f, o);
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
