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
import { AtomicFileWriter, findTabs, isDigitsAt, isIdAt } from '../core/tsv.js';

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
    const T = new Int32Array(8);
    const { nowMs, resendAfterMs, keepMs } = o;
    await ctx.eachLine((line, lineNo) => {
      // decide() on slices of the line (the same rule, without a field array);
      // checkJoined's message for a line that fails the fast checks.
      const bad = checkJoinedLine(line, T) ?? order.check(line.slice(0, 16));
      if (bad) throw new DataError('BAD_RECORD', bad, { file: ctx.inputName, line: lineNo });
      linesIn++;
      const id = line.slice(0, 16);
      const domUrl = line.slice(17, T[2]!);
      const cTs = line.slice(T[2]! + 1, T[3]!);
      const iTs = line.slice(T[3]! + 1, T[4]!);
      const cTag = line.slice(T[4]! + 1, T[5]!);
      const iTag = line.slice(T[5]! + 1, T[6]!);
      const cHits = line.slice(T[6]! + 1, T[7]!);
      const iHits = line.slice(T[7]! + 1);
      if (cTs === MISSING) {
        const r = `${id}\t${iTs}\t${iTag}\t${iHits}\t${domUrl}\n`;
        n.new++;
        out.write(r);
        next.write(r);
        return;
      }
      if (iTs === MISSING) {
        if (nowMs - timestampToMs(cTs) < keepMs) {
          n.kept++;
          next.write(`${id}\t${cTs}\t${cTag}\t${cHits}\t${domUrl}\n`);
        } else n.expired++;
        return;
      }
      const hits = addHits(cHits, iHits);
      const changed = iTag !== '' && iTag !== cTag;
      const due = timestampToMs(iTs) - timestampToMs(cTs) >= resendAfterMs;
      if (due || changed) {
        n[due ? 'due' : 'changed']++;
        out.write(`${id}\t${iTs}\t${iTag}\t${iHits}\t${domUrl}\n`);
        next.write(`${id}\t${iTs > cTs ? iTs : cTs}\t${iTag !== '' ? iTag : cTag}\t${hits}\t${domUrl}\n`);
      } else {
        n.held++;
        next.write(`${id}\t${cTs}\t${cTag}\t${hits}\t${domUrl}\n`);
      }
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

/**
 * Checks a joined line as checkJoined does, on slices, filling `T` (8 slots) with
 * its TAB positions; returns checkJoined's message for a bad line, or null.
 */
export function checkJoinedLine(line: string, T: Int32Array): string | null {
  const nf = findTabs(line, T);
  let ok = nf === 9 && T[0] === 16 && isIdAt(line, 0);
  if (ok) {
    // sides: timestamp, updatetag, hits for c (fields 3, 5, 7) and i (4, 6, 8)
    const cAbsent = T[3]! - T[2]! === 2 && line.charCodeAt(T[2]! + 1) === 45;
    const iAbsent = T[4]! - T[3]! === 2 && line.charCodeAt(T[3]! + 1) === 45;
    ok =
      !(cAbsent && iAbsent) &&
      sideOk(line, cAbsent, T[2]! + 1, T[3]!, T[4]! + 1, T[5]!, T[6]! + 1, T[7]!) &&
      sideOk(line, iAbsent, T[3]! + 1, T[4]!, T[5]! + 1, T[6]!, T[7]! + 1, line.length);
  }
  return ok ? null : (checkJoined(line.split('\t')) ?? 'malformed record');
}

function sideOk(line: string, absent: boolean, ts: number, tsEnd: number, tag: number, tagEnd: number, hits: number, hitsEnd: number): boolean {
  if (absent) return tagEnd === tag && hitsEnd - hits === 1 && line.charCodeAt(hits) === 45;
  return tsEnd - ts === 14 && isDigitsAt(line, ts, tsEnd) && hitsEnd - hits <= 30 && isDigitsAt(line, hits, hitsEnd);
}
