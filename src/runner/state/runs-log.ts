// STATE/runs.jsonl, the run records: its last MiB read once per process and kept until
// this process appends to it (the lock makes the runner its only writer), a line
// appended once.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { ioError } from '../../core/errors.js';
import { redactDeep } from '../../core/secrets.js';
import { stateLayout } from './layout.js';

/** How much of the end of runs.jsonl is read: weeks of hourly lines. */
const TAIL_BYTES = 1 << 20;

/** runs.jsonl of one state directory, as this process reads and appends it. */
export class RunsLog {
  private lines: string[] | null = null;
  private records: unknown[] | null = null;

  constructor(readonly file: string) {}

  /** The lines of its last MiB, parsed, oldest first (tailRecords' rule), read on first use and kept. */
  tail(): readonly unknown[] {
    this.records ??= parseRecords(this.raw());
    return this.records;
  }

  /** Its last complete line, parsed; null when there is none or it is not JSON (a damaged last line, not the one before it). */
  last(): unknown {
    const last = this.raw().at(-1);
    if (last === undefined) return null;
    try {
      return JSON.parse(last);
    } catch {
      return null;
    }
  }

  /** Appends `record` once (appendRecordOnce); what was kept is read again at the next question. */
  append(record: { run_id: string; attempt?: number }): boolean {
    try {
      return appendRecordOnce(this.file, record);
    } finally {
      this.lines = null;
      this.records = null;
    }
  }

  private raw(): string[] {
    this.lines ??= tailLines(this.file, TAIL_BYTES);
    return this.lines;
  }
}

const logs = new Map<string, RunsLog>();

/** The runs.jsonl of state directory `state`: one RunsLog per file per process. */
export function runsLog(state: string): RunsLog {
  const file = stateLayout(state).runs;
  let log = logs.get(file);
  if (log === undefined) {
    log = new RunsLog(file);
    logs.set(file, log);
  }
  return log;
}

/**
 * The complete lines of the last `maxBytes` of a file (LF removed, empty ones kept),
 * oldest first: a line cut by the window's start and a partial last line are left out.
 * None when the file cannot be read or is not a regular file (opened without blocking:
 * opening a FIFO to read waits for a writer, for ever).
 */
function tailLines(file: string, maxBytes: number): string[] {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch {
    return [];
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return [];
    const size = st.size;
    const tail = Buffer.alloc(Math.min(size, maxBytes));
    for (let got = 0; got < tail.length; ) {
      const n = fs.readSync(fd, tail, got, tail.length - got, size - tail.length + got);
      if (n === 0) break;
      got += n;
    }
    const end = tail.lastIndexOf(10);
    // Unless the window starts at the file's start, its first line may be cut.
    const start = tail.length < size ? tail.indexOf(10) + 1 : 0;
    return start <= end ? tail.subarray(start, end).toString('utf8').split('\n') : [];
  } catch {
    return [];
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The complete lines of the last `maxBytes` of a JSON-lines file, parsed, oldest first
 * (a line cut by the window's start, a partial last line and lines that are not JSON are
 * left out); none when the file cannot be read or is not a regular file.
 */
export function tailRecords(file: string, maxBytes = TAIL_BYTES): unknown[] {
  return parseRecords(tailLines(file, maxBytes));
}

/** The JSON lines of `lines`, parsed (empty, foreign and damaged lines left out). */
function parseRecords(lines: readonly string[]): unknown[] {
  const out: unknown[] = [];
  for (const l of lines) {
    if (l === '') continue;
    try {
      out.push(JSON.parse(l));
    } catch {
      /* a foreign or damaged line */
    }
  }
  return out;
}

/**
 * Appends one JSON line to `file` unless its last line already carries the same
 * `run_id` and `attempt` (a retried commit; a failed attempt's line and the next
 * attempt's are both kept). A partial last line left by a crash is cut off first.
 * The append is fsynced; no credential is written (redactDeep).
 */
export function appendRecordOnce(file: string, record: { run_id: string; attempt?: number }): boolean {
  let fd: number;
  const created = !fs.existsSync(file);
  try {
    fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  } catch (err) {
    throw ioError(err, file, 'open');
  }
  try {
    const size = fs.fstatSync(fd).size;
    const tailLen = Math.min(size, TAIL_BYTES);
    const tail = Buffer.alloc(tailLen);
    if (tailLen > 0) fs.readSync(fd, tail, 0, tailLen, size - tailLen);
    let end = size;
    if (tailLen > 0 && tail[tailLen - 1] !== 10) {
      const lf = tail.lastIndexOf(10);
      end = lf < 0 ? size - tailLen : size - tailLen + lf + 1;
      fs.ftruncateSync(fd, end);
    }
    const body = tail.subarray(0, tailLen - (size - end)).toString('utf8');
    const lines = body.split('\n').filter((l) => l !== '');
    const lastLine = lines[lines.length - 1];
    if (lastLine !== undefined) {
      try {
        const last = JSON.parse(lastLine) as { run_id?: unknown; attempt?: unknown };
        if (last.run_id === record.run_id && last.attempt === record.attempt) return false;
      } catch {
        /* a foreign or damaged line: append after it */
      }
    }
    const data = Buffer.from(JSON.stringify(redactDeep(record)) + '\n');
    try {
      // A nearly full disk takes part of the line and says so only on the next write:
      // one writeSync would leave a torn line that the next append cuts off, record lost.
      for (let done = 0; done < data.length; ) done += fs.writeSync(fd, data, done, data.length - done, end + done);
      fs.fsyncSync(fd);
    } catch (err) {
      try {
        fs.ftruncateSync(fd, end);
      } catch {
        /* the next append cuts the torn line */
      }
      throw err;
    }
  } catch (err) {
    throw ioError(err, file, 'append to');
  } finally {
    fs.closeSync(fd);
  }
  if (created) fsyncPath(path.dirname(file));
  return true;
}
