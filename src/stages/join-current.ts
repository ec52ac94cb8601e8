// join-current: full outer merge-join of incoming_log (stdin) with current_log.
import * as os from 'node:os';
import { pathOption, refuseOwnStreams, type StageDef } from '../cli/stage.js';
import { DataError } from '../core/errors.js';
import { compareBytes } from '../core/bytes.js';
import { ID_BYTES, IdOrder, LineRef, URL_RECORD, checkUrlRecordAt, writeJoined } from '../core/records.js';
import { ByteLineSplitter, FileLineReader, type ByteLineFn } from '../core/lines.js';
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
    const out = ctx.out;
    // A FIFO is read through a copy: a blocking read of it would hold off SIGTERM. Copies
    // that SIGKILLed runs left (as big as a current_log) are removed first.
    removeStaleTemps(os.tmpdir(), COPY_PREFIX);
    const reader = FileLineReader.openIfExists(await regularFileFor(o.current, ctx.onExit), o.current);
    ctx.onExit(() => reader?.close());
    const curOrder = new IdOrder();
    const inOrder = new IdOrder();
    let nIn = 0;
    let nCur = 0;
    let both = 0;
    let onlyIn = 0;
    let onlyCur = 0;
    ctx.reportCounts(() => ({
      incoming: nIn,
      current: nCur,
      current_missing: reader === null,
      both,
      incoming_only: onlyIn,
      current_only: onlyCur,
      records_out: both + onlyIn + onlyCur,
    }));

    // Records stay bytes; fields are ranges between the TABs a check found.
    const inc = new LineRef(URL_RECORD.length - 1);
    const curLine = new LineRef(URL_RECORD.length - 1);
    let cur: LineRef | null = null;
    const nextCurrent = (): void => {
      cur = null;
      if (!reader || !reader.next(curLine)) return;
      const bad = checkUrlRecordAt(curLine) ?? curOrder.check(curLine.buf, curLine.start);
      if (bad) throw new DataError('BAD_CURRENT', bad, { file: o.current, line: reader.lineNo });
      nCur++;
      cur = curLine;
    };

    nextCurrent();
    /**
     * Joins the incoming line `inc` (checked), first writing the current-only records
     * before it, at most `room` of them; false when it stopped short for the reader.
     */
    const joinIncoming = (room: number): boolean => {
      let d = 1;
      while (cur !== null && (d = compareBytes(cur.buf, cur.start, inc.buf, inc.start, ID_BYTES)) < 0) {
        if (room-- === 0) return false;
        writeJoined(out, cur, null);
        onlyCur++;
        nextCurrent();
      }
      // Counted once joined: an incoming line whose join fails (on a bad current_log line
      // before it) is in none of the counts, so incoming = both + incoming_only in a failed run too.
      nIn++;
      if (cur !== null && d === 0) {
        writeJoined(out, cur, inc);
        both++;
        nextCurrent();
      } else {
        writeJoined(out, null, inc);
        onlyIn++;
      }
      return true;
    };

    // Incoming lines are joined as the splitter hands them over, unless the
    // current-only records before one of them pass ROOM: that line and the rest of its
    // chunk then wait, and are joined between waits for the reader. (A small hour
    // against a big current_log has the whole file between two incoming lines: written
    // in one go into a pipe whose reader is slower, it piled up in memory.)
    const ROOM = 0x3fff;
    const splitter = new ByteLineSplitter(ctx.inputName);
    const checkIncoming = (buf: Buffer, start: number, end: number, lineNo: number) => {
      inc.set(buf, start, end);
      const bad = checkUrlRecordAt(inc) ?? inOrder.check(buf, start);
      if (bad) throw new DataError('BAD_INCOMING', bad, { file: ctx.inputName, line: lineNo });
    };
    // The lines waiting, from the one that stopped short (checked, and partly joined).
    const waiting: { buf: Buffer; start: number; end: number; lineNo: number }[] = [];
    const onLine: ByteLineFn = (buf, start, end, lineNo) => {
      if (waiting.length > 0) {
        waiting.push({ buf, start, end, lineNo });
        return;
      }
      checkIncoming(buf, start, end, lineNo);
      if (!joinIncoming(ROOM)) waiting.push({ buf, start, end, lineNo });
    };
    await ctx.eachChunk(async (chunk) => {
      let failed: unknown = null;
      try {
        splitter.push(chunk, onLine);
      } catch (err) {
        failed = err; // raised after the lines before it, which may hold an earlier error
      }
      for (let k = 0; k < waiting.length; k++) {
        const w = waiting[k]!;
        if (k === 0) inc.set(w.buf, w.start, w.end);
        else checkIncoming(w.buf, w.start, w.end, w.lineNo);
        while (!joinIncoming(ROOM)) await out.flushIfFull();
      }
      waiting.length = 0;
      if (failed) throw failed;
    });
    splitter.end();
    while (cur !== null) {
      writeJoined(out, cur, null);
      onlyCur++;
      nextCurrent();
      if ((onlyCur & 0x3fff) === 0) await out.flushIfFull();
    }
  },
};
