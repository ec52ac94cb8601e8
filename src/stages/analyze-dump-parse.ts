// analyze-dump's input, batch by batch: parsed on the worker threads and the main
// thread, applied in input order to the sorter, the rejects file and the counts.
import type { Count } from '../cli/stage.js';
import { LF } from '../core/bytes.js';
import { RecordSorter, type PackedRecords } from '../core/sorter.js';
import { LineBatcher } from '../core/lines.js';
import { lineLimit } from '../core/reflog.js';
import type { FileWriter } from '../core/writers.js';
import { FifoWriter } from '../core/fifos.js';
import { WorkerPool } from '../core/workers.js';
import { parseCount } from '../core/numbers.js';
import { loadUrlHash } from '../core/url.js';
import {
  BatchAnalyzer,
  URL_MEMORY_BYTES,
  hasUrlMemory,
  lentBuffers,
  parsingThreads,
  putRejects,
  type AnalyzeDone,
  type AnalyzeDumpOptions,
  type AnalyzeJob,
  type BatchResult,
  type Lent,
} from './analyze-dump-batch.js';

/** Bytes of input per batch handed to a worker thread. */
const BATCH_BYTES = 1 << 20;

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

/** The counts of a run, for its summary line. */
export class AnalyzeCounts {
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
export class ReflogParse {
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
    // What only parsing needs (a URL memory, buffers lent for more batches) is let go
    // before the output, which needs the room.
    this.inline = null;
    this.lend.length = 0;
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
