// analyze-dump: reflog -> URL records sorted by (id, timestamp). Its command line and
// output here; its batches in analyze-dump-batch.ts, their parsing and applying in
// analyze-dump-parse.ts.
import * as os from 'node:os';
import * as v8 from 'node:v8';
import type { Command } from 'commander';
import { pathOption, refuseOwnStreams, type StageContext, type StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { UNTERMINATED_WARNING } from '../core/records.js';
import { countOption, parseCount, ratioOption } from '../core/numbers.js';
import { parseBudget } from '../core/size.js';
import { SPILL_PREFIX } from '../core/sorter.js';
import { FileWriter } from '../core/writers.js';
import { FifoWriter, heldFifoWriter } from '../core/fifos.js';
import { removeStaleTemps } from '../core/temps.js';
import { DEFAULT_MAX_URL_BYTES, parseParamGlobs, type DomainMode } from '../core/url.js';
import { SMALL_BUDGET, type AnalyzeDumpOptions } from './analyze-dump-batch.js';
import { ReflogParse } from './analyze-dump-parse.js';

export type { AnalyzeDumpOptions } from './analyze-dump-batch.js';

/** The largest --max-url-bytes: a line may be this plus 64 KiB, and a worker's batch holds whole lines. */
const MAX_URL_LIMIT = 1 << 20;

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
      .option(
        '--threads <n>',
        'worker threads for parsing besides the main thread, 0 for none; each takes about 40M beyond --memory, and together at most --memory (default: one per core beyond the first, at most 3 and as many as fit; none on one core or under --memory 128M)',
      );
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
    if (o.memoryBytes >= SMALL_BUDGET) laterMarking();
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
 * Has V8 start marking the JS heap once half of the room to its limit is used (90%:
 * at once), not as soon as the heap is within one young generation of it: with a
 * heap this small (about 10 MiB live) it was marking all the time (docs/performance.md,
 * "V8's helper threads"). V8 reads these whenever it decides; they apply to the worker
 * threads too. Not under --memory 128M, where the bound on peak RSS comes first. Not in
 * the shebang: its line is cut at 127 bytes on older kernels.
 */
function laterMarking(): void {
  v8.setFlagsFromString('--incremental-marking-soft-trigger=50');
  v8.setFlagsFromString('--incremental-marking-hard-trigger=90');
}

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
