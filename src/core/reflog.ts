// The reflog line parser: fields, timestamp, hits, the URL's canonical form, id and
// domain, and the reasons a line is rejected; free of I/O. analyze-dump runs it over
// batches; explain and partner-db owner ask it about one URL.
import { isUtf8 } from 'node:buffer';
import { loadAddon } from './addons.js';
import { isDigitsAt } from './bytes.js';
import { MAX_REFLOG_HITS_DIGITS } from './hits.js';
import { DEFAULT_MAX_LINE } from './lines.js';
import { ID_BYTES, UrlRecordWriter, clip } from './records.js';
import type { RecordSink } from './sorter.js';
import { timestampKey } from './time.js';
import { DEFAULT_MAX_URL_BYTES, NOT_SCANNED, UrlResolver, type UrlHash, type UrlOptions } from './url.js';

// Reflog fields (0-based): batch_id priority timestamp page_id url hits [updatetag].
const R_TS = 2;
const R_URL = 4;
const R_HITS = 5;
/** Lines longer than this cannot hold a valid record (URL limit plus generous fields). */
export const lineLimit = (maxUrl: number) => maxUrl + 65536;
/**
 * The longest URL record written (without its LF). The record streams carry lines of
 * at most 1 MiB, and a joined record (join-current) holds one URL and domain with two
 * updatetags, this hour's and the one current_log kept: from records of at most this
 * size, a joined line has at most 2 x 524,224 + 40 bytes (hits sums of 30 digits
 * included). Only a --max-url-bytes far above the default makes a record this long.
 */
export const MAX_RECORD_BYTES = (DEFAULT_MAX_LINE - 128) / 2;

/** Everything analyze-dump decides about one reflog line. */
export type LineVerdict = { kind: 'record'; record: string } | { kind: 'skip'; what: 'header' | 'empty' } | { kind: 'reject'; reason: string; detail: string };

/** What `ReflogAnalyzer.line()` found. */
export const enum Verdict {
  Record,
  Header,
  Empty,
  Reject,
}

/**
 * The core of analyze-dump, free of I/O: classifies reflog lines (bytes, LF
 * removed) and writes each valid one to a sink as the URL record
 * `id ts updatetag hits domain url` LF, keyed by (id, timestamp).
 */
export class ReflogAnalyzer {
  /** Why the last line was rejected (set with Verdict.Reject). */
  reason = '';
  detail = '';
  private readonly tabs = new Int32Array(7);
  private readonly pass = new LinePass(this.tabs);
  private readonly record = new UrlRecordWriter();

  constructor(
    private readonly urls: UrlResolver,
    private readonly sink: RecordSink,
  ) {}

  /** Where the line `lineAt` looked at ends (its LF, or the end of the buffer), and the end of its bytes as a reject keeps them. */
  lineEnd = 0;
  textEnd = 0;

  /** The verdict on a line (bytes, LF removed); `overlong`: it was longer than the limit (and has a TAB). */
  line(buf: Buffer, start: number, end: number, overlong: boolean): Verdict {
    if (overlong) return this.reject('line too long', `more than ${lineLimit(this.urls.opts.maxUrlBytes)} bytes`);
    if (end > start && buf[end - 1] === 13) end--;
    if (end === start) return Verdict.Empty;
    // One pass finds the TABs, the last CR and whether the line is plain ASCII.
    const t = this.tabs;
    let nt = 0;
    let high = 0;
    let cr = -1;
    for (let p = start; p < end; p++) {
      const c = buf[p]!;
      if (c === 9) {
        if (nt < 7) t[nt] = p;
        nt++;
      } else if (c === 13) cr = p;
      high |= c;
    }
    return this.fields(buf, start, end, nt, high, cr, NOT_SCANNED);
  }

  /**
   * The verdict on the line that starts at `buf[start]` and ends at the next LF (or at
   * `n`), found in the same pass over its bytes; sets lineEnd and textEnd. A line
   * longer than `maxLine` (its CR aside) is a header if it has no TAB at all, else
   * rejected, keeping its first `maxLine` bytes.
   */
  lineAt(buf: Buffer, start: number, n: number, maxLine: number): Verdict {
    const pass = this.pass;
    pass.over(buf, start, n);
    const p = pass.end;
    const nt = pass.nt;
    let cr = pass.cr;
    this.lineEnd = p;
    let end = p;
    // A trailing CR is stripped (and so is not the line's last CR).
    if (cr === end - 1 && end > start) {
      end--;
      cr = pass.crBefore;
    }
    this.textEnd = end - start > maxLine ? start + maxLine : p;
    if (end - start > maxLine) return nt > 0 ? this.line(buf, start, end, true) : Verdict.Header;
    if (end === start) return Verdict.Empty;
    return this.fields(buf, start, end, nt, pass.high, cr, pass.cut);
  }

  /**
   * The verdict on a line's fields, from one pass over it: `nt` TABs (the first 7 in
   * `tabs`), `high` 128 or more when a byte is, its last CR, and `scanned`, canonicalEnd
   * of its URL field with the host in `pass.host` (or NOT_SCANNED).
   */
  private fields(buf: Buffer, start: number, end: number, nt: number, high: number, cr: number, scanned: number): Verdict {
    const t = this.tabs;
    if (nt === 0) return Verdict.Header;
    if (high >= 128 && !isUtf8(buf.subarray(start, end))) return this.reject('invalid UTF-8', '');
    if (nt !== 5 && nt !== 6) return this.reject('bad field count', `${nt + 1} fields, want 6 or 7`);
    const tsAt = t[R_TS - 1]! + 1;
    const ts = timestampKey(buf, tsAt, t[R_TS]!);
    if (ts < 0) return this.reject('bad timestamp', clip(buf.toString('utf8', tsAt, t[R_TS]!)));
    const hitsAt = t[R_HITS - 1]! + 1;
    const hitsEnd = nt === 6 ? t[R_HITS]! : end;
    // Any number of leading zeros: only the significant digits are bounded (below).
    if (!isDigitsAt(buf, hitsAt, hitsEnd)) {
      return this.reject('bad hits', hitsEnd === hitsAt ? 'empty' : clip(buf.toString('utf8', hitsAt, hitsEnd)));
    }
    let h = hitsAt;
    while (h < hitsEnd - 1 && buf[h] === 48) h++; // canonical decimal: no leading zeros
    if (hitsEnd - h > MAX_REFLOG_HITS_DIGITS) return this.reject('bad hits', `more than ${MAX_REFLOG_HITS_DIGITS} digits`);
    const tagAt = nt === 6 ? hitsEnd + 1 : end;
    if (cr >= tagAt) return this.reject('bad updatetag', 'contains CR');
    const urlAt = t[R_URL - 1]! + 1;
    // WHATWG would drop it and answer for a URL that is not the one in the line (`cr`
    // is the last CR: one after the URL has been rejected above).
    if (cr >= urlAt) return this.reject('bad URL', 'contains CR');
    // The URL's bytes decide its answer: they are UTF-8 when the line has high bytes, else ASCII.
    const u = this.urls;
    const k = u.resolve(buf, urlAt, t[R_URL]!, high >= 128, scanned, this.pass.host);
    const bad = u.rejected(k);
    if (bad) return this.reject(bad.reason, bad.detail);

    // The resolver holds the id and "domain TAB url" as bytes, one after the other.
    const vs = u.start[k]!;
    const rec = this.record
      .setUrl(u.bytes, vs, vs + ID_BYTES, u.end[k]!)
      .setValues(buf, tsAt, tagAt, end)
      .setHits(buf, h, hitsEnd);
    const length = rec.length();
    if (length > MAX_RECORD_BYTES) return this.reject('record too long', `${length} bytes, max ${MAX_RECORD_BYTES}`);
    const sink = this.sink;
    const hi = u.hi[k]!;
    if (sink.reserveFor) sink.reserveFor(hi, length + 1);
    else sink.reserve(length + 1);
    sink.commit(rec.put(sink.buf, sink.pos), hi, u.lo[k]!, ts);
    return Verdict.Record;
  }

  private reject(reason: string, detail: string): Verdict {
    this.reason = reason;
    this.detail = detail;
    return Verdict.Reject;
  }
}

/** Holds the one record an analyzer writes, for `analyzeLine`. */
class OneRecord implements RecordSink {
  buf = Buffer.alloc(0);
  pos = 0;
  record = '';
  reserve(max: number): void {
    if (this.buf.length < max) this.buf = Buffer.alloc(max);
    this.pos = 0;
  }
  commit(end: number): void {
    this.record = this.buf.toString('utf8', 0, end - 1);
  }
}

/**
 * The core on one line (bytes, LF removed): its verdict and, for a valid record,
 * the URL record line `id ts updatetag hits domain url` (no LF).
 */
export function analyzeLine(buf: Buffer, start: number, end: number, overlong: boolean, opts: UrlOptions, hash: UrlHash): LineVerdict {
  const one = new OneRecord();
  // One line: a resolver without memory (a remembering one takes 4 MiB and more).
  const a = new ReflogAnalyzer(new UrlResolver(opts, hash, 0, 0), one);
  const v = a.line(buf, start, end, overlong);
  if (v === Verdict.Record) return { kind: 'record', record: one.record };
  if (v === Verdict.Reject) return { kind: 'reject', reason: a.reason, detail: a.detail };
  return { kind: 'skip', what: v === Verdict.Header ? 'header' : 'empty' };
}

/** analyze-dump's URL options by default (the runner's). */
export const DEFAULT_URL_OPTIONS: UrlOptions = { maxUrlBytes: DEFAULT_MAX_URL_BYTES, dropParams: null, sortQuery: false, domainMode: 'registrable' };

/** A URL as analyze-dump records it: canonical form, id (16 hex digits) and domain. */
export interface UrlIdentity {
  url: string;
  id: string;
  domain: string;
}

/** The canonical form, id and domain of one URL as analyze-dump computes them in a reflog line, or why it rejects it. */
export function urlIdentity(raw: string, hash: UrlHash, opts: UrlOptions = DEFAULT_URL_OPTIONS): UrlIdentity | { invalid: string } {
  if (/[\t\r\n]/.test(raw)) return { invalid: 'bad URL: contains a TAB or a line break' };
  const buf = Buffer.from(raw);
  // One URL: a resolver without memory (a remembering one takes 4 MiB and more).
  const u = new UrlResolver(opts, hash, 0, 0);
  const k = u.resolve(buf, 0, buf.length, buf.length !== raw.length);
  const bad = u.rejected(k);
  if (bad) return { invalid: bad.detail ? `${bad.reason}: ${bad.detail}` : bad.reason };
  const s = u.start[k]!;
  const [domain, url] = u.bytes.toString('latin1', s + ID_BYTES, u.end[k]!).split('\t') as [string, string];
  return { id: u.bytes.toString('latin1', s, s + ID_BYTES), domain, url };
}

type ScanReflog = (buf: Uint8Array, from: number, limit: number, out: Int32Array) => number;

/** The native pass over reflog lines (src/native/scan.c), or null when it was not built; tests may turn it off. */
export const nativeReflogScan: { fn: ScanReflog | null } = { fn: loadAddon<{ scanReflog: ScanReflog }>('scan')?.scanReflog ?? null };

/** Ints the native pass writes per line: end, TABs, high, last CR, the CR before it, the first 7 TABs, canonicalEnd of the URL field and its host. */
const PASS_STRIDE = 15;
/** Lines a native call passes over at most. */
const PASS_AHEAD = 1024;

/**
 * ReflogAnalyzer.lineAt's one pass over a line: where it ends (its LF, or the end of
 * the bytes), how many TABs it has (the first 7 go to `tabs`), 128 when a byte is 128
 * or more (else less), its last CR and the one before (or -1). From the native addon,
 * a block of lines ahead, when it was built; which then also gives, for a line of 5
 * TABs or more, canonicalEnd of its URL field (`cut`, and the host in `host`), else
 * `cut` is NOT_SCANNED.
 */
export class LinePass {
  end = 0;
  nt = 0;
  high = 0;
  cr = -1;
  crBefore = -1;
  cut = NOT_SCANNED;
  readonly host = new Int32Array(2);
  private readonly ahead = new Int32Array(PASS_AHEAD * PASS_STRIDE);
  /** The lines passed ahead: `ahead[at..]` is the next one's, which starts at `next`; `left` of them. */
  private at = 0;
  private left = 0;
  private next = -1;

  constructor(private readonly tabs: Int32Array) {}

  /** Passes over the line from `start` in `buf[.., n)`; one from 0 starts over (a new batch, maybe in a reused buffer). */
  over(buf: Uint8Array, start: number, n: number): void {
    const native = nativeReflogScan.fn;
    if (native !== null && (start === 0 || start !== this.next || this.left === 0)) {
      this.left = native(buf, start, n, this.ahead);
      this.at = 0;
    }
    if (native === null || this.left === 0) {
      this.here(buf, start, n);
      return;
    }
    const a = this.ahead;
    const at = this.at;
    this.end = a[at]!;
    this.nt = a[at + 1]!;
    this.high = a[at + 2]!;
    this.cr = a[at + 3]!;
    this.crBefore = a[at + 4]!;
    const k = Math.min(this.nt, 7);
    for (let i = 0; i < k; i++) this.tabs[i] = a[at + 5 + i]!;
    this.cut = a[at + 12]!;
    this.host[0] = a[at + 13]!;
    this.host[1] = a[at + 14]!;
    this.at += PASS_STRIDE;
    this.left--;
    this.next = this.end + 1;
  }

  /** The pass in JavaScript. */
  private here(buf: Uint8Array, start: number, n: number): void {
    const t = this.tabs;
    let nt = 0;
    let high = 0;
    let cr = -1;
    let crBefore = -1;
    let p = start;
    for (; p < n; p++) {
      const c = buf[p]!;
      if (c <= 13) {
        if (c === 10) break;
        if (c === 9) {
          if (nt < 7) t[nt] = p;
          nt++;
        } else if (c === 13) {
          crBefore = cr;
          cr = p;
        }
      }
      high |= c;
    }
    this.end = p;
    this.nt = nt;
    this.high = high;
    this.cr = cr;
    this.crBefore = crBefore;
    this.cut = NOT_SCANNED;
  }
}
