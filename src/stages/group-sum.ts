// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { LF, compareBytes, digitsValue, latin1, putBytes, putDecimal, type ByteSink } from '../core/bytes.js';
import { MAX_HITS_DIGITS, addHits, hitsTooBig } from '../core/hits.js';
import { ID_BYTES, LineRef, TS_BYTES, U_DOMAIN, U_HITS, U_TAG, U_TS, URL_RECORD, UrlRecordWriter } from '../core/records.js';
import { checkUrlRecordAt } from '../core/record-checks.js';

/**
 * The pure core: folds consecutive records of one id into one record with the
 * latest timestamp, the last non-empty updatetag (in input order) and the summed
 * hits; domain and url come from the group's first record. Records are lines
 * checked by checkUrlRecordAt; the grouper keeps copies of what it needs of them.
 */
export class Grouper {
  // The open group: a copy of its first line (id at 0), its latest timestamp and last
  // tag (`vals`: the timestamp, then the tag), its hits.
  private first = new Uint8Array(256);
  private firstLen = 0;
  private domainAt = 0; // where "domain TAB url" starts in `first`
  private vals = new Uint8Array(TS_BYTES + 64);
  private tagLen = 0;
  private open = false;
  private merged = false;
  private sum = 0; // exact while every hit count is short and the sum safe; else -1 and `hits` holds it
  private hits = '';
  private readonly hitsBytes = new Uint8Array(MAX_HITS_DIGITS + 2);
  private readonly record = new UrlRecordWriter();

  /** Compares the id at `b[start]` with the open group's (positive when there is none). */
  compareId(b: Uint8Array, start: number): number {
    return this.open ? compareBytes(b, start, this.first, 0, ID_BYTES) : 1;
  }

  /** The open group's id, as text ('' when there is none). */
  id(): string {
    return this.open ? latin1(this.first, 0, ID_BYTES) : '';
  }

  /**
   * Adds a checked record line; when it starts a new id, first writes the previous
   * group's record (with LF) to `out` and returns true.
   */
  push(l: LineRef, out: ByteSink): boolean {
    if (this.open && compareBytes(l.buf, l.start, this.first, 0, ID_BYTES) === 0) {
      this.merge(l);
      return false;
    }
    const done = this.finish(out);
    this.start(l);
    return done;
  }

  /** Writes the open group's record (with LF) to `out`, if there is one, and returns whether it did; the grouper is then empty. */
  finish(out: ByteSink): boolean {
    if (!this.open) return false;
    this.open = false;
    if (!this.merged) {
      out.reserve(this.firstLen + 1);
      const p = putBytes(out.buf, out.pos, this.first, 0, this.firstLen);
      out.buf[p] = LF;
      out.pos = p + 1;
      return true;
    }
    const h = this.hitsBytes;
    let n = 0;
    if (this.sum >= 0) n = putDecimal(h, 0, this.sum);
    else for (; n < this.hits.length; n++) h[n] = this.hits.charCodeAt(n);
    this.record
      .setUrl(this.first, 0, this.domainAt, this.firstLen)
      .setValues(this.vals, 0, TS_BYTES, TS_BYTES + this.tagLen)
      .setHits(h, 0, n)
      .write(out);
    return true;
  }

  /** Opens a group with line `l`: a copy of it, its timestamp, tag and hits. */
  private start(l: LineRef): void {
    const b = l.buf;
    const n = l.end - l.start;
    if (n > this.first.length) this.first = new Uint8Array(n * 2);
    putBytes(this.first, 0, b, l.start, l.end);
    this.firstLen = n;
    this.domainAt = l.fieldStart(U_DOMAIN) - l.start;
    putBytes(this.vals, 0, b, l.fieldStart(U_TS), l.fieldEnd(U_TS));
    this.setTag(b, l.fieldStart(U_TAG), l.fieldEnd(U_TAG));
    const h = l.fieldStart(U_HITS);
    const hEnd = l.fieldEnd(U_HITS);
    this.sum = hEnd - h < 16 ? digitsValue(b, h, hEnd) : -1;
    this.hits = this.sum < 0 ? latin1(b, h, hEnd) : '';
    this.open = true;
    this.merged = false;
  }

  /** Folds line `l`, of the open group's id, into the group. */
  private merge(l: LineRef): void {
    const b = l.buf;
    const ts = l.fieldStart(U_TS);
    if (compareBytes(b, ts, this.vals, 0, TS_BYTES) > 0) putBytes(this.vals, 0, b, ts, ts + TS_BYTES);
    const tag = l.fieldStart(U_TAG);
    const tagEnd = l.fieldEnd(U_TAG);
    if (tagEnd > tag) this.setTag(b, tag, tagEnd);
    const h = l.fieldStart(U_HITS);
    const hEnd = l.fieldEnd(U_HITS);
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
  }

  /** Makes `b[from, to)` the group's tag (after its timestamp in `vals`). */
  private setTag(b: Uint8Array, from: number, to: number): void {
    if (TS_BYTES + to - from > this.vals.length) {
      const bigger = new Uint8Array((TS_BYTES + to - from) * 2);
      bigger.set(this.vals.subarray(0, TS_BYTES));
      this.vals = bigger;
    }
    this.tagLen = putBytes(this.vals, TS_BYTES, b, from, to) - TS_BYTES;
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
    const l = new LineRef(URL_RECORD.length - 1);
    let records = 0;
    let groups = 0;
    let merged = 0; // records folded into the one before (a group still open is not output yet)
    ctx.reportCounts(() => ({ records_in: records, records_out: groups, merged }));
    await ctx.eachLine((buf, start, end, lineNo) => {
      const bad = checkUrlRecordAt(l.set(buf, start, end));
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      const order = grouper.compareId(buf, start);
      if (order < 0) {
        const id = latin1(buf, start, start + ID_BYTES);
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
