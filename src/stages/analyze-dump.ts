// analyze-dump: reflog -> URL records sorted by (id, timestamp).
import * as os from 'node:os';
import type { Command } from 'commander';
import { pathOption, refuseOwnStreams, type Count, type StageContext, type StageDef } from '../cli/stage.js';
import { LF, TAB, putBytes, putDecimal, type ByteSink } from '../core/bytes.js';
import { grown } from '../core/arrays.js';
import { DataError, UsageError } from '../core/errors.js';
import { UNTERMINATED_WARNING } from '../core/records.js';
import { countOption, parseCount, ratioOption } from '../core/numbers.js';
import { parseBudget } from '../core/size.js';
import { RecordSorter, SPILL_PREFIX, packedBuffers, type PackedRecords } from '../core/sorter.js';
import { GroupedBatch } from '../core/packed.js';
import { LineBatcher } from '../core/lines.js';
import { ReflogAnalyzer, Verdict, lineLimit } from '../core/reflog.js';
import { FileWriter } from '../core/writers.js';
import { FifoWriter, heldFifoWriter } from '../core/fifos.js';
import { removeStaleTemps } from '../core/temps.js';
import { WorkerPool } from '../core/workers.js';
import {
  DEFAULT_MAX_URL_BYTES,
  UrlResolver,
  parseParamGlobs,
  loadUrlHash,
  type DomainMode,
  type UrlHash,
  type UrlOptions,
} from '../core/url.js';

export interface AnalyzeDumpOptions extends UrlOptions {
  rejects: string | null;
  maxRejectRatio: number;
  memoryBytes: number;
  tmpDir: string;
  threads: number;
}

/** Bytes of input per batch handed to a worker thread. */
const BATCH_BYTES = 1 << 20;

/** The largest --max-url-bytes: a line may be this plus 64 KiB, and a worker's batch holds whole lines. */
const MAX_URL_LIMIT = 1 << 20;

/** Under this --memory, analyze-dump trades speed for memory: no worker threads, no URL memory. */
const SMALL_BUDGET = 128 << 20;

/** The most --threads there can be. */
const MAX_THREADS = 64;

/**
 * What one worker thread costs beyond --memory: about 40 MiB of its own (measured:
 * 64M peaks at 175 MiB without, 265 with two). MASTER_SERVER_WORKER_BYTES (digits)
 * replaces it, for tests that run workers under a budget small enough to spill.
 */
function workerBytes(): number {
  return parseCount(process.env.MASTER_SERVER_WORKER_BYTES ?? '') ?? 40 << 20;
}

/**
 * How many worker threads fit a budget: together they may cost at most as much
 * as --memory itself, so peak RSS stays within about twice --memory plus Node's own.
 */
function threadsFitting(memoryBytes: number): number {
  const each = workerBytes();
  return each === 0 ? MAX_THREADS : Math.min(MAX_THREADS, Math.floor(memoryBytes / each));
}

/**
 * One worker per core beyond the first, at most 3 (the main thread parses too,
 * whenever every worker has two batches waiting), and as many as fit the budget;
 * none on one core, or under a memory budget below 128M (where a worker's 40 MiB
 * weigh most).
 */
function defaultThreads(memoryBytes: number): number {
  const cores = os.availableParallelism();
  return cores > 1 && memoryBytes >= SMALL_BUDGET ? Math.min(4, cores, threadsFitting(memoryBytes) + 1) - 1 : 0;
}

/** Batches waiting for each worker before the main thread parses one itself. */
const WORKER_QUEUE = 2;

/**
 * Batches the main thread may parse ahead of the workers' answers before it waits
 * for them: with none, the main thread waits after each batch of its own and the
 * worker is the long pole (docs/performance.md, "Where the time goes").
 */
const MAIN_AHEAD = 2;

/**
 * How much of a sorted run the main thread spills while a worker parses one batch
 * (about 50 ms): 24 MiB, as a run of 140 MiB (the default --memory's, about 1M records)
 * took 160-400 ms to spill. Meanwhile a worker with only its usual WORKER_QUEUE batches
 * went idle: at 10M lines, 2.2 s of spills and the worker idle 2.1 s of the 10.8 s of
 * input. So before a spill each worker is given batches enough to last it, when that is
 * at least two more than usual (runs of 96 MiB and up: --memory 192M and up; below,
 * the shorter runs it would cut cost as much as they save).
 */
function spillBytesPerBatch(): number {
  // MASTER_SERVER_SPILL_BYTES (digits) replaces it, for tests whose budgets are small
  // enough to spill (1 byte: every spill is prepared so).
  return parseCount(process.env.MASTER_SERVER_SPILL_BYTES ?? '') || 24 << 20;
}

/** At most this many batches (about 2.5 MiB each with their records) are queued for a worker before a spill. */
const MAX_SPILL_QUEUE = 8;

/** What one thread's URL memory takes at most: keys, answers and their tables. */
const URL_MEMORY_BYTES = 11 << 20;

/**
 * The URL memory of one thread: 65,536 URLs and 4 MiB each for keys and answers;
 * none under --memory 128M, as with worker threads (measured at 10M lines and
 * --memory 64M: peak RSS 191 MiB without it, 202-207 MiB with it, against a
 * 200 MiB limit).
 */
function urlResolverFor(o: AnalyzeDumpOptions, hash: UrlHash): UrlResolver {
  return hasUrlMemory(o) ? new UrlResolver(o, hash) : new UrlResolver(o, hash, 0, 0);
}

/**
 * URL memory at 128M and up, while all threads' together (the workers' and the
 * main thread's, which parses too) take at most a quarter of --memory.
 */
function hasUrlMemory(o: AnalyzeDumpOptions): boolean {
  return o.memoryBytes >= SMALL_BUDGET && parsingThreads(o) * URL_MEMORY_BYTES <= o.memoryBytes / 4;
}

/** The threads that may parse: the workers and the main thread. */
function parsingThreads(o: AnalyzeDumpOptions): number {
  return o.threads + 1;
}

/**
 * Byte strings back to back, for handing between threads: entry k is
 * bytes[ends[k - 1], ends[k]), with ends[-1] = 0.
 */
export interface PackedBytes {
  bytes: Uint8Array;
  ends: Uint32Array;
}

/** Builds PackedBytes, in buffers lent back from earlier ones where they fit. */
class ByteList {
  private bytes: Buffer = Buffer.alloc(0);
  private ends: Uint32Array = new Uint32Array(0);
  private pos = 0;
  count = 0;

  /** Takes the buffers of PackedBytes handed back, to fill instead of new ones. */
  lend(p: PackedBytes): void {
    if (p.ends.buffer.byteLength > this.ends.byteLength) this.ends = new Uint32Array(p.ends.buffer);
    if (p.bytes.buffer.byteLength > this.bytes.length) this.bytes = Buffer.from(p.bytes.buffer);
  }

  /** Appends `src[s, e)` as the next entry. */
  push(src: Uint8Array, s: number, e: number): void {
    this.room(e - s);
    this.end(putBytes(this.bytes, this.pos, src, s, e));
  }

  /** Appends `text` (as UTF-8) as the next entry. */
  pushText(text: string): void {
    this.room(3 * text.length);
    this.end(this.pos + this.bytes.write(text, this.pos));
  }

  /** The entries (views of whole buffers, ready to transfer); the list starts over. */
  take(): PackedBytes {
    const p = { bytes: this.bytes.subarray(0, this.pos), ends: this.ends.subarray(0, this.count) };
    this.bytes = Buffer.alloc(0);
    this.ends = new Uint32Array(0);
    this.pos = 0;
    this.count = 0;
    return p;
  }

  private room(need: number): void {
    if (this.count === this.ends.length) this.ends = grown(this.ends, Math.max(64, 2 * this.count));
    if (this.pos + need > this.bytes.length) {
      const bigger = Buffer.allocUnsafeSlow(Math.max(4096, 2 * this.bytes.length, this.pos + need));
      this.bytes.copy(bigger, 0, 0, this.pos);
      this.bytes = bigger;
    }
  }

  private end(p: number): void {
    this.ends[this.count++] = this.pos = p;
  }
}

/** The most distinct "reason[: detail]" a batch's packer remembers (to store each once); it then starts over. */
const DISTINCT_WHYS = 1024;

/**
 * The rejected lines of one batch, packed for handing between threads: counts by
 * reason and, when a --rejects file is kept, for each one (k, in line order) its
 * line number within the batch (from 1), `lines[k]`, its original bytes, entry k
 * of `text`, and its "reason[: detail]", entry `whys[k]` of `reasons`. A batch's
 * distinct reasons are stored about once: a flood of tiny rejected lines with one
 * reason takes 13 bytes a line, not the 48 of a copy of the reason each (which
 * would make a batch of 2-byte lines 24 MiB). A few buffers, not an object per
 * line: a batch of 262,144 short rejected lines sent as objects took analyze-dump
 * past 1 GiB.
 */
export interface BatchRejects {
  count: number;
  byReason: Record<string, number>;
  lines: Uint32Array;
  whys: Uint32Array;
  text: PackedBytes;
  reasons: PackedBytes;
}

/** Gathers a batch's rejects as BatchRejects; with `keep` false, only their counts. */
class RejectPacker {
  private count = 0;
  private byReason: Record<string, number> = {};
  private lines: Uint32Array = new Uint32Array(0);
  private whys: Uint32Array = new Uint32Array(0);
  private readonly text = new ByteList();
  private readonly reasons = new ByteList();
  /** The entries of `reasons` by their text, while there are few enough. */
  private known = new Map<string, number>();

  constructor(private readonly keep: boolean) {}

  /** Takes buffers handed back from an earlier batch, to fill instead of new ones (recycling, not garbage). */
  lend(r: BatchRejects | undefined): void {
    if (!r || !this.keep) return;
    if (r.lines.buffer.byteLength > this.lines.byteLength) {
      this.lines = new Uint32Array(r.lines.buffer);
      this.whys = new Uint32Array(r.whys.buffer);
    }
    this.text.lend(r.text);
    this.reasons.lend(r.reasons);
  }

  add(line: number, reason: string, detail: string, buf: Buffer, s: number, e: number): void {
    this.byReason[reason] = (this.byReason[reason] ?? 0) + 1;
    const k = this.count++;
    if (!this.keep) return;
    if (k === this.lines.length) {
      this.lines = grown(this.lines, Math.max(64, 2 * k));
      this.whys = grown(this.whys, Math.max(64, 2 * k));
    }
    const why = detail ? `${reason}: ${detail}` : reason;
    let w = this.known.get(why);
    if (w === undefined) {
      if (this.known.size === DISTINCT_WHYS) this.known.clear();
      w = this.reasons.count;
      this.reasons.pushText(why);
      this.known.set(why, w);
    }
    this.lines[k] = line;
    this.whys[k] = w;
    this.text.push(buf, s, e);
  }

  /** The batch's rejects (views of whole buffers, ready to transfer); the packer starts over. */
  take(): BatchRejects {
    const r: BatchRejects = {
      count: this.count,
      byReason: this.byReason,
      lines: this.lines.subarray(0, this.count), // empty when !keep: nothing was stored
      whys: this.whys.subarray(0, this.count),
      text: this.text.take(),
      reasons: this.reasons.take(),
    };
    this.count = 0;
    this.byReason = {};
    this.lines = new Uint32Array(0);
    this.whys = new Uint32Array(0);
    this.known.clear();
    return r;
  }
}

/**
 * Writes a batch's kept rejects to `sink` as rejects-file lines
 * "line-number TAB reason[: detail] TAB original bytes" LF, numbering from `before` + 1.
 */
function putRejects(sink: ByteSink, x: BatchRejects, before: number): void {
  const why = x.reasons;
  const text = x.text;
  for (let k = 0; k < x.lines.length; k++) {
    const w = x.whys[k]!;
    const ws = w === 0 ? 0 : why.ends[w - 1]!;
    const we = why.ends[w]!;
    const ts = k === 0 ? 0 : text.ends[k - 1]!;
    const te = text.ends[k]!;
    sink.reserve(24 + (we - ws) + (te - ts));
    const o = sink.buf;
    let p = putDecimal(o, sink.pos, before + x.lines[k]!);
    o[p++] = TAB;
    p = putBytes(o, p, why.bytes, ws, we);
    o[p++] = TAB;
    p = putBytes(o, p, text.bytes, ts, te);
    o[p++] = LF;
    sink.pos = p;
  }
}

/**
 * A batch's output, handed back to be filled again by a later batch (recycling, not
 * garbage): its rejects, and records the sorter has let go of (spilled), if any.
 */
export interface Lent {
  packed: PackedRecords | undefined;
  rejects: BatchRejects;
}

/** The buffers of lent output, to transfer (a view's whole buffer: one left out would be copied whole). */
export function lentBuffers(l: Lent): ArrayBuffer[] {
  const r = l.rejects;
  const rejectParts = [r.lines, r.whys, r.text.bytes, r.text.ends, r.reasons.bytes, r.reasons.ends].filter((a) => a.buffer.byteLength > 0).map((a) => a.buffer as ArrayBuffer);
  return [...(l.packed ? packedBuffers(l.packed) : []), ...rejectParts];
}

/** A batch for a worker thread, with output buffers lent for it. */
export interface AnalyzeJob {
  batch: Uint8Array;
  reuse: Lent | undefined;
}

/** A worker's answer: the batch's counts and records, and the batch's buffer handed back. */
export interface AnalyzeDone {
  result: BatchResult;
  packed: PackedRecords;
  batch: Uint8Array;
}

/** What a batch held besides its records. */
export interface BatchResult {
  lines: number;
  headers: number;
  empty: number;
  rejects: BatchRejects;
}

/**
 * Runs the analyzer over every line of `buf` (LF-terminated lines; a last line may
 * lack its LF). A line longer than `maxLine` is rejected with its first `maxLine`
 * bytes, unless it has no TAB: then it is a header, as a short one would be. Records go to the analyzer's sink, in line order.
 */
function analyzeBatch(analyzer: ReflogAnalyzer, buf: Buffer, maxLine: number, rejects: RejectPacker): BatchResult {
  const r = { lines: 0, headers: 0, empty: 0 };
  const n = buf.length;
  for (let s = 0; s < n; s = analyzer.lineEnd + 1) {
    r.lines++;
    // One pass over the line finds its end too (LineBatcher keeps a TAB where it cut one
    // off, so a long line with no TAB anywhere is still a header).
    const v = analyzer.lineAt(buf, s, n, maxLine);
    if (v === Verdict.Header) r.headers++;
    else if (v === Verdict.Empty) r.empty++;
    else if (v === Verdict.Reject) rejects.add(r.lines, analyzer.reason, analyzer.detail, buf, s, analyzer.textEnd);
  }
  return { ...r, rejects: rejects.take() };
}

/**
 * The core as a parsing thread runs it, a worker or the main thread: one analyzer
 * with its URL memory (which spans batches), packing each batch's records.
 */
export class BatchAnalyzer {
  // Each record goes straight to the buffer of its id's group (see GroupedBatch).
  private readonly records = new GroupedBatch();
  private readonly analyzer: ReflogAnalyzer;
  private readonly rejects: RejectPacker;

  constructor(
    o: AnalyzeDumpOptions,
    hash: UrlHash,
    private readonly maxLine: number,
  ) {
    this.analyzer = new ReflogAnalyzer(urlResolverFor(o, hash), this.records);
    this.rejects = new RejectPacker(o.rejects !== null);
  }

  /** Analyzes one batch; its records and rejects come back packed, in the lent buffers where they fit. */
  run(batch: Buffer, reuse?: Lent): { result: BatchResult; packed: PackedRecords } {
    this.rejects.lend(reuse?.rejects);
    const result = analyzeBatch(this.analyzer, batch, this.maxLine, this.rejects);
    return { result, packed: this.records.take(reuse?.packed) };
  }
}

export const analyzeDump: StageDef<AnalyzeDumpOptions> = {
  name: 'analyze-dump',
  summary: 'Turn a reflog into URL records sorted by (id, timestamp).',
  usage: `
Reads reflog lines "batch_id priority timestamp page_id url hits [updatetag]"
and writes URL records "id timestamp updatetag hits domain url", sorted by
(id, timestamp) bytewise, ties in input order.

  url        WHATWG canonical form, fragment removed (query optionally
             rewritten)
  id         XXH64 (seed 0) of the canonical URL, 16 lower-case hex digits
  domain     registrable domain (Public Suffix List, private suffixes honoured);
             the host itself for IPs, single labels and bare public suffixes
  hits       canonical decimal (leading zeros removed)

Lines without a TAB (the reflog's leading "unknown field") and empty lines are
skipped and counted; a trailing CR is stripped. Every other bad line is rejected
with a reason. Summary: lines_in = records_out + rejected + skipped. An input
that does not end in LF is processed, with a warning and last_line_unterminated.

Buffers: every record, up to --memory (records and their sort keys; beyond it,
sorted runs spill to --tmp), before writing; output starts at the end of input.
Parsing runs on --threads worker threads and the main thread, in 1 MiB batches
applied in input order, so the output does not depend on the number of threads.
If more than --max-reject-ratio of the records are rejected, the run fails with
no output.`,
  options(cmd: Command) {
    cmd
      .option('--rejects <file>', 'write each rejected line as "line TAB reason TAB original bytes" (of a line too long, its first --max-url-bytes + 64 KiB)')
      .option('--max-reject-ratio <r>', 'fail (no output) when rejected/(records+rejected) exceeds r', '0.01')
      .option('--max-url-bytes <n>', 'longest accepted URL in bytes', String(DEFAULT_MAX_URL_BYTES))
      .option('--drop-params <globs>', "drop query parameters whose names match, e.g. 'utm_*,callback,_'")
      .option('--sort-query', 'sort query parameters by name (stable)', false)
      .option('--domain-mode <mode>', 'registrable (public suffix + 1) or host', 'registrable')
      .option('--memory <size>', 'memory budget for sorting, e.g. 64M, 1G', '256M')
      .option('--tmp <dir>', 'directory for sort spill files', os.tmpdir())
      .option('--threads <n>', 'worker threads for parsing besides the main thread, 0 for none; each takes about 40M beyond --memory, and together at most --memory (default: one per core beyond the first, at most 3 and as many as fit; none on one core or under --memory 128M)');
  },
  normalize(raw) {
    const ratio = ratioOption('--max-reject-ratio', raw.maxRejectRatio);
    const maxUrl = countOption('--max-url-bytes', raw.maxUrlBytes, 16, MAX_URL_LIMIT);
    const mode = String(raw.domainMode);
    if (mode !== 'registrable' && mode !== 'host') throw new UsageError(`--domain-mode is 'registrable' or 'host', got '${mode}'`);
    const memory = parseBudget(String(raw.memory));
    if (typeof memory !== 'number') throw new UsageError(`--memory ${memory.error}`);
    const threads = raw.threads === undefined ? defaultThreads(memory) : countOption('--threads', raw.threads, 0, MAX_THREADS);
    const fit = threadsFitting(memory);
    if (threads > fit) {
      throw new UsageError(
        `--threads ${raw.threads} does not fit --memory ${raw.memory}: each worker thread takes about ${Math.round(workerBytes() / 2 ** 20)}M beyond it, ` +
          `and together they may take at most as much; at most ${fit} fit${fit === 1 ? 's' : ''} (0 parses on the main thread)`,
      );
    }
    return {
      threads,
      rejects: raw.rejects === undefined ? null : pathOption('--rejects', raw.rejects),
      maxRejectRatio: ratio,
      maxUrlBytes: maxUrl,
      dropParams: raw.dropParams ? parseParamGlobs(String(raw.dropParams)) : null,
      sortQuery: Boolean(raw.sortQuery),
      domainMode: mode as DomainMode,
      memoryBytes: memory,
      tmpDir: pathOption('--tmp', raw.tmp, 'a directory name'),
    };
  },
  async run(ctx, o) {
    if (o.rejects) refuseOwnStreams('--rejects', o.rejects, ctx.inputPath);
    // Spill directories of runs that were SIGKILLed (their own cleanup never ran) go before this one needs the space.
    removeStaleTemps(o.tmpDir, SPILL_PREFIX);
    const parse = new ReflogParse(o);
    ctx.onExit(() => parse.rejects?.abandon());
    ctx.onExit(() => parse.sorter.dispose());
    ctx.onExit(() => parse.close());
    ctx.reportCounts(() => parse.counts.report(parse.sorter));
    if (o.rejects) parse.rejects = await openRejects(ctx, o.rejects);
    // Read straight into the batches' buffers (LineBatcher.room), handed on without a copy.
    await ctx.eachBlock(
      () => parse.batcher.room(),
      async (n) => {
        const b = parse.batcher.filled(n);
        if (b) await parse.submit(b, false);
      },
    );
    const unterminated = await parse.end();
    ctx.log.debug(parse.where(), 'where the batches were parsed');
    await writeOutput(ctx, o, parse, unterminated);
  },
};

/**
 * The rejects file: a FIFO is waited for and written without blocking (`--rejects fifo`
 * with its reader late, or stalled): a signal must still stop the stage.
 */
async function openRejects(ctx: StageContext, file: string): Promise<FileWriter | FifoWriter> {
  const held = await heldFifoWriter(file, () => ctx.log.info({ rejects: file }, 'waiting for a reader of the --rejects FIFO'));
  return held === null ? new FileWriter(file) : new FifoWriter(file, held);
}

/**
 * After the whole input: the warning for a last line without LF, the rejects file
 * closed, the reject ratio checked (no output past it), then the sorted records out.
 */
async function writeOutput(ctx: StageContext, o: AnalyzeDumpOptions, parse: ReflogParse, unterminated: boolean): Promise<void> {
  const { counts, sorter } = parse;
  const records = sorter.count;
  counts.sortRuns = sorter.spilledRuns;
  if (unterminated) {
    // Processed like any line (some tools end a file without LF), but it is also what a
    // reflog cut off mid-write looks like, and a cut inside hits or updatetag still parses.
    counts.lastLineUnterminated = true;
    ctx.log.warn({ line: counts.linesIn }, UNTERMINATED_WARNING);
  }
  await parse.rejects?.close();
  const rejected = counts.rejected;
  const total = records + rejected;
  if (total > 0 && rejected / total > o.maxRejectRatio) {
    counts.outputDiscarded = true;
    throw new DataError(
      'REJECT_RATIO',
      `rejected ${rejected} of ${total} records (${((100 * rejected) / total).toFixed(2)}%), more than --max-reject-ratio ${o.maxRejectRatio}; no records written`,
      { file: ctx.inputName },
    );
  }
  const out = ctx.out;
  await sorter.drainTo(out, () => out.flushIfFull());
}

/** The counts of a run, for its summary line. */
class AnalyzeCounts {
  readonly byReason: Record<string, number> = {};
  linesIn = 0;
  /** Records of the batches applied whole (sorter.count may hold part of a failed one). */
  recordsOut = 0;
  rejected = 0;
  headers = 0;
  empty = 0;
  lastLineUnterminated = false;
  outputDiscarded = false;
  /** Spilled runs as of the end of input (merging the runs adds files of its own). */
  sortRuns: number | null = null;

  report(sorter: RecordSorter): Record<string, Count> {
    return {
      lines_in: this.linesIn,
      records_out: this.recordsOut,
      rejected: this.rejected,
      skipped: this.headers + this.empty,
      skipped_header: this.headers,
      skipped_empty: this.empty,
      rejected_by_reason: this.byReason,
      sort_runs: this.sortRuns ?? sorter.spilledRuns,
      ...(this.lastLineUnterminated ? { last_line_unterminated: true } : {}),
      ...(this.outputDiscarded ? { output_discarded: true } : {}),
    };
  }
}

/**
 * The input's batches parsed on the worker threads and this one, and applied strictly
 * in input order, wherever they were parsed: record order (ties in the sort), line
 * numbers and the rejects file follow it.
 */
class ReflogParse {
  readonly counts = new AnalyzeCounts();
  readonly sorter: RecordSorter;
  rejects: FileWriter | FifoWriter | null = null;
  /** Workers start with the first full batch; a small input is done before one could start. */
  readonly batcher: LineBatcher;
  private readonly maxLine: number;
  /** Batches parsed on this thread (no workers, an input smaller than one batch, or every worker two batches behind); made on first use. */
  private inline: BatchAnalyzer | null = null;
  /** Output buffers of applied batches, to fill again (recycling, not garbage). */
  private readonly lend: Lent[] = [];
  private pool: WorkerPool<AnalyzeJob, AnalyzeDone> | null = null;
  /**
   * Batches parsed, in input order, waiting to be applied: one at a time, each once a
   * --rejects FIFO's reader has taken the rejects before it. Applied as they came, the
   * batches in flight when the reader stalled all went into the socket's queue, as
   * rejects-file lines (a batch of 2-byte rejected lines, 24 MiB): 422 MiB at --memory
   * 128M --threads 3. Held here, each keeps its packed rejects (6.5 MiB).
   */
  private readonly parsed: AnalyzeDone[] = [];
  /** Batches each worker is given before a spill, and how many were queued since the sorter came near the end of its run. */
  private readonly spillQueue: number;
  private readonly spillAhead: boolean;
  private queuedAhead = 0;
  private spilledAhead = 0;
  private localBatches = 0;
  private workerBatches = 0;

  constructor(private readonly o: AnalyzeDumpOptions) {
    // The URL memory of each parsing thread comes out of the budget, not on top of it.
    const urlMemory = hasUrlMemory(o) ? parsingThreads(o) * URL_MEMORY_BYTES : 0;
    this.sorter = new RecordSorter({ memoryBytes: o.memoryBytes - urlMemory, tmpDir: o.tmpDir });
    this.maxLine = lineLimit(o.maxUrlBytes);
    this.batcher = new LineBatcher(BATCH_BYTES, this.maxLine);
    this.spillQueue = Math.min(MAX_SPILL_QUEUE, Math.ceil(this.sorter.runBytes / spillBytesPerBatch()));
    this.spillAhead = this.spillQueue >= WORKER_QUEUE + 2;
  }

  /** Parses a batch (the last one: `final`) here or on a worker, and applies what is ready to apply. */
  async submit(batch: Buffer, final: boolean): Promise<void> {
    const o = this.o;
    if (o.threads === 0 || (this.pool === null && final)) {
      const { result, packed } = await this.parseHere(batch, this.lend.pop());
      this.apply(result, packed);
      this.lend.push({ packed: this.sorter.takeSpare(), rejects: result.rejects });
      await this.rejectsTaken();
      return;
    }
    this.pool ??= new WorkerPool<AnalyzeJob, AnalyzeDone>(
      new URL('./analyze-dump-worker.js', import.meta.url),
      { opts: o, maxLine: this.maxLine },
      o.threads,
      (d) => this.parsed.push(d),
    );
    const pool = this.pool;
    const reuse = this.lend.pop();
    // Near the end of a sorted run, this thread neither parses nor applies: it queues
    // batches for the workers, enough to keep them busy while it spills, then spills,
    // then applies what they parsed meanwhile (into the next run: batches are still
    // applied in input order). Near (RecordSorter.nearlyFull): within two blocks or two
    // batches of its budget, more than is usually applied before the next look (one
    // batch). A margin of three blocks and three batches made a run in ten more at 10M
    // lines, and as slow as before.
    const ahead = this.spillAhead && this.sorter.nearlyFull();
    // Waiting for a worker would leave a core idle when there are as many workers as
    // cores less one, the default: this thread parses the batch meanwhile. (One worker
    // and this thread are as fast as two workers, with less CPU and memory.)
    const queue = ahead ? WORKER_QUEUE + this.spillQueue : WORKER_QUEUE;
    if (pool.offer({ batch, reuse }, [batch.buffer as ArrayBuffer, ...(reuse ? lentBuffers(reuse) : [])], queue)) {
      this.workerBatches++;
    } else {
      const { result, packed } = await this.parseHere(batch, reuse);
      pool.local({ result, packed, batch });
    }
    // (At the end of input, no spill: what is left may still fit, and then the output
    // comes from memory.)
    if (ahead && !final) {
      // Counted, not waited for: with a slow input the workers may answer as fast as
      // batches come, and the answers held here must stay bounded.
      if (++this.queuedAhead < this.spillQueue * o.threads) return;
      this.queuedAhead = 0;
      this.sorter.spillNow();
      this.spilledAhead++;
    }
    // At most as many batches in flight as the workers' queues hold (deeper right after a
    // spill), and MAIN_AHEAD of this thread's: each holds its records and rejects (a batch
    // of 2-byte rejected lines, 6.5 MiB).
    await pool.settle(Math.max(WORKER_QUEUE * o.threads, pool.pending) + MAIN_AHEAD);
    await this.applyParsed();
    await this.rejectsTaken();
  }

  /** Parses and applies the last batch and waits for every worker; returns whether the input's last line has no LF. */
  async end(): Promise<boolean> {
    const last = this.batcher.end();
    // Every batch but the last ends in LF; the last one ends as the input does.
    const unterminated = last !== null && last[last.length - 1] !== LF;
    if (last) await this.submit(last, true);
    if (this.pool !== null) {
      await this.pool.settle(0);
      await this.applyParsed();
      this.pool.close();
    }
    return unterminated;
  }

  /** Where the batches were parsed, for the debug log. */
  where(): Record<string, number> {
    return { batches_on_workers: this.workerBatches, batches_on_main_thread: this.localBatches, runs_spilled_ahead: this.spilledAhead };
  }

  close(): void {
    this.pool?.close();
  }

  /**
   * Adds a parsed batch's records to the sorter and its rejects to the rejects file. A
   * batch is counted once both went where they go: one whose spill or rejects write
   * fails is counted in none of the counts.
   */
  private apply(r: BatchResult, packed: PackedRecords): void {
    const c = this.counts;
    const before = this.sorter.count;
    // The sorter keeps the batch's buffers as they are (no copy).
    this.sorter.adoptPacked(packed);
    const x = r.rejects;
    if (this.rejects) putRejects(this.rejects, x, c.linesIn);
    c.recordsOut += this.sorter.count - before;
    c.headers += r.headers;
    c.empty += r.empty;
    c.rejected += x.count;
    for (const [why, n] of Object.entries(x.byReason)) c.byReason[why] = (c.byReason[why] ?? 0) + n;
    c.linesIn += r.lines;
  }

  private async applyParsed(): Promise<void> {
    for (let d = this.parsed.shift(); d !== undefined; d = this.parsed.shift()) {
      await this.rejectsTaken();
      this.apply(d.result, d.packed);
      this.batcher.recycle(d.batch);
      this.lend.push({ packed: this.sorter.takeSpare(), rejects: d.result.rejects });
    }
  }

  private async parseHere(batch: Buffer, reuse: Lent | undefined): Promise<{ result: BatchResult; packed: PackedRecords }> {
    this.inline ??= new BatchAnalyzer(this.o, await loadUrlHash(), this.maxLine);
    this.localBatches++;
    return this.inline.run(batch, reuse);
  }

  /** Back-pressure from a FIFO's reader: no more input is read while its rejects wait. */
  private rejectsTaken(): Promise<void> | undefined {
    return this.rejects instanceof FifoWriter ? this.rejects.ready() : undefined;
  }
}
