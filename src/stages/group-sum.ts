// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { addHits } from '../core/hits.js';
import { U_HITS, U_ID, U_TAG, U_TS } from '../core/records.js';
import { checkRecord } from './join-current.js';

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
    const out = ctx.out;
    const file = ctx.inputName;
    const T = new Int32Array(5);
    let records = 0;
    let groups = 0;
    // The open group, kept as slices of its first line rather than a field array.
    let gLine: string | null = null;
    let gId = '';
    let gTs = '';
    let gTag = '';
    let gHits = '';
    let gRest = 0; // where "domain TAB url" starts in gLine
    let merged = false;
    let sum = 0; // exact while every hit count is short and the sum safe; else -1
    const emit = () => {
      groups++;
      if (!merged) out.write(gLine + '\n');
      else {
        const hits = sum >= 0 ? String(sum) : gHits;
        out.write(`${gId}\t${gTs}\t${gTag}\t${hits}\t${gLine!.slice(gRest)}\n`);
      }
    };
    await ctx.eachLine((line, lineNo) => {
      const bad = checkRecord(line, T);
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      records++;
      const hits = line.slice(T[2]! + 1, T[3]!);
      if (gLine !== null && line.startsWith(gId)) {
        const ts = line.slice(17, 31);
        if (ts > gTs) gTs = ts;
        if (T[2]! > T[1]! + 1) gTag = line.slice(T[1]! + 1, T[2]!);
        if (sum >= 0) {
          const t = hits.length < 16 ? sum + Number(hits) : Infinity;
          if (t <= Number.MAX_SAFE_INTEGER) sum = t;
          else {
            gHits = addHits(String(sum), hits);
            sum = -1;
          }
        } else gHits = addHits(gHits, hits);
        merged = true;
        return;
      }
      const id = line.slice(0, 16);
      if (id < gId) {
        throw new DataError('UNSORTED', `id ${id} is out of order after ${gId} (input must be sorted by id)`, { file, line: lineNo });
      }
      if (gLine !== null) emit();
      gLine = line;
      gId = id;
      gTs = line.slice(17, 31);
      gTag = line.slice(T[1]! + 1, T[2]!);
      gHits = hits;
      gRest = T[3]! + 1;
      merged = false;
      sum = hits.length < 16 ? Number(hits) : -1;
    });
    if (gLine !== null) emit();
    Object.assign(ctx.counts, { records_in: records, records_out: groups, merged: records - groups });
  },
};
