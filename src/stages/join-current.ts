// join-current: full outer merge-join of incoming_log (stdin) with current_log.
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { IdOrder, MISSING, checkUrlRecordLine } from '../core/records.js';
import { FileLineReader } from '../core/tsv.js';

export interface JoinCurrentOptions {
  current: string;
}

/**
 * The pure core: the joined line (no LF) for one id, from the current side `c`
 * and/or the incoming side `i` (URL-record lines with the TAB positions
 * checkUrlRecordLine found, `cT` and `iT`; at least one side present).
 */
export function joinedLine(c: string | null, cT: Int32Array, i: string | null, iT: Int32Array): string {
  // "domain TAB url" is one slice: the joined record carries both in that order.
  const key = i ?? c!;
  const keyT = i ? iT : cT;
  return (
    `${key.slice(0, 16)}\t${key.slice(keyT[3]! + 1)}\t` +
    `${c ? c.slice(17, 31) : MISSING}\t${i ? i.slice(17, 31) : MISSING}\t` +
    `${c ? c.slice(cT[1]! + 1, cT[2]!) : ''}\t${i ? i.slice(iT[1]! + 1, iT[2]!) : ''}\t` +
    `${c ? c.slice(cT[2]! + 1, cT[3]!) : MISSING}\t${i ? i.slice(iT[2]! + 1, iT[3]!) : MISSING}`
  );
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

    // Records stay lines; fields are slices between the TABs in T and C.
    let cur: string | null = null;
    let cId = '';
    const nextCurrent = (): void => {
      cur = null;
      if (!reader) return;
      const line = reader.next();
      if (line === null) return;
      const bad = checkUrlRecordLine(line, C) ?? curOrder.check(line.slice(0, 16));
      if (bad) throw new DataError('BAD_CURRENT', bad, { file: o.current, line: reader.lineNo });
      nCur++;
      cur = line;
      cId = line.slice(0, 16);
    };

    nextCurrent();
    await ctx.eachLine((line, lineNo) => {
      const id = line.slice(0, 16);
      const bad = checkUrlRecordLine(line, T) ?? inOrder.check(id);
      if (bad) throw new DataError('BAD_INCOMING', bad, { file: ctx.inputName, line: lineNo });
      nIn++;
      while (cur !== null && cId < id) {
        out.write(joinedLine(cur, C, null, T) + '\n');
        onlyCur++;
        nextCurrent();
      }
      if (cur !== null && cId === id) {
        out.write(joinedLine(cur, C, line, T) + '\n');
        both++;
        nextCurrent();
      } else {
        out.write(joinedLine(null, C, line, T) + '\n');
        onlyIn++;
      }
    });
    while (cur !== null) {
      out.write(joinedLine(cur, C, null, T) + '\n');
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

