// analyze-dump's batches: what one holds, parsed (records packed by id group, rejects
// packed for the rejects file), and the core that parses one, on a worker thread or the
// main thread. Nothing here reads input or writes output.
import { LF, TAB, putBytes, putDecimal, type ByteSink } from '../core/bytes.js';
import { grown } from '../core/arrays.js';
import { packedBuffers, type PackedRecords } from '../core/sorter.js';
import { GroupedBatch } from '../core/packed.js';
import { ReflogAnalyzer, Verdict } from '../core/reflog.js';
import { UrlResolver, type UrlHash, type UrlOptions } from '../core/url.js';

/** analyze-dump's options, as the stage and each parsing thread have them. */
export interface AnalyzeDumpOptions extends UrlOptions {
  rejects: string | null;
  maxRejectRatio: number;
  memoryBytes: number;
  tmpDir: string;
  threads: number;
}

/** Under this --memory, analyze-dump trades speed for memory: no worker threads, no URL memory. */
export const SMALL_BUDGET = 128 << 20;

/** What one thread's URL memory takes at most: keys, answers and their tables. */
export const URL_MEMORY_BYTES = 11 << 20;

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
export function hasUrlMemory(o: AnalyzeDumpOptions): boolean {
  return o.memoryBytes >= SMALL_BUDGET && parsingThreads(o) * URL_MEMORY_BYTES <= o.memoryBytes / 4;
}

/** The threads that may parse: the workers and the main thread. */
export function parsingThreads(o: AnalyzeDumpOptions): number {
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
export function putRejects(sink: ByteSink, x: BatchRejects, before: number): void {
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
  const rejectParts = [r.lines, r.whys, r.text.bytes, r.text.ends, r.reasons.bytes, r.reasons.ends]
    .filter((a) => a.buffer.byteLength > 0)
    .map((a) => a.buffer as ArrayBuffer);
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
