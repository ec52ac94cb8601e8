// reflog-to-yacobot-queue caps: for choosing --max-per-domain, the busiest domains' URLs
// in each hour the state keeps (STATE/done/, runs.jsonl), and what a cap of N would have
// sent, carried and expired under the carry-keep. Reads only; takes no lock.
import { DataError, UsageError, formatPlace } from '../../core/errors.js';
import { countOption } from '../../core/numbers.js';
import { parseDuration, timestampToMs } from '../../core/time.js';
import { loadUrlHash, type UrlOptions } from '../../core/url.js';
import { PROG, sayTo } from '../say.js';
import { type DoneReflog, doneReflogs } from '../state/done.js';
import { hourEndOf } from '../state/inbox.js';
import { UNKNOWN_KEYING, keyedByHere, sameKeying, storedKeying } from '../state/keying.js';
import type { RunRecord } from '../state/run-record.js';
import { runsLog } from '../state/runs-log.js';
import { storedSettings } from '../state/settings.js';
import { type HourCount, countReflog } from './caps-count.js';
import { CapModel, type CapRun } from './caps-model.js';
import { type Caps, type CapsHour, humanCaps } from './caps-report.js';
import type { SubArgs } from './sub-args.js';

export const CAPS_USAGE = `Usage: ${PROG} caps [--max-per-domain N[,N...]]
         [--carry-keep DURATION] [--top K] [--hours K] [--json] [options]

For choosing --max-per-domain: reads each reflog in STATE/done/ (the hours the
state keeps, in the order of their runs' now in runs.jsonl) and shows, per hour,
its distinct URLs, those filter-url decided to send (runs.jsonl), and the K
busiest domains' distinct URLs. A domain's distinct URLs in an hour are the most
filter-url can have sent of it: a URL it sent within --resend-after before is
counted too. With a cap N, it plays limit-domains' rule over these counts, hour
after hour: per hour, what would have been sent, carried and expired, the
domains held back, and the longest wait. Reads only, takes no lock: safe beside
a running invocation. It parses each reflog on one core: about 4 s of CPU per
million lines. Exit 0, or 1 when STATE/done/ holds no reflog to count.

  --max-per-domain N[,N...]  the caps to play (default: the config's, else the
                             state's cap, else none: only the counts)
  --carry-keep DURATION      how long a URL may wait (default: the state's, else
                             the config's, else 10h)
  --top K                    the busiest domains shown (default 10, at most 100)
  --hours K                  only the last K hours (the play starts with an
                             empty carry at the first)
  --json                     one JSON object: hours, busiest, caps
  options                    the runner's (--config, --state, ...)
`;

/** The busiest domains kept per hour beyond --top, so that a domain busy in other hours shows its count here. */
const KEPT_PER_HOUR = 100;

/** What the command line asked: the caps to play, the carry-keep and its source, K. */
function capsFlags(a: SubArgs, stored: { max_per_domain?: number; carry_keep_ms?: number } | null) {
  const top = countOption('--top', a.own.get('--top') ?? '10', 1, 100);
  const last = a.own.has('--hours') ? countOption('--hours', a.own.get('--hours'), 1, 1e6) : null;
  const list = a.own.get('--max-per-domain');
  let caps = list?.split(',').map((v) => countOption('--max-per-domain', v.trim(), 1, 1e9));
  caps ??= a.o.maxPerDomain !== null ? [a.o.maxPerDomain] : stored?.max_per_domain !== undefined ? [stored.max_per_domain] : [];
  const flag = a.own.get('--carry-keep');
  if (flag !== undefined) {
    const ms = parseDuration(flag);
    if (ms === null) throw new UsageError(`--carry-keep wants a duration like 10h, 1d or seconds, got '${flag}'`);
    return { top, last, caps, keepMs: ms, keepFrom: 'flag' as const };
  }
  if (stored?.carry_keep_ms !== undefined) return { top, last, caps, keepMs: stored.carry_keep_ms, keepFrom: 'state' as const };
  return { top, last, caps, keepMs: a.o.carryKeepMs, keepFrom: a.o.config === null ? ('default' as const) : ('config' as const) };
}

/** The last committed record of each run name among `runs` (runs.jsonl lines). */
function committedRuns(runs: readonly unknown[]): Map<string, Partial<RunRecord>> {
  const out = new Map<string, Partial<RunRecord>>();
  for (const r of runs) {
    const x = r as Partial<RunRecord> | null;
    if (x?.status === 'ok' && typeof x.run === 'string') out.set(x.run, x);
  }
  return out;
}

/** A reflog of done/ with its run's now and committed record (none when runs.jsonl no longer has it). */
interface KeptHour extends DoneReflog {
  now: string;
  record: Partial<RunRecord> | undefined;
}

/** The reflogs of done/ with their run's now and record, in the order of their now; and those with no now. */
function keptHours(state: string, records: Map<string, Partial<RunRecord>>): { hours: KeptHour[]; leftOut: string[] } {
  const hours: KeptHour[] = [];
  const leftOut: string[] = [];
  for (const d of doneReflogs(state)) {
    const record = records.get(d.run);
    const now = typeof record?.now === 'string' ? record.now : hourEndOf(d.run);
    if (now === null) leftOut.push(d.run);
    else hours.push({ ...d, now, record });
  }
  hours.sort((x, y) => (x.now < y.now ? -1 : x.now > y.now ? 1 : x.run < y.run ? -1 : 1));
  return { hours, leftOut };
}

/** The busiest `n` of `counts`, most URLs first (then by name), and the count below them. */
function busiestOf(counts: ReadonlyMap<string, number>, n: number): { busiest: CapsHour['busiest']; below: number } {
  const all = [...counts].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
  return { busiest: all.slice(0, n).map(([domain, urls]) => ({ domain, urls })), below: all[n]?.[1] ?? 0 };
}

/** The state's URL options: those its keyed_by records (the runner's own when it records none); whether another parser keyed it. */
function keyingOptions(state: string): { opts: UrlOptions; other: boolean } {
  const k = storedKeying(state);
  return {
    opts: { maxUrlBytes: k.max_url_bytes, dropParams: k.drop_params, sortQuery: k.sort_query, domainMode: k.domain_mode },
    other: k !== UNKNOWN_KEYING && !sameKeying(k, keyedByHere()),
  };
}

/** Prints what the kept hours say; returns 0, or 1 when there is no hour to count. */
export async function caps(a: SubArgs): Promise<number> {
  const state = a.o.state;
  const runs = runsLog(state).tail();
  const f = capsFlags(a, storedSettings(state, runs)?.settings ?? null);
  const records = committedRuns(runs);
  const kept = keptHours(state, records);
  const hours = f.last === null ? kept.hours : kept.hours.slice(-f.last);
  const { opts, other } = keyingOptions(state);
  const hash = await loadUrlHash();
  const models = f.caps.map((n) => new CapModel(n, f.keepMs));
  const played = f.caps.map((n) => ({ max_per_domain: n, runs: [] as CapRun[] }));
  const out: CapsHour[] = [];
  const unreadable: string[] = [];
  for (const [i, h] of hours.entries()) {
    const c = readable(h, () => countReflog(h.file, opts, hash), unreadable);
    if (c === null) continue;
    for (const [k, m] of models.entries()) played[k]!.runs.push(m.run(h.run, timestampToMs(h.now), c.urls, c.counts));
    out.push(hourReport(h, c, f.top));
    if (process.stderr.isTTY) sayTo(null).tell(`caps: ${h.run}: ${c.lines} lines counted (${i + 1} of ${hours.length})`);
  }
  const counted = new Set(kept.hours.map((h) => h.run));
  const report: Caps = {
    state,
    carry_keep_ms: f.keepMs,
    carry_keep_from: f.keepFrom,
    hours: out,
    hours_kept: kept.hours.length,
    left_out: kept.leftOut,
    unreadable,
    runs_without_reflog: [...records.keys()].filter((r) => !counted.has(r)).length,
    other_parser: other,
    busiest: peaks(out, f.top),
    caps: played,
  };
  process.stdout.write(a.json ? JSON.stringify(report, null, 2) + '\n' : humanCaps(report));
  return out.length > 0 ? 0 : 1;
}

/** What `count` gives, or null when it cannot read hour `h`'s reflog (a dangling link in done/), noted in `unreadable`. */
function readable(h: KeptHour, count: () => HourCount, unreadable: string[]): HourCount | null {
  try {
    return count();
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    unreadable.push(`${h.run}: ${formatPlace(err.place, err.message)}`);
    return null;
  }
}

/** Hour `h` as caps reports it, from its counts `c` (its KEPT_PER_HOUR busiest domains, or `top` if more). */
function hourReport(h: KeptHour, c: HourCount, top: number): CapsHour {
  const { busiest, below } = busiestOf(c.counts, Math.max(top, KEPT_PER_HOUR));
  const sent = h.record?.stages?.['filter-url']?.sent;
  return {
    run: h.run,
    now: h.now,
    reflog: h.file,
    lines: c.lines,
    rejected: c.rejected,
    urls: c.urls,
    domains: c.counts.size,
    filtered: typeof sent === 'number' ? sent : null,
    busiest,
    others_at_most: Math.max(below, c.count_error),
    count_error: c.count_error,
    ids_full: c.ids_full,
  };
}

/** The `top` domains with the most URLs in their busiest hour, and that count. */
function peaks(hours: readonly CapsHour[], top: number): Caps['busiest'] {
  const peak = new Map<string, number>();
  for (const h of hours) for (const b of h.busiest) peak.set(b.domain, Math.max(peak.get(b.domain) ?? 0, b.urls));
  return busiestOf(peak, top).busiest.map(({ domain, urls }) => ({ domain, peak: urls }));
}
