// What `caps` reports (its JSON), and how it shows it to a person: the hours with their
// busiest domains' URLs, then for each cap played, what it would have done run by run.
import { visibleName } from '../../core/errors.js';
import { formatDuration } from '../../core/time.js';
import type { CapRun } from './caps-model.js';

/** One hour the state keeps, as caps counted it. */
export interface CapsHour {
  run: string;
  now: string;
  reflog: string;
  lines: number;
  rejected: number;
  /** Distinct URLs: group-sum's records_out. */
  urls: number;
  domains: number;
  /** filter-url's sent in the run's record; null when runs.jsonl has none. */
  filtered: number | null;
  /** Its busiest domains (100, or --top if more), most URLs first. */
  busiest: { domain: string; urls: number }[];
  /** A domain not in `busiest` has at most this many URLs. */
  others_at_most: number;
  /** The most a domain's count may be low by (0: exact). */
  count_error: number;
  /** More distinct URLs than caps keeps ids of: the counts are upper bounds. */
  ids_full: boolean;
}

/** What caps reports, as its JSON has it. */
export interface Caps {
  state: string;
  carry_keep_ms: number;
  /** Where the carry-keep came from: --carry-keep, the state's settings, the config file (its own or the default), the default. */
  carry_keep_from: 'flag' | 'state' | 'config' | 'default';
  hours: CapsHour[];
  /** The hours done/ keeps (more than `hours` with --hours, or when one cannot be read). */
  hours_kept: number;
  /** Reflogs of done/ left out: no run record and a name that is no hour. */
  left_out: string[];
  /** Reflogs of done/ that could not be read (a dangling link), with the error: not counted. */
  unreadable: string[];
  /** Committed runs in runs.jsonl whose reflog is no longer in done/ (--keep-done). */
  runs_without_reflog: number;
  /** The URL parser of the state's ids differs from this runtime's (its next run re-keys). */
  other_parser: boolean;
  /** The --top busiest domains by their busiest hour. */
  busiest: { domain: string; peak: number }[];
  caps: { max_per_domain: number; runs: CapRun[] }[];
}

const pad = (v: string | number, w: number) => String(v).padStart(w);

/** Domain `d`'s URLs in hour `h`: its count, or at most the count below the hour's busiest ("<=N"). */
function cell(h: CapsHour, d: string): string {
  const b = h.busiest.find((x) => x.domain === d);
  if (b !== undefined) return String(b.urls);
  return h.others_at_most === 0 ? '0' : `<=${h.others_at_most}`;
}

/** The hours, a line each: lines, distinct URLs, filter-url's sent, the busiest domains' URLs. */
function hoursTable(r: Caps): string[] {
  const top = r.busiest.map((b) => b.domain);
  const lines = [`${'run'.padEnd(14)}${pad('lines', 10)}${pad('urls', 10)}${pad('filtered', 10)}${top.map((_, i) => pad(`#${i + 1}`, 9)).join('')}`];
  for (const h of r.hours) {
    const filtered = h.filtered === null ? '-' : h.filtered;
    lines.push(`${h.run.padEnd(14)}${pad(h.lines, 10)}${pad(h.urls, 10)}${pad(filtered, 10)}${top.map((d) => pad(cell(h, d), 9)).join('')}`);
  }
  for (const [i, b] of r.busiest.entries()) lines.push(`  #${i + 1} ${visibleName(b.domain)}: ${b.peak} in its busiest hour`);
  return lines;
}

/** What cap `n` would have done, a line a run and a total. */
function capTable(n: number, runs: readonly CapRun[], keepMs: number): string[] {
  const lines = [
    `--max-per-domain ${n}, --carry-keep ${formatDuration(keepMs)}:`,
    `${'run'.padEnd(14)}${pad('sent', 10)}${pad('carried', 10)}${pad('expired', 10)}${pad('capped', 8)}${pad('longest wait', 14)}${pad('oldest waiting', 16)}`,
  ];
  for (const x of runs) {
    const oldest = x.oldest_waiting_seconds === null ? '-' : formatDuration(x.oldest_waiting_seconds * 1000);
    lines.push(
      `${x.run.padEnd(14)}${pad(x.sent, 10)}${pad(x.carried, 10)}${pad(x.expired, 10)}${pad(x.capped_domains, 8)}${pad(formatDuration(x.longest_wait_seconds * 1000), 14)}${pad(oldest, 16)}`,
    );
  }
  const sum = (k: 'sent' | 'expired') => runs.reduce((s, x) => s + x[k], 0);
  const longest = Math.max(0, ...runs.map((x) => x.longest_wait_seconds));
  lines.push(
    `  in all: ${sum('sent')} sent, ${sum('expired')} expired, ${runs.at(-1)?.carried ?? 0} still carried; the longest wait ${formatDuration(longest * 1000)}`,
  );
  return lines;
}

/** Notes on what was not counted, or counted with a bound. */
function notes(r: Caps): string[] {
  const out: string[] = [];
  if (r.left_out.length > 0) out.push(`left out (no run record, and the name is no hour): ${r.left_out.map(visibleName).join(', ')}`);
  for (const u of r.unreadable) out.push(`not counted: ${visibleName(u)}`);
  if (r.runs_without_reflog > 0)
    out.push(`${r.runs_without_reflog} committed run(s) of runs.jsonl have no reflog in done/ (--keep-done removed it): not counted`);
  if (r.other_parser) out.push("the state's URLs were keyed by another URL parser: counted with this runtime's, as its next run re-keys them");
  for (const h of r.hours) {
    if (h.count_error > 0) out.push(`${h.run}: more domains than caps holds at once: a count may be low by up to ${h.count_error}`);
    if (h.ids_full) out.push(`${h.run}: more distinct URLs than caps holds at once: past them, repeats are counted again`);
  }
  return out;
}

/** The report for a person. */
export function humanCaps(r: Caps): string {
  if (r.hours.length === 0) {
    const why =
      r.runs_without_reflog === 0
        ? 'no run was committed here (a wrong --state, or no --config?)'
        : 'done/ keeps the reflogs of committed runs (--keep-done removes them)';
    return [`no reflog in ${visibleName(r.state)}/done/ to count: ${why}`, ...notes(r)].join('\n') + '\n';
  }
  const from = { flag: 'given', state: "the state's", config: "the config's", default: 'the default' }[r.carry_keep_from];
  const keep = `${formatDuration(r.carry_keep_ms)} (${from})`;
  const lines = [
    `${r.hours.length === r.hours_kept ? '' : `${r.hours.length} of the `}${r.hours_kept} hour(s) in STATE/done/, ${r.hours[0]!.run} to ${r.hours.at(-1)!.run}; carry-keep ${keep}`,
    'urls: distinct URLs (canonical, one per id); filtered: what filter-url decided to send (runs.jsonl)',
    ...(r.busiest.length > 0
      ? [`#1${r.busiest.length > 1 ? `-#${r.busiest.length}` : ''}: the busiest domains' distinct URLs, at most what filter-url sent of them`]
      : []),
    '',
    ...hoursTable(r),
  ];
  if (r.caps.length === 0) lines.push('', 'give --max-per-domain N (or several: N1,N2) to see what a cap would hold back');
  for (const c of r.caps) lines.push('', ...capTable(c.max_per_domain, c.runs, r.carry_keep_ms));
  if (r.caps.length > 0) lines.push('(every URL counted as new in its hour, none seen again while it waits: carried and expired are upper bounds)');
  const n = notes(r);
  return [...lines, ...(n.length > 0 ? ['', ...n] : [])].join('\n') + '\n';
}
