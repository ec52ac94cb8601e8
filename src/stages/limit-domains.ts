// limit-domains: at most N URL records of a domain go out per run; the rest wait in the
// carry. Pass one (here) merges the input and the carry into a spool, each record ranked;
// passes two and three are limit-domains-rank.ts's.
import * as fs from 'node:fs';
import * as os from 'node:os';
import { pathOption, refuseOwnStreams, type Count, type StageContext, type StageDef } from '../cli/stage.js';
import { LF, TAB, compareBytes, latin1, putBytes, type ByteSink } from '../core/bytes.js';
import { DataError, UsageError } from '../core/errors.js';
import { regularFileFor } from '../core/fifos.js';
import { DEFAULT_MAX_LINE, FileLineReader } from '../core/lines.js';
import { countOption } from '../core/numbers.js';
import { DECIDED_TAIL_BYTES, ID_BYTES, IdOrder, LineRef, RANKED_PREFIX_BYTES, TS_BYTES, URL_RECORD, U_DOMAIN, U_HITS } from '../core/records.js';
import { RecordScanner, checkCarryRecordAt, checkUrlRecordAt } from '../core/record-checks.js';
import { DEFAULT_CARRY_KEEP } from '../core/defaults.js';
import { parseBudget } from '../core/size.js';
import { SPILL_PREFIX } from '../core/sorter.js';
import { SPOOL_PREFIX, Spool } from '../core/spool.js';
import { removeStaleTemps } from '../core/temps.js';
import { formatTimestamp, isValidTimestamp, parseDuration, timestampMsAt, timestampToMs } from '../core/time.js';
import { AtomicFileWriter } from '../core/writers.js';
import { Dispatch, DomainCounter, DomainRanking, type RankCounts, carriedRank, freshRank } from './limit-domains-rank.js';

/** How many of the capped domains the summary names (those that held back the most). */
export const TOP_CAPPED = 10;

export interface LimitDomainsOptions {
  maxPerDomain: number;
  carry: string;
  carryOut: string;
  now: string;
  nowMs: number;
  carryKeepMs: number;
  memoryBytes: number;
  tmpDir: string;
}

/** The counts of a run, for its summary line. */
class LimitCounts implements RankCounts {
  filteredIn = 0;
  carriedIn = 0;
  carriedAgain = 0;
  carryExpired = 0;
  sent = 0;
  carriedOut = 0;
  cappedTotal = 0;
  /** The domains held back the most: domain -> records carried out, at most TOP_CAPPED. */
  capped = new Map<string, number>();
  committed = false;
  spoolSpilled = false;
  sortRuns = 0;
  /** The oldest `decided` of the records carried out (14 bytes), when there are any. */
  readonly oldest = new Uint8Array(TS_BYTES);

  /** Counts a record carried out, decided at `b[at, at + 14)`. */
  carried(b: Uint8Array, at: number): void {
    if (this.carriedOut === 0 || compareBytes(b, at, this.oldest, 0, TS_BYTES) < 0) this.oldest.set(b.subarray(at, at + TS_BYTES));
    this.carriedOut++;
  }

  /** Notes a domain that held back `held` records, keeping the TOP_CAPPED that held back most. */
  noteCapped(domain: string, held: number): void {
    this.cappedTotal++;
    this.capped.set(domain, held);
    if (this.capped.size <= TOP_CAPPED) return;
    let least: string | null = null;
    for (const [d, n] of this.capped) if (least === null || n < this.capped.get(least)! || (n === this.capped.get(least)! && d > least)) least = d;
    this.capped.delete(least!);
  }

  report(o: LimitDomainsOptions): Record<string, Count> {
    const top = [...this.capped].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    return {
      now: o.now,
      max_per_domain: o.maxPerDomain,
      filtered_in: this.filteredIn,
      carried_in: this.carriedIn,
      carried_again: this.carriedAgain,
      carry_expired: this.carryExpired,
      sent: this.sent,
      // Records in the new carry: none unless it was renamed into place.
      carried_out: this.committed ? this.carriedOut : 0,
      capped_domains: Object.fromEntries(top),
      capped_domains_total: this.cappedTotal,
      ...(this.committed && this.carriedOut > 0 && { carry_oldest_decided: latin1(this.oldest, 0, TS_BYTES) }),
      spool_spilled: this.spoolSpilled,
      sort_runs: this.sortRuns,
    };
  }
}

const DECIDED_AT = 1 - DECIDED_TAIL_BYTES; // where `decided` starts, from a carry record's end

/**
 * Pass one: filtered_log (stdin) merged by id with the carry, each record written to
 * the spool with its rank (a ranked carry record) and counted for its domain. A
 * carried record not decided again whose decision is --carry-keep old is dropped.
 */
class CarryMerge {
  private readonly carryLine = new LineRef(URL_RECORD.length - 1);
  private carry: LineRef | null = null;
  private readonly carryOrder = new IdOrder();
  private readonly inOrder = new IdOrder();
  private readonly nowBytes: Buffer;
  private readonly rank = new Uint8Array(TS_BYTES);

  constructor(
    private readonly o: LimitDomainsOptions,
    private readonly reader: FileLineReader | null,
    private readonly spool: Spool,
    private readonly domains: DomainCounter,
    private readonly n: LimitCounts,
  ) {
    this.nowBytes = Buffer.from(o.now, 'latin1');
    this.nextCarry();
  }

  /** Merges the checked filtered_log record `l` (line `lineNo` of `file`). */
  feed(l: LineRef, file: string, lineNo: number, checked: boolean): void {
    const bad = (checked ? null : checkUrlRecordAt(l)) ?? this.inOrder.check(l.buf, l.start);
    if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
    let d = 1;
    while (this.carry !== null && (d = compareBytes(this.carry.buf, this.carry.start, l.buf, l.start, ID_BYTES)) < 0) this.carriedOnly();
    this.n.filteredIn++;
    if (this.carry !== null && d === 0) {
      // Decided again: this hour's values, the first decision's age.
      const c = this.carry;
      this.emit(l, l.end, c.buf, c.end + DECIDED_AT, carriedRank(timestampMsAt(c.buf, c.end + DECIDED_AT)));
      this.n.carriedAgain++;
      this.nextCarry();
    } else {
      this.emit(l, l.end, this.nowBytes, 0, freshRank(l.buf, l.fieldStart(U_HITS), l.fieldEnd(U_HITS)));
    }
  }

  /** The carried records after the last filtered_log one. */
  finish(): void {
    while (this.carry !== null) this.carriedOnly();
  }

  private carriedOnly(): void {
    const c = this.carry!;
    const decidedMs = timestampMsAt(c.buf, c.end + DECIDED_AT);
    if (this.o.nowMs - decidedMs >= this.o.carryKeepMs) this.n.carryExpired++;
    else this.emit(c, c.end - DECIDED_TAIL_BYTES, c.buf, c.end + DECIDED_AT, carriedRank(decidedMs));
    this.nextCarry();
  }

  /**
   * Writes `rank TAB url-record TAB decided` to the spool and counts its domain: the URL
   * record is `l.buf[l.start, urlEnd)` (checked, its TABs in `l`), decided `d[dAt, dAt + 14)`.
   */
  private emit(l: LineRef, urlEnd: number, d: Uint8Array, dAt: number, rank: number): void {
    const s = this.spool;
    s.reserve(urlEnd - l.start + RANKED_PREFIX_BYTES + DECIDED_TAIL_BYTES + 1);
    putRank(this.rank, rank);
    let p = putBytes(s.buf, s.pos, this.rank, 0, TS_BYTES);
    s.buf[p++] = TAB;
    p = putBytes(s.buf, p, l.buf, l.start, urlEnd);
    s.buf[p++] = TAB;
    p = putBytes(s.buf, p, d, dAt, dAt + TS_BYTES);
    s.buf[p++] = LF;
    s.pos = p;
    this.domains.add(l.buf, l.fieldStart(U_DOMAIN), l.fieldEnd(U_DOMAIN));
  }

  private nextCarry(): void {
    this.carry = null;
    const l = this.carryLine;
    if (this.reader === null || !this.reader.next(l)) return;
    const bad = checkCarryRecordAt(l) ?? this.carryOrder.check(l.buf, l.start);
    if (bad) throw new DataError('BAD_CARRY', bad, { file: this.o.carry, line: this.reader.lineNo });
    this.n.carriedIn++;
    this.carry = l;
  }
}

/** Writes `rank` as 14 digits to `to`. */
function putRank(to: Uint8Array, rank: number): void {
  for (let k = TS_BYTES - 1; k >= 0; k--) {
    const q = Math.floor(rank / 10);
    to[k] = 48 + (rank - q * 10);
    rank = q;
  }
}

/** The carry as a line reader, or null when the file does not exist (an empty carry). */
async function openCarry(ctx: StageContext, file: string): Promise<FileLineReader | null> {
  const source = await regularFileFor(file, (fn) => ctx.onExit(fn), DEFAULT_MAX_LINE + DECIDED_TAIL_BYTES);
  if (!fs.existsSync(source)) return null;
  const r = new FileLineReader(source, 1 << 20, file, DEFAULT_MAX_LINE + DECIDED_TAIL_BYTES);
  ctx.onExit(() => r.close());
  return r;
}

export const limitDomains: StageDef<LimitDomainsOptions> = {
  name: 'limit-domains',
  summary: 'Send at most N URL records per domain this run; carry the rest over.',
  usage: `
Reads filtered_log (URL records, sorted by id, unique) and the carry (--carry
FILE: carry records "id timestamp updatetag hits domain url decided", sorted by
id; a missing file is an empty carry), merges them by id, and writes at most
--max-per-domain records of each domain to stdout (URL records, sorted by id).
Every other record goes to --carry-out (carry records, sorted by id).

  decided   the --now of the run that first decided to send the URL; a URL
            in both inputs (decided again) gets filtered_log's values and
            keeps the carry's decided
  order     within a domain: carried records first, oldest decided first;
            then the others, most hits first (beyond 99*10^12, alike); ties
            by id
  expiry    a carried record not decided again whose decided is --carry-keep
            or more before --now is dropped, and counted (carry_expired)

Timestamps are read in the local time zone (set TZ to choose). Durations: 90s,
30m, 1h, 10h, 1d, or seconds. --carry-out is written to a temporary file and
renamed over FILE (which may be --carry itself) only at a clean end.
Summary: filtered_in + carried_in - carried_again = sent + carried_out +
carry_expired; capped_domains names the ${TOP_CAPPED} domains that held back the most.

Buffers: the merged records up to a quarter of --memory (beyond it, in a file
in --tmp), read two or three times; those of domains over their cap are
sorted within half of --memory, spilling to --tmp. Output starts at the end of
input.`,
  options(cmd) {
    cmd
      .requiredOption('--max-per-domain <n>', 'the most records of one domain sent this run (required)')
      .requiredOption('--carry <file>', 'the carry to merge (required; a missing file is an empty carry)')
      .requiredOption('--carry-out <file>', 'where to write the next carry (required)')
      .option('--now <YYYYMMDDhhmmss>', 'the time of this run (default: the wall clock, local time)')
      .option('--carry-keep <duration>', 'drop a carried record decided this long ago', DEFAULT_CARRY_KEEP)
      .option('--memory <size>', 'memory budget for the merged records and sorting, e.g. 64M, 1G', '256M')
      .option('--tmp <dir>', 'directory for spill files', os.tmpdir());
  },
  normalize(raw) {
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    const keep = parseDuration(String(raw.carryKeep));
    if (keep === null) throw new UsageError(`--carry-keep wants a duration like 90s, 30m, 1h, 1d or seconds (at most 3650d), got '${raw.carryKeep}'`);
    const memory = parseBudget(String(raw.memory));
    if (typeof memory !== 'number') throw new UsageError(`--memory ${memory.error}`);
    return {
      maxPerDomain: countOption('--max-per-domain', raw.maxPerDomain, 1, 2 ** 31),
      carry: pathOption('--carry', raw.carry),
      carryOut: pathOption('--carry-out', raw.carryOut),
      now,
      nowMs: timestampToMs(now),
      carryKeepMs: keep,
      memoryBytes: memory,
      tmpDir: pathOption('--tmp', raw.tmp, 'a directory name'),
    };
  },
  async run(ctx, o) {
    refuseOwnStreams('--carry', o.carry, ctx.inputPath);
    refuseOwnStreams('--carry-out', o.carryOut, ctx.inputPath);
    // What runs that were SIGKILLed left in --tmp goes before this one needs the space.
    removeStaleTemps(o.tmpDir, SPILL_PREFIX);
    removeStaleTemps(o.tmpDir, SPOOL_PREFIX);
    const n = new LimitCounts();
    ctx.reportCounts(() => n.report(o));
    const next = new AtomicFileWriter(o.carryOut);
    ctx.onExit(() => next.abort());
    const spool = new Spool(Math.floor(o.memoryBytes / 4), o.tmpDir);
    ctx.onExit(() => spool.dispose());
    const domains = new DomainCounter(Math.floor(o.memoryBytes / 16), o.maxPerDomain);
    await mergeInputs(ctx, o, spool, domains, n);
    await limitOutput(ctx, o, spool, domains, n, next);
    await ctx.out.flush();
    next.commit();
    n.committed = true;
  },
};

/** Pass one: stdin and the carry merged into the spool. */
async function mergeInputs(ctx: StageContext, o: LimitDomainsOptions, spool: Spool, domains: DomainCounter, n: LimitCounts): Promise<void> {
  const merge = new CarryMerge(o, await openCarry(ctx, o.carry), spool, domains, n);
  const l = new LineRef(URL_RECORD.length - 1);
  await ctx.eachLine(
    (buf, start, end, lineNo, checked) => merge.feed(l.set(buf, start, end), ctx.inputName, lineNo, checked),
    undefined,
    new RecordScanner('url', l.tabs).scan,
  );
  merge.finish();
  spool.finish();
  n.spoolSpilled = spool.spilled;
}

/** Passes two and three: the domains over their cap ranked (if any), then every record sent or carried. */
async function limitOutput(ctx: StageContext, o: LimitDomainsOptions, spool: Spool, domains: DomainCounter, n: LimitCounts, next: ByteSink): Promise<void> {
  const out = ctx.out;
  if (!domains.anyOver) {
    await new Dispatch(spool.reader(), domains, out, next, n).rest();
    return;
  }
  const ranking = new DomainRanking(o, domains, n);
  ctx.onExit(() => ranking.dispose());
  await ranking.rank(spool.reader());
  const dispatch = new Dispatch(spool.reader(), domains, out, next, n);
  await ranking.chosen.sorter.drain(async (chunk) => {
    for (let s = 0; s < chunk.length; s += ID_BYTES + 1 + TS_BYTES + 1) await dispatch.upTo(chunk, s);
  });
  await dispatch.rest();
}
