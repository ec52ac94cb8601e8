// analyze-dump: reflog -> URL records sorted by (id, timestamp).
import * as os from 'node:os';
import { isUtf8 } from 'node:buffer';
import type { Command } from 'commander';
import type { StageDef } from '../cli/stage.js';
import { DataError, UsageError } from '../core/errors.js';
import { isValidHits, normalizeHits } from '../core/hits.js';
import { clip } from '../core/records.js';
import { parseSize } from '../core/size.js';
import { LineSorter } from '../core/sorter.js';
import { isValidTimestamp } from '../core/time.js';
import { FileWriter } from '../core/tsv.js';
import {
  DEFAULT_MAX_URL_BYTES,
  canonicalize,
  compileParamGlobs,
  loadUrlHasher,
  type DomainMode,
  type UrlOptions,
} from '../core/url.js';

export interface AnalyzeDumpOptions extends UrlOptions {
  rejects: string | null;
  maxRejectRatio: number;
  memoryBytes: number;
  tmpDir: string;
}

// Reflog fields (0-based): batch_id priority timestamp page_id url hits [updatetag].
const R_TS = 2;
const R_URL = 4;
const R_HITS = 5;
const R_TAG = 6;
/** The sort key: `id TAB timestamp`, the fixed-width prefix of every URL record. */
const SORT_KEY_LENGTH = 16 + 1 + 14;
/** Lines longer than this cannot hold a valid record (URL limit plus generous fields). */
const lineLimit = (maxUrl: number) => maxUrl + 65536;

/** Everything analyze-dump decides about one reflog line. */
export type LineVerdict =
  | { kind: 'record'; record: string }
  | { kind: 'skip'; what: 'header' | 'empty' }
  | { kind: 'reject'; reason: string; detail: string };

/**
 * The pure core: classifies one reflog line (bytes, LF removed) and, for a valid
 * record, builds the URL record line `id ts updatetag hits domain url` (no LF).
 */
export function analyzeLine(
  buf: Buffer,
  start: number,
  end: number,
  overlong: boolean,
  opts: UrlOptions,
  hash: (url: string) => string,
): LineVerdict {
  if (overlong) return { kind: 'reject', reason: 'line too long', detail: `more than ${lineLimit(opts.maxUrlBytes)} bytes` };
  if (end > start && buf[end - 1] === 13) end--;
  if (end === start) return { kind: 'skip', what: 'empty' };
  const tab = buf.indexOf(9, start);
  if (tab === -1 || tab >= end) return { kind: 'skip', what: 'header' };
  if (!isUtf8(buf.subarray(start, end))) return { kind: 'reject', reason: 'invalid UTF-8', detail: '' };
  const f = buf.toString('utf8', start, end).split('\t');
  if (f.length !== 6 && f.length !== 7) {
    return { kind: 'reject', reason: 'bad field count', detail: `${f.length} fields, want 6 or 7` };
  }
  const ts = f[R_TS]!;
  if (!isValidTimestamp(ts)) return { kind: 'reject', reason: 'bad timestamp', detail: clip(ts) };
  const hits = f[R_HITS]!;
  if (!isValidHits(hits)) return { kind: 'reject', reason: 'bad hits', detail: hits === '' ? 'empty' : clip(hits) };
  const tag = f[R_TAG] ?? '';
  if (tag.includes('\r')) return { kind: 'reject', reason: 'bad updatetag', detail: 'contains CR' };
  const c = canonicalize(f[R_URL]!, opts);
  if ('reason' in c) return { kind: 'reject', reason: c.reason, detail: c.detail };
  return { kind: 'record', record: `${hash(c.url)}\t${ts}\t${tag}\t${normalizeHits(hits)}\t${c.domain}\t${c.url}` };
}

export const analyzeDump: StageDef<AnalyzeDumpOptions> = {
  name: 'analyze-dump',
  summary: 'Turn a reflog into URL records sorted by (id, timestamp).',
  usage: `
Reads reflog lines "batch_id priority timestamp page_id url hits [updatetag]"
and writes URL records "id timestamp updatetag hits domain url", sorted by
(id, timestamp) bytewise, ties in input order.

  url        WHATWG canonical form, fragment removed (optionally query rewritten)
  id         XXH64 (seed 0) of the canonical URL, 16 lower-case hex digits
  domain     registrable domain (Public Suffix List, private suffixes honoured);
             the host itself for IPs, single labels and bare public suffixes
  hits       canonical decimal (leading zeros removed)

Lines without a TAB (the reflog's leading "unknown field") and empty lines are
skipped and counted; a trailing CR is stripped. Every other bad line is rejected
with a reason. Summary: lines_in = records_out + rejected + skipped.

Buffers: every record, up to --memory, before writing; output starts at the end
of input. If more than --max-reject-ratio of the records are rejected, the run
fails with no output.`,
  options(cmd: Command) {
    cmd
      .option('--rejects <file>', 'write each rejected line as "line TAB reason TAB original bytes"')
      .option('--max-reject-ratio <r>', 'fail (no output) when rejected/(records+rejected) exceeds r', '0.01')
      .option('--max-url-bytes <n>', 'longest accepted URL in bytes', String(DEFAULT_MAX_URL_BYTES))
      .option('--drop-params <globs>', "drop query parameters whose names match, e.g. 'utm_*,callback,_'")
      .option('--sort-query', 'sort query parameters by name (stable)', false)
      .option('--domain-mode <mode>', 'registrable (public suffix + 1) or host', 'registrable')
      .option('--memory <size>', 'memory budget for sorting, e.g. 64M, 1G', '256M')
      .option('--tmp <dir>', 'directory for sort spill files', os.tmpdir());
  },
  normalize(raw) {
    const ratio = Number(raw.maxRejectRatio);
    if (!(ratio >= 0 && ratio <= 1) || String(raw.maxRejectRatio).trim() === '') {
      throw new UsageError(`--max-reject-ratio wants a number from 0 to 1, got '${raw.maxRejectRatio}'`);
    }
    const maxUrl = Number(raw.maxUrlBytes);
    if (!Number.isInteger(maxUrl) || maxUrl < 16) throw new UsageError(`--max-url-bytes wants an integer >= 16, got '${raw.maxUrlBytes}'`);
    const mode = String(raw.domainMode);
    if (mode !== 'registrable' && mode !== 'host') throw new UsageError(`--domain-mode is 'registrable' or 'host', got '${mode}'`);
    const memory = parseSize(String(raw.memory));
    if (memory === null || memory < 1 << 20) throw new UsageError(`--memory wants a size of at least 1M (e.g. 64M, 1G), got '${raw.memory}'`);
    return {
      rejects: (raw.rejects as string | undefined) ?? null,
      maxRejectRatio: ratio,
      maxUrlBytes: maxUrl,
      dropParams: raw.dropParams ? compileParamGlobs(String(raw.dropParams)) : null,
      sortQuery: Boolean(raw.sortQuery),
      domainMode: mode as DomainMode,
      memoryBytes: memory,
      tmpDir: String(raw.tmp),
    };
  },
  async run(ctx, o) {
    const hash = await loadUrlHasher();
    const rejects = o.rejects ? new FileWriter(o.rejects) : null;
    ctx.onExit(() => rejects?.abandon());
    const sorter = new LineSorter({ keyLength: SORT_KEY_LENGTH, memoryBytes: o.memoryBytes, tmpDir: o.tmpDir });
    ctx.onExit(() => sorter.dispose());
    const byReason: Record<string, number> = {};
    let linesIn = 0;
    let rejected = 0;
    let headers = 0;
    let empty = 0;
    const c = ctx.counts;

    await ctx.eachRawLine((buf, start, end, lineNo, overlong) => {
      linesIn++;
      const v = analyzeLine(buf, start, end, overlong, o, hash);
      if (v.kind === 'record') {
        sorter.add(v.record);
      } else if (v.kind === 'skip') {
        if (v.what === 'header') headers++;
        else empty++;
      } else {
        rejected++;
        byReason[v.reason] = (byReason[v.reason] ?? 0) + 1;
        if (rejects) {
          rejects.write(`${lineNo}\t${v.detail ? `${v.reason}: ${v.detail}` : v.reason}\t`);
          rejects.write(Buffer.from(buf.subarray(start, end)));
          rejects.write('\n');
        }
      }
    }, lineLimit(o.maxUrlBytes));

    const records = sorter.count;
    Object.assign(c, {
      lines_in: linesIn,
      records_out: records,
      rejected,
      skipped: headers + empty,
      skipped_header: headers,
      skipped_empty: empty,
      rejected_by_reason: byReason,
      sort_runs: sorter.spilledRuns,
    });
    rejects?.close();
    const total = records + rejected;
    if (total > 0 && rejected / total > o.maxRejectRatio) {
      c.output_discarded = true;
      throw new DataError(
        'REJECT_RATIO',
        `rejected ${rejected} of ${total} records (${((100 * rejected) / total).toFixed(2)}%), more than --max-reject-ratio ${o.maxRejectRatio}; no output written`,
        { file: ctx.inputName },
      );
    }
    const out = ctx.out;
    // Lines go out in joined batches: one string per 1024 records, not two per record.
    const batch: string[] = [];
    await sorter.drain((line) => {
      batch.push(line);
      if (batch.length < 1024) return;
      out.write(batch.join('\n') + '\n');
      batch.length = 0;
      return out.flushIfFull();
    });
    if (batch.length) out.write(batch.join('\n') + '\n');
  },
};
