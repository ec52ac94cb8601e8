// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { LF, TAB, compareBytes, digitsValue, latin1, putBytes, putDecimal, type ByteSink } from '../core/bytes.js';
import { MAX_HITS_DIGITS, addHits, hitsTooBig } from '../core/hits.js';
import { LineRef, checkUrlRecordAt } from '../core/records.js';

/**
 * The pure core: folds consecutive records of one id into one record with the
 * latest timestamp, the last non-empty updatetag (in input order) and the summed
 * hits; domain and url come from the group's first record. Records are lines
 * checked by checkUrlRecordAt; the grouper keeps copies of what it needs of them.
 */
export class Grouper {
  // The open group: a copy of its first line (id at 0), its latest timestamp, last tag.
  private first = new Uint8Array(256);
  private firstLen = 0;
  private rest = 0; // where "domain TAB url" starts in `first`
  private ts = new Uint8Array(14);
  private tag = new Uint8Array(64);
  private tagLen = 0;
  private open = false;
  private merged = false;
  private sum = 0; // exact while every hit count is short and the sum safe; else -1 and `hits` holds it
  private hits = '';

  /** Compares the id at `b[start]` with the open group's (positive when there is none). */
  compareId(b: Uint8Array, start: number): number {
    return this.open ? compareBytes(b, start, this.first, 0, 16) : 1;
  }

  /** The open group's id, as text ('' when there is none). */
  id(): string {
    return this.open ? latin1(this.first, 0, 16) : '';
  }

  /**
   * Adds a checked record line; when it starts a new id, first writes the previous
   * group's record (with LF) to `out` and returns true.
   */
  push(l: LineRef, out: ByteSink): boolean {
    const b = l.buf;
    const T = l.tabs;
    const h = T[2]! + 1;
    const hEnd = T[3]!;
    if (this.open && compareBytes(b, l.start, this.first, 0, 16) === 0) {
      if (compareBytes(b, l.start + 17, this.ts, 0, 14) > 0) putBytes(this.ts, 0, b, l.start + 17, l.start + 31);
      if (T[2]! > T[1]! + 1) this.setTag(b, T[1]! + 1, T[2]!);
      if (this.sum >= 0) {
        const t = hEnd - h < 16 ? this.sum + digitsValue(b, h, hEnd) : Infinity;
        if (t <= Number.MAX_SAFE_INTEGER) this.sum = t;
        else {
          this.hits = addHits(String(this.sum), latin1(b, h, hEnd));
          this.sum = -1;
        }
      } else this.hits = addHits(this.hits, latin1(b, h, hEnd));
      if (this.sum < 0 && this.hits.length > MAX_HITS_DIGITS) throw new DataError('HITS_TOO_BIG', hitsTooBig(this.hits.length));
      this.merged = true;
      return false;
    }
    const done = this.finish(out);
    const n = l.end - l.start;
    if (n > this.first.length) this.first = new Uint8Array(n * 2);
    this.first.set(b.subarray(l.start, l.end));
    this.firstLen = n;
    this.rest = T[3]! + 1 - l.start;
    putBytes(this.ts, 0, b, l.start + 17, l.start + 31);
    this.setTag(b, T[1]! + 1, T[2]!);
    this.sum = hEnd - h < 16 ? digitsValue(b, h, hEnd) : -1;
    this.hits = this.sum < 0 ? latin1(b, h, hEnd) : '';
    this.open = true;
    this.merged = false;
    return done;
  }

  /** Writes the open group's record (with LF) to `out`, if there is one, and returns whether it did; the grouper is then empty. */
  finish(out: ByteSink): boolean {
    if (!this.open) return false;
    this.open = false;
    const f = this.first;
    out.reserve(this.firstLen + this.tagLen + 64);
    const o = out.buf;
    let p = out.pos;
    if (!this.merged) p = putBytes(o, p, f, 0, this.firstLen);
    else {
      p = putBytes(o, p, f, 0, 17); // id TAB
      p = putBytes(o, p, this.ts, 0, 14);
      o[p++] = TAB;
      p = putBytes(o, p, this.tag, 0, this.tagLen);
      o[p++] = TAB;
      if (this.sum >= 0) p = putDecimal(o, p, this.sum);
      else for (let k = 0; k < this.hits.length; k++) o[p++] = this.hits.charCodeAt(k);
      o[p++] = TAB;
      p = putBytes(o, p, f, this.rest, this.firstLen);
    }
    o[p++] = LF;
    out.pos = p;
    return true;
  }

  private setTag(b: Uint8Array, from: number, to: number): void {
    if (to - from > this.tag.length) this.tag = new Uint8Array((to - from) * 2);
    this.tagLen = putBytes(this.tag, 0, b, from, to);
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
  hits       the sum (exact; beyond 30 digits is an error naming the line)
  domain,url those of the group's first record

Buffers: one record. An id smaller than the one before it is an error naming
the line; a malformed record is an error too (this is not a first-line filter).`,
  normalize: () => ({}),
  async run(ctx) {
    const out = ctx.out;
    const file = ctx.inputName;
    const grouper = new Grouper();
    const l = new LineRef(5);
    let records = 0;
    let groups = 0;
    let merged = 0; // records folded into the one before (a group still open is not output yet)
    ctx.reportCounts(() => ({ records_in: records, records_out: groups, merged }));
    await ctx.eachLine((buf, start, end, lineNo) => {
      const bad = checkUrlRecordAt(l.set(buf, start, end));
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      const order = grouper.compareId(buf, start);
      if (order < 0) {
        const id = latin1(buf, start, start + 16);
        throw new DataError('UNSORTED', `id ${id} is out of order after ${grouper.id()} (input must be sorted by id)`, { file, line: lineNo });
      }
      // Counted once folded: a line that fails (a hits sum past 30 digits) is in none of the
      // counts, so records_in = records_out + merged + the open group in a failed run too.
      const wrote = grouper.push(l, out);
      records++;
      if (wrote) groups++;
      if (order === 0) merged++;
    });
    if (grouper.finish(out)) groups++;
  },
};
