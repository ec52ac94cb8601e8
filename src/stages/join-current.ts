// join-current: full outer merge-join of incoming_log (stdin) with current_log.
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { IdOrder, MISSING, U_DOMAIN, U_HITS, U_ID, U_TAG, U_TS, U_URL, checkUrlRecord } from '../core/records.js';
import { FileLineReader } from '../core/tsv.js';

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

    const nextCurrent = (): string[] | null => {
      if (!reader) return null;
      const line = reader.next();
      if (line === null) return null;
      const f = line.split('\t');
      const place = { file: o.current, line: reader.lineNo };
      const bad = checkUrlRecord(f) ?? curOrder.check(f[U_ID]!);
      if (bad) throw new DataError('BAD_CURRENT', bad, place);
      nCur++;
      return f;
    };

    let cur = nextCurrent();
    await ctx.eachLine((line, lineNo) => {
      const f = line.split('\t');
      const bad = checkUrlRecord(f) ?? inOrder.check(f[U_ID]!);
      if (bad) throw new DataError('BAD_INCOMING', bad, { file: ctx.inputName, line: lineNo });
      nIn++;
      const id = f[U_ID]!;
      while (cur !== null && cur[U_ID]! < id) {
        out.write(joinedLine(cur, null) + '\n');
        onlyCur++;
        cur = nextCurrent();
      }
      if (cur !== null && cur[U_ID] === id) {
        out.write(joinedLine(cur, f) + '\n');
        both++;
        cur = nextCurrent();
      } else {
        out.write(joinedLine(null, f) + '\n');
        onlyIn++;
      }
    });
    while (cur !== null) {
      out.write(joinedLine(cur, null) + '\n');
      onlyCur++;
      cur = nextCurrent();
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
