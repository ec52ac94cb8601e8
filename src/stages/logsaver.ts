// logsaver: split routed records into one queue file per Yacobot, published atomically.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathOption, type StageDef } from '../cli/stage.js';
import { mkdirEach } from '../core/dirs.js';
import { DataError, UsageError, clipText, hasControl, ioError } from '../core/errors.js';
import { BytesIndex } from '../core/bytesindex.js';
import { LF, findTab, putBytes } from '../core/bytes.js';
import { LineRef, ROUTED_RECORD, URL_RECORD, clip, isYacobotIdAt } from '../core/records.js';
import { RecordScanner, checkUrlRecordAt } from '../core/record-checks.js';
import { fsyncPath } from '../core/dirs.js';
import { DEFAULT_MAX_LINE, type ByteLineFn } from '../core/lines.js';
import { FileWriter, SYNC_AHEAD } from '../core/writers.js';
import { liveTempFiles, ownedTempName, removeQuietly, removeStaleTemps } from '../core/temps.js';

/** Records longer than this go to their file through write(), which never grows the writer's buffer. */
const LONG_RECORD = 1 << 16;
const NEWLINE = Buffer.from([LF]);

export interface LogsaverOptions {
  queueDir: string;
  name: string;
}

/** Returns what is wrong with a queue file name, or null: one safe path component. */
export function checkQueueName(name: string): string | null {
  if (name === '') return 'is empty';
  if (name.includes('/')) return "contains '/'";
  if (name.startsWith('.')) return "starts with '.'";
  if (hasControl(name)) return 'contains a control character';
  if (Buffer.byteLength(name) > 200) return 'is longer than 200 bytes';
  return null;
}

interface Queue {
  id: string;
  dir: string;
  tmp: string;
  final: string;
  writer: FileWriter;
  records: number;
}

export const logsaver: StageDef<LogsaverOptions> = {
  name: 'logsaver',
  summary: 'Write routed records into per-Yacobot queue files DIR/<yacobot_id>/<NAME>.tsv.',
  writesStdout: false,
  // A routed line is a record of up to the streams' limit with "yacobot_id TAB" before it
  // (upload-domains passes any record it accepts; 1 MiB records failed here).
  maxLine: DEFAULT_MAX_LINE + 19,
  usage: `
Reads routed records "yacobot_id id timestamp updatetag hits domain url" and,
for each Yacobot, writes its URL records (the 6 fields after yacobot_id, in
input order) to

  DIR/<yacobot_id>/<NAME>.tsv

Each file is written to a temporary file in the same directory
(.<NAME>.tsv.tmp-<pid>-<tag>, never matching *.tsv), fsynced, and renamed into
place only after the whole input was read without error; an existing file of
that name is replaced, so a rerun with the same input is idempotent. On any
error every temporary file is removed and nothing is published (each place is
checked before the first rename; only an I/O error between renames could leave
the earlier ones published, and a rerun replaces them). A Yacobot with no
records gets no file. Directories are created as needed.

yacobot_id must be a positive decimal integer (1-999999999999999999, no sign,
no leading zero); NAME must be one safe file name (no '/', not starting with
'.').

Buffers: a write buffer per Yacobot (one open file per Yacobot).`,
  options(cmd) {
    cmd
      .requiredOption('--queue-dir <dir>', 'root of the queue directories (required)')
      .requiredOption('--name <name>', 'queue file name without .tsv, e.g. the run name 2011072806 (required)');
  },
  normalize(raw) {
    const name = String(raw.name);
    const bad = checkQueueName(name);
    if (bad) throw new UsageError(`--name '${clipText(name)}' ${bad}`);
    return { queueDir: pathOption('--queue-dir', raw.queueDir, 'a directory name'), name };
  },
  async run(ctx, o) {
    const files = new QueueFiles(o.queueDir, o.name);
    ctx.onExit(() => files.abandon());
    const file = ctx.inputName;
    let recordsIn = 0;
    ctx.reportCounts(() => {
      const perYacobot: Record<string, number> = {};
      for (const q of files.queues) perYacobot[q.id] = q.records;
      return { queue_name: o.name, records_in: recordsIn, files: files.published ? files.queues.length : 0, per_yacobot: perYacobot };
    });
    const l = new LineRef(URL_RECORD.length - 1);
    const scanned = new Int32Array(1);
    const onLine: ByteLineFn = (buf, start, end, lineNo, checked) => {
      const tab = checked ? scanned[0]! : checkRouted(l, buf, start, end, file, lineNo);
      const q = files.queueOf(buf, start, tab);
      append(q.writer, buf, tab + 1, end);
      // Counted once written (after open() and the flush reserve() may do, either of which
      // can fail): a failed summary's records_in is the sum of per_yacobot.
      recordsIn++;
      q.records++;
    };
    await ctx.eachLine(onLine, undefined, new RecordScanner('routed', l.tabs, scanned).scan);
    files.publish();
  },
};

/**
 * Checks the routed line `buf[start, end)` (its URL record through `l`); returns where
 * its yacobot_id ends (at its TAB), or throws a DataError naming `file` and `lineNo`.
 */
function checkRouted(l: LineRef, buf: Buffer, start: number, end: number, file: string, lineNo: number): number {
  const tab = findTab(buf, start, end);
  const idEnd = tab < 0 ? end : tab;
  if (!isYacobotIdAt(buf, start, idEnd)) {
    const id = Buffer.from(buf.subarray(start, idEnd)).toString('utf8');
    throw new DataError('BAD_RECORD', `bad yacobot_id '${clip(id)}' (want a positive integer)`, { file, line: lineNo });
  }
  const bad = checkUrlRecordAt(l.set(buf, tab < 0 ? start : tab + 1, end));
  if (bad) {
    // Counted over the whole line, yacobot_id included, as the operator sees it.
    const fields = Buffer.from(buf.subarray(start, end)).toString('latin1').split('\t').length;
    const why = fields === ROUTED_RECORD.length ? bad : `expected ${ROUTED_RECORD.length} fields (${ROUTED_RECORD.join(' ')}), got ${fields}`;
    throw new DataError('BAD_RECORD', why, { file, line: lineNo });
  }
  return tab;
}

/** Appends the record `buf[from, end)` and an LF to `w`. */
function append(w: FileWriter, buf: Buffer, from: number, end: number): void {
  if (end - from + 1 > LONG_RECORD) {
    // Written from the input as it is: reserve() would grow this Yacobot's buffer to the
    // record's size for the rest of the run (600 ids with a 1 MiB record each: 691 MB).
    w.write(buf.subarray(from, end));
    w.write(NEWLINE);
  } else {
    w.reserve(end - from + 1);
    const p = putBytes(w.buf, w.pos, buf, from, end);
    w.buf[p] = LF;
    w.pos = p + 1;
  }
}

/**
 * The queue files of one run, DIR/<yacobot_id>/<NAME>.tsv: each written to a temporary
 * file as its Yacobot's first record comes, then all published together, or none.
 */
class QueueFiles {
  /** The queues, numbered as their yacobot_ids are in `ids`. */
  readonly queues: Queue[] = [];
  private readonly ids = new BytesIndex();
  /** Directories this run created: removed again (when empty) if nothing is published. */
  private readonly createdDirs: string[] = [];
  published = false;

  constructor(
    private readonly queueDir: string,
    private readonly name: string,
  ) {}

  /** The queue of the yacobot_id `buf[start, end)`, opened on its first record. */
  queueOf(buf: Buffer, start: number, end: number): Queue {
    const k = this.ids.add(buf, start, end);
    return this.ids.added ? (this.queues[k] = this.open(this.ids.key(k))) : this.queues[k]!;
  }

  /** Removes what a run that published nothing made: its temporary files, then the directories it created. */
  abandon(): void {
    if (this.published) return;
    for (const q of this.queues) {
      q.writer.abandon();
      removeQuietly(q.tmp);
      liveTempFiles.delete(q.tmp);
    }
    for (const d of this.createdDirs.reverse()) {
      try {
        fs.rmdirSync(d);
      } catch {
        /* not empty or already gone: leave it */
      }
    }
  }

  /** Makes every queue file durable, checks every place, then renames them all into place. */
  publish(): void {
    // Everything durable first, then the renames: a failure before this point publishes nothing.
    const sorted = [...this.queues].sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : 1));
    for (const q of sorted) q.writer.close(true);
    // A rename can only replace a file: anything else in a file's place fails the run
    // here, before the first rename, not between two of them.
    for (const q of sorted) refuseNonFile(q.final);
    for (const q of sorted) {
      try {
        fs.renameSync(q.tmp, q.final);
      } catch (err) {
        throw ioError(err, q.final, 'publish the queue file');
      }
      liveTempFiles.delete(q.tmp);
    }
    this.published = true;
    for (const q of sorted) fsyncPath(q.dir);
    // A queue directory made in this run is an entry in its parent, to be made durable too.
    for (const parent of new Set(this.createdDirs.map((d) => path.dirname(d)))) fsyncPath(parent);
  }

  private open(id: string): Queue {
    const dir = path.join(this.queueDir, id);
    try {
      this.createdDirs.push(...mkdirEach(dir));
    } catch (err) {
      throw ioError(err, dir, 'create the queue directory');
    }
    // This run's temporary file, after those of the same name that a SIGKILLed run left.
    const prefix = `.${this.name}.tsv.tmp-`;
    removeStaleTemps(dir, prefix);
    const tmp = path.join(dir, ownedTempName(prefix));
    liveTempFiles.add(tmp);
    return { id, dir, tmp, final: path.join(dir, `${this.name}.tsv`), writer: new FileWriter(tmp, 'w', 1 << 18, SYNC_AHEAD), records: 0 };
  }
}

/** Throws unless `final` is a regular file or nothing (a queue file can replace only a file). */
function refuseNonFile(final: string): void {
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(final, { throwIfNoEntry: false });
  } catch (err) {
    throw ioError(err, final, 'publish the queue file');
  }
  if (st && !st.isFile()) throw new DataError('IO', 'cannot publish the queue file: something other than a file is in its place', { file: final });
}
