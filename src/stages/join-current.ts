// join-current: full outer merge-join of incoming_log (stdin) with current_log.
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { IdOrder, MISSING, U_DOMAIN, U_HITS, U_ID, U_TAG, U_TS, U_URL, checkUrlRecord } from '../core/records.js';
import { FileLineReader, findTabs, isDigitsAt, isIdAt } from '../core/tsv.js';

export interface JoinCurrentOptions {
  current: string;
}

/**
 * The pure core: the joined line (no LF) for one id, from the current side `c`
 * and/or the incoming side `i` (URL-record fields; at least one present).
 */
export function joinedLine(c: string[] | null, i: string[] | null): string {
  const key = (i ?? c)!;
  return [
    key[U_ID],
    key[U_DOMAIN],
    key[U_URL],
    c ? c[U_TS] : MISSING,
    i ? i[U_TS] : MISSING,
    c ? c[U_TAG] : '',
    i ? i[U_TAG] : '',
    c ? c[U_HITS] : MISSING,
    i ? i[U_HITS] : MISSING,
  ].join('\t');
}

export const joinCurrent: StageDef<JoinCurrentOptions> = {
  name: 'join-current',
  summary: 'Full outer merge-join of incoming_log (stdin) with current_log by id.',
  usage: `
Reads incoming_log (URL records, sorted by id, unique) on stdin and current_log
from --current FILE (the same shape; a missing file is an empty log, as on the
first run) and writes one joined record per id:

  id domain url c_timestamp i_timestamp c_updatetag i_updatetag c_hits i_hits

c_ is the current side, i_ the incoming side. A missing side has "-" as its
timestamp and hits and an empty updatetag; domain and url come from the incoming
side when it is present. Output is sorted by id.

Buffers: one record of each input. Unsorted or duplicate ids in either input,
or a last line cut off without its newline, are errors naming the line.`,
  options(cmd) {
    cmd.requiredOption('--current <file>', 'current_log to join with (missing: empty)');
  },
  normalize(raw) {
    if (!raw.current) throw new UsageError('--current FILE is required');
    return { current: String(raw.current) };
  },
  async run(ctx, o) {
    const out = ctx.out;
    const reader = FileLineReader.openIfExists(o.current);
    ctx.onExit(() => reader?.close());
    const curOrder = new IdOrder();
    const inOrder = new IdOrder();
    let nIn = 0;
    let nCur = 0;
    let both = 0;
    let onlyIn = 0;
    let onlyCur = 0;
    const T = new Int32Array(5);
    const C = new Int32Array(5);

    // Records stay lines; fields are slices between the TABs found by findTabs.
    // "domain TAB url" is one slice, as the joined record carries both in that order.
    let cur: string | null = null;
    let cId = '';
    const nextCurrent = (): void => {
      cur = null;
      if (!reader) return;
      const line = reader.next();
      if (line === null) return;
      const bad = checkRecord(line, C) ?? curOrder.check(line.slice(0, 16));
      if (bad) throw new DataError('BAD_CURRENT', bad, { file: o.current, line: reader.lineNo });
      nCur++;
      cur = line;
      cId = line.slice(0, 16);
    };
    /** The current record alone, as a joined line. */
    const currentOnly = (c: string): string =>
      `${cId}\t${c.slice(C[3]! + 1)}\t${c.slice(17, 31)}\t-\t${c.slice(C[1]! + 1, C[2]!)}\t\t${c.slice(C[2]! + 1, C[3]!)}\t-\n`;

    nextCurrent();
    await ctx.eachLine((line, lineNo) => {
      const id = line.slice(0, 16);
      const bad = checkRecord(line, T) ?? inOrder.check(id);
      if (bad) throw new DataError('BAD_INCOMING', bad, { file: ctx.inputName, line: lineNo });
      nIn++;
      while (cur !== null && cId < id) {
        out.write(currentOnly(cur));
        onlyCur++;
        nextCurrent();
      }
      const iTs = line.slice(17, 31);
      const iTag = line.slice(T[1]! + 1, T[2]!);
      const iHits = line.slice(T[2]! + 1, T[3]!);
      const domUrl = line.slice(T[3]! + 1);
      if (cur !== null && cId === id) {
        const c: string = cur;
        out.write(`${id}\t${domUrl}\t${c.slice(17, 31)}\t${iTs}\t${c.slice(C[1]! + 1, C[2]!)}\t${iTag}\t${c.slice(C[2]! + 1, C[3]!)}\t${iHits}\n`);
        both++;
        nextCurrent();
      } else {
        out.write(`${id}\t${domUrl}\t-\t${iTs}\t\t${iTag}\t-\t${iHits}\n`);
        onlyIn++;
      }
    });
    while (cur !== null) {
      out.write(currentOnly(cur));
      onlyCur++;
      nextCurrent();
      if ((onlyCur & 0x3fff) === 0) await out.flushIfFull();
    }
    Object.assign(ctx.counts, {
      incoming: nIn,
      current: nCur,
      current_missing: reader === null,
      both,
      incoming_only: onlyIn,
      current_only: onlyCur,
      records_out: both + onlyIn + onlyCur,
    });
  },
};

/**
 * Checks a URL record line as checkUrlRecord does, on slices, filling `T` (5 slots)
 * with its TAB positions; returns checkUrlRecord's message for a bad line, or null.
 */
export function checkRecord(line: string, T: Int32Array): string | null {
  const nf = findTabs(line, T);
  const ok =
    nf === 6 &&
    T[0] === 16 &&
    T[1] === 31 &&
    T[3]! - T[2]! <= 31 &&
    T[4]! > T[3]! + 1 &&
    line.length > T[4]! + 1 &&
    isIdAt(line, 0) &&
    isDigitsAt(line, 17, 31) &&
    isDigitsAt(line, T[2]! + 1, T[3]!);
  return ok ? null : (checkUrlRecord(line.split('\t')) ?? 'malformed record');
}
