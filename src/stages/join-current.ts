// join-current: full outer merge-join of incoming_log (stdin) with current_log.
import * as os from 'node:os';
import { pathOption, refuseOwnStreams, type Count, type StageDef } from '../cli/stage.js';
import type { Output } from '../cli/output.js';
import { DataError } from '../core/errors.js';
import { compareBytes } from '../core/bytes.js';
import { ID_BYTES, IdOrder, LineRef, URL_RECORD, writeJoined } from '../core/records.js';
import { RecordScanner, checkUrlRecordAt } from '../core/record-checks.js';
import { ByteLineSplitter, FileLineReader, type ByteLineFn, type LineScan } from '../core/lines.js';
import { COPY_PREFIX, regularFileFor } from '../core/fifos.js';
import { removeStaleTemps } from '../core/temps.js';

export interface JoinCurrentOptions {
  current: string;
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
or a last line cut off without its newline, are errors naming the line. A
--current that is a FIFO is copied to the system temp directory first (so that
a signal still stops the stage while its writer is late); /dev/null is an empty
log; any other device (/dev/zero, a terminal, a disk) is refused before any
output.`,
  options(cmd) {
    cmd.requiredOption('--current <file>', 'current_log to join with (required; a file that does not exist is an empty log)');
  },
  normalize(raw) {
    return { current: pathOption('--current', raw.current) };
  },
  async run(ctx, o) {
    refuseOwnStreams('--current', o.current, ctx.inputPath);
    // A FIFO is read through a copy: a blocking read of it would hold off SIGTERM. Copies
    // that SIGKILLed runs left (as big as a current_log) are removed first.
    removeStaleTemps(os.tmpdir(), COPY_PREFIX);
    const reader = FileLineReader.openIfExists(await regularFileFor(o.current, ctx.onExit), o.current);
    ctx.onExit(() => reader?.close());
    const join = new MergeJoin(ctx.out, reader, o.current, ctx.inputName);
    ctx.reportCounts(() => join.counts());
    join.begin();
    const splitter = new ByteLineSplitter(ctx.inputName);
    await ctx.eachChunk((chunk) => join.feed(splitter, chunk));
    splitter.end();
    await join.finish();
  },
};

/** A line of the incoming side that waits for the current-only records before it to be written. */
interface Waiting {
  buf: Buffer;
  start: number;
  end: number;
  lineNo: number;
}

/**
 * The merge-join of one run: incoming lines as the splitter hands them over, against
 * current_log read line by line (`reader`, null for a missing one). Records stay bytes;
 * fields are ranges between the TABs a check found.
 */
class MergeJoin {
  private readonly curOrder = new IdOrder();
  private readonly inOrder = new IdOrder();
  private readonly inc = new LineRef(URL_RECORD.length - 1);
  private readonly curLine = new LineRef(URL_RECORD.length - 1);
  private cur: LineRef | null = null;
  /** The lines waiting, from the one that stopped short (checked, and partly joined). */
  private readonly waiting: Waiting[] = [];
  /** Where the splitter's scan puts an incoming line's TABs (`inc` may hold a waiting line's). */
  private readonly scanned = new LineRef(URL_RECORD.length - 1);
  private readonly onLine: ByteLineFn = (buf, start, end, lineNo, checked) => this.take(buf, start, end, lineNo, checked);
  private readonly scanIncoming: LineScan = new RecordScanner('url', this.scanned.tabs).scan;
  private readonly scanCurrent: LineScan = new RecordScanner('url', this.curLine.tabs).scan;
  private nIn = 0;
  private nCur = 0;
  private both = 0;
  private onlyIn = 0;
  private onlyCur = 0;

  constructor(
    private readonly out: Output,
    private readonly reader: FileLineReader | null,
    private readonly currentName: string,
    private readonly inputName: string,
  ) {}

  /** Reads the first current_log line (a bad one is an error here, with the counts registered). */
  begin(): void {
    this.nextCurrent();
  }

  counts(): Record<string, Count> {
    const { nIn, nCur, both, onlyIn, onlyCur } = this;
    return {
      incoming: nIn,
      current: nCur,
      current_missing: this.reader === null,
      both,
      incoming_only: onlyIn,
      current_only: onlyCur,
      records_out: both + onlyIn + onlyCur,
    };
  }

  /**
   * Joins the lines of an input chunk as the splitter hands them over, unless the
   * current-only records before one of them pass ROOM: that line and the rest of its
   * chunk then wait, and are joined between waits for the output's reader. (A small
   * hour against a big current_log has the whole file between two incoming lines:
   * written in one go into a pipe whose reader is slower, it piled up in memory.)
   */
  async feed(splitter: ByteLineSplitter, chunk: Buffer): Promise<void> {
    let failed: unknown = null;
    try {
      splitter.push(chunk, this.onLine, this.scanIncoming);
    } catch (err) {
      failed = err; // raised after the lines before it, which may hold an earlier error
    }
    for (let k = 0; k < this.waiting.length; k++) {
      const w = this.waiting[k]!;
      if (k === 0) this.inc.set(w.buf, w.start, w.end);
      else this.checkIncoming(w.buf, w.start, w.end, w.lineNo, false);
      while (!this.joinIncoming(ROOM)) await this.out.flushIfFull();
    }
    this.waiting.length = 0;
    if (failed) throw failed;
  }

  /** Writes the current-only records after the last incoming one. */
  async finish(): Promise<void> {
    while (this.cur !== null) {
      writeJoined(this.out, this.cur, null);
      this.onlyCur++;
      this.nextCurrent();
      if ((this.onlyCur & 0x3fff) === 0) await this.out.flushIfFull();
    }
  }

  private take(buf: Buffer, start: number, end: number, lineNo: number, checked: boolean): void {
    if (this.waiting.length > 0) {
      this.waiting.push({ buf, start, end, lineNo });
      return;
    }
    this.checkIncoming(buf, start, end, lineNo, checked);
    if (!this.joinIncoming(ROOM)) this.waiting.push({ buf, start, end, lineNo });
  }

  /** Makes the incoming line `inc`, checked (already, when the splitter's scan passed it). */
  private checkIncoming(buf: Buffer, start: number, end: number, lineNo: number, checked: boolean): void {
    const inc = this.inc.set(buf, start, end);
    if (checked) inc.tabs.set(this.scanned.tabs);
    const bad = (checked ? null : checkUrlRecordAt(inc)) ?? this.inOrder.check(buf, start);
    if (bad) throw new DataError('BAD_INCOMING', bad, { file: this.inputName, line: lineNo });
  }

  private nextCurrent(): void {
    this.cur = null;
    const l = this.curLine;
    if (!this.reader?.next(l, this.scanCurrent)) return;
    const bad = (this.reader.checked ? null : checkUrlRecordAt(l)) ?? this.curOrder.check(l.buf, l.start);
    if (bad) throw new DataError('BAD_CURRENT', bad, { file: this.currentName, line: this.reader.lineNo });
    this.nCur++;
    this.cur = l;
  }

  /**
   * Joins the incoming line `inc` (checked), first writing the current-only records
   * before it, at most `room` of them; false when it stopped short for the reader.
   */
  private joinIncoming(room: number): boolean {
    const inc = this.inc;
    let d = 1;
    while (this.cur !== null && (d = compareBytes(this.cur.buf, this.cur.start, inc.buf, inc.start, ID_BYTES)) < 0) {
      if (room-- === 0) return false;
      writeJoined(this.out, this.cur, null);
      this.onlyCur++;
      this.nextCurrent();
    }
    // Counted once joined: an incoming line whose join fails (on a bad current_log line
    // before it) is in none of the counts, so incoming = both + incoming_only in a failed run too.
    this.nIn++;
    if (this.cur !== null && d === 0) {
      writeJoined(this.out, this.cur, inc);
      this.both++;
      this.nextCurrent();
    } else {
      writeJoined(this.out, null, inc);
      this.onlyIn++;
    }
    return true;
  }
}

/** The most current-only records written between two waits for the output's reader. */
const ROOM = 0x3fff;
