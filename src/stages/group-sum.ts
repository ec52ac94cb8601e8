// group-sum: one URL record per id.
import type { StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { LF, compareBytes, digitsValue, latin1, putBytes, putDecimal, type ByteSink } from '../core/bytes.js';
import { MAX_HITS_DIGITS, addHits, hitsTooBig } from '../core/hits.js';
import { ID_BYTES, LineRef, TS_BYTES, U_DOMAIN, U_HITS, U_TAG, U_TS, URL_RECORD, UrlRecordWriter } from '../core/records.js';
import { RecordScanner, checkUrlRecordAt } from '../core/record-checks.js';

/**
 * The pure core: folds consecutive records of one id into one record with the
 * latest timestamp, the last non-empty updatetag (in input order) and the summed
 * hits; domain and url come from the group's first record. Records are lines
 * checked by checkUrlRecordAt. The open group's first line is read where it is
 * until `detach()`, which copies it (most groups close before their chunk ends,
 * and are written without that copy); of the others the grouper keeps copies.
 */
export class Grouper {
  // The open group: its first line `src[at, at + firstLen)` (in the input, or in
  // `first` once detached), its latest timestamp and last tag (`vals`: the timestamp,
  // then the tag), its hits.
  private src: Uint8Array = new Uint8Array(0);
  private at = 0;
  private first = new Uint8Array(256);
  private firstLen = 0;
  private domainAt = 0; // where "domain TAB url" starts, from `at`
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
    return this.open ? compareBytes(b, start, this.src, this.at, ID_BYTES) : 1;
  }

  /** The open group's id, as text ('' when there is none). */
  id(): string {
    return this.open ? latin1(this.src, this.at, this.at + ID_BYTES) : '';
  }

  /**
   * Adds a checked record line, whose bytes must stay as they are until the next
   * `detach()`; when it starts a new id, first writes the previous group's record
   * (with LF) to `out` and returns true.
   */
  push(l: LineRef, out: ByteSink): boolean {
    if (this.open && compareBytes(l.buf, l.start, this.src, this.at, ID_BYTES) === 0) {
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
      const p = putBytes(out.buf, out.pos, this.src, this.at, this.at + this.firstLen);
      out.buf[p] = LF;
      out.pos = p + 1;
      return true;
    }
    const h = this.hitsBytes;
    let n = 0;
    if (this.sum >= 0) n = putDecimal(h, 0, this.sum);
    else for (; n < this.hits.length; n++) h[n] = this.hits.charCodeAt(n);
    this.record
      .setUrl(this.src, this.at, this.at + this.domainAt, this.at + this.firstLen)
      .setValues(this.vals, 0, TS_BYTES, TS_BYTES + this.tagLen)
      .setHits(h, 0, n)
      .write(out);
    return true;
  }

  /** Copies the open group's first line out of the input, whose bytes may change after this call. */
  detach(): void {
    if (!this.open || this.src === this.first) return;
    if (this.firstLen > this.first.length) this.first = new Uint8Array(this.firstLen * 2);
    putBytes(this.first, 0, this.src, this.at, this.at + this.firstLen);
    this.src = this.first;
    this.at = 0;
  }

  /** Opens a group with line `l` (where it is), its timestamp, tag and hits. */
  private start(l: LineRef): void {
    const b = l.buf;
    this.src = b;
    this.at = l.start;
    this.firstLen = l.end - l.start;
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
    const onLine = (buf: Buffer, start: number, end: number, lineNo: number, checked: boolean) => {
      l.set(buf, start, end);
      const bad = checked ? null : checkUrlRecordAt(l);
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
    };
    await ctx.eachLine(onLine, () => grouper.detach(), new RecordScanner('url', l.tabs).scan);
    if (grouper.finish(out)) groups++;
  },
};
