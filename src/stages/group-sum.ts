// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { addHits } from '../core/hits.js';
import { U_HITS, U_ID, U_TAG, U_TS, checkUrlRecord } from '../core/records.js';

/**
 * The pure core: folds consecutive records of one id into one record with the
 * latest timestamp, the last non-empty updatetag (in input order) and the summed
 * hits; domain and url come from the group's first record.
 */
export class Grouper {
  private g: string[] | null = null;

  /** Adds a record (fields); returns the previous group's line (no LF) when this one starts a new id. */
  push(f: string[]): string | null {
    const g = this.g;
    if (g !== null && g[U_ID] === f[U_ID]) {
      if (f[U_TS]! > g[U_TS]!) g[U_TS] = f[U_TS]!;
      if (f[U_TAG] !== '') g[U_TAG] = f[U_TAG]!;
      g[U_HITS] = addHits(g[U_HITS]!, f[U_HITS]!);
      return null;
    }
    this.g = f;
    return g === null ? null : g.join('\t');
  }

  /** The last group's line, if any. */
  finish(): string | null {
    const g = this.g;
    this.g = null;
    return g === null ? null : g.join('\t');
  }
}

export const groupSum: StageDef<Record<string, never>> = {
  name: 'group-sum',
  summary: 'Fold URL records with the same id into one (incoming_log).',
  usage: `
Reads URL records "id timestamp updatetag hits domain url" sorted by id (as
analyze-dump writes them) and writes one record per id:

  timestamp  the latest of the group
  updatetag  the last non-empty one in input order (empty if none)
  hits       the sum (exact, any size)
  domain,url those of the group's first record

Buffers: one record. An id smaller than the one before it is an error naming
the line; a malformed record is an error too (this is not a first-line filter).`,
  normalize: () => ({}),
  async run(ctx) {
    const grouper = new Grouper();
    const out = ctx.out;
    let prevId = '';
    let records = 0;
    let groups = 0;
    const file = ctx.inputName;
    await ctx.eachLine((line, lineNo) => {
      const f = line.split('\t');
      const bad = checkUrlRecord(f);
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      const id = f[U_ID]!;
      if (id < prevId) {
        throw new DataError('UNSORTED', `id ${id} is out of order after ${prevId} (input must be sorted by id)`, { file, line: lineNo });
      }
      prevId = id;
      records++;
      const done = grouper.push(f);
      if (done !== null) {
        groups++;
        out.write(done + '\n');
      }
    });
    const last = grouper.finish();
    if (last !== null) {
      groups++;
      out.write(last + '\n');
    }
    Object.assign(ctx.counts, { records_in: records, records_out: groups, merged: records - groups });
  },
};
