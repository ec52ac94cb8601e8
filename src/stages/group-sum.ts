// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { addHits } from '../core/hits.js';
import { checkUrlRecordLine } from '../core/records.js';

/**
 * The pure core: folds consecutive records of one id into one record with the
 * latest timestamp, the last non-empty updatetag (in input order) and the summed
 * hits; domain and url come from the group's first record. Records are lines
 * checked by checkUrlRecordLine, which fills in their TAB positions.
 */
export class Grouper {
  // The open group, kept as slices of its first line rather than a field array.
  private line: string | null = null;
  private ts = '';
  private tag = '';
  private hits = '';
  private rest = 0; // where "domain TAB url" starts in the first line
  private merged = false;
  private sum = 0; // exact while every hit count is short and the sum safe; else -1
  /** The open group's id ('' before the first record). */
  id = '';

  /** Adds a valid record line with TAB positions `T`; returns the previous group's line (no LF) when this one starts a new id. */
  push(line: string, T: Int32Array): string | null {
    const hits = line.slice(T[2]! + 1, T[3]!);
    if (this.line !== null && line.startsWith(this.id)) {
      const ts = line.slice(17, 31);
      if (ts > this.ts) this.ts = ts;
      if (T[2]! > T[1]! + 1) this.tag = line.slice(T[1]! + 1, T[2]!);
      if (this.sum >= 0) {
        const t = hits.length < 16 ? this.sum + Number(hits) : Infinity;
        if (t <= Number.MAX_SAFE_INTEGER) this.sum = t;
        else {
          this.hits = addHits(String(this.sum), hits);
          this.sum = -1;
        }
      } else this.hits = addHits(this.hits, hits);
      this.merged = true;
      return null;
    }
    const done = this.finish();
    this.line = line;
    this.id = line.slice(0, 16);
    this.ts = line.slice(17, 31);
    this.tag = line.slice(T[1]! + 1, T[2]!);
    this.hits = hits;
    this.rest = T[3]! + 1;
    this.merged = false;
    this.sum = hits.length < 16 ? Number(hits) : -1;
    return done;
  }

  /** The open group's line (no LF), if any; the grouper is then empty. */
  finish(): string | null {
    const line = this.line;
    if (line === null) return null;
    this.line = null;
    if (!this.merged) return line;
    const hits = this.sum >= 0 ? String(this.sum) : this.hits;
    return `${this.id}\t${this.ts}\t${this.tag}\t${hits}\t${line.slice(this.rest)}`;
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
    const out = ctx.out;
    const file = ctx.inputName;
    const grouper = new Grouper();
    const T = new Int32Array(5);
    let records = 0;
    let groups = 0;
    await ctx.eachLine((line, lineNo) => {
      const bad = checkUrlRecordLine(line, T);
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      const id = line.slice(0, 16);
      if (id < grouper.id) {
        throw new DataError('UNSORTED', `id ${id} is out of order after ${grouper.id} (input must be sorted by id)`, { file, line: lineNo });
      }
      records++;
      const done = grouper.push(line, T);
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
