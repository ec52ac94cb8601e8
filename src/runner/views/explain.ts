// reflog-to-yacobot-queue explain URL...: what the job knows of each URL. Reads only
// (no lock, no database writes): safe beside a running invocation.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadUrlHash, type UrlHash } from '../../core/url.js';
import { urlIdentity } from '../../core/reflog.js';
import { formatTimestamp, timestampToMs } from '../../core/time.js';
import { jobNow, verdictOf, yacobotName, type JobNow } from './explain-verdict.js';
import { eachReject, findById, idsInFile, recordById } from './find-url.js';
import { stateLayout } from '../state/layout.js';
import { lastCommitted, sentByOther } from '../state/run-history.js';
import { runsLog } from '../state/runs-log.js';
import type { RunRecord } from '../state/run-record.js';
import { PROG } from '../say.js';
import type { RunnerOptions } from '../options/types.js';
import { noStateHint } from './no-state.js';
import { DataError } from '../../core/errors.js';
import { PartnerView, type YacobotRef } from '../../core/store/partner-view.js';
import type { Timeouts } from '../../core/store/store.js';
import type { SubArgs } from './sub-args.js';

/** The rejected lines listed per URL; the rest are counted. */
export const MAX_REJECT_LINES = 10;

export const EXPLAIN_USAGE = `Usage: ${PROG} explain [--json] [options] URL...

For each URL, what the job knows of it:
  url, id, domain   as analyze-dump computes them (canonical form, XXH64 id,
                    registrable domain)
  owner             the Yacobot that owns the domain; when none, pick: the one
                    least-loaded assignment would give it now
  current           current_log's entry (timestamp, updatetag, hits) and when
                    it is due again (due_at: timestamp + resend-after) and
                    forgotten (kept_until: timestamp + keep), or null
  sent_in           the queue files still on disk that hold it
  sent_by           the run that sent it and the master that published it,
                    when another master published that hour (this one
                    remembered it): {run, master}, or null
  rejected_in       the rejects files (STATE/rejects/) that hold its line,
                    with the reflog line number and the reason: the first
                    ${MAX_REJECT_LINES}, and rejected_more: how many more
  carried           with a per-domain cap, when the URL waits in the carry:
                    when it was decided and by which run, or null
  as_of             the job's now: the committed run current_log stands at
                    (run, now), or null before the first
  verdict           one line, as of the job's now: carried over since RUN:
                    DOMAIN is over its cap of N / sent in RUN to Yacobot N
                    (or sent in RUN by master B);
                    then held back until T: a sighting before then is sent
                    only with a new updatetag (one from T on is sent)
                    / due again since T: its next sighting is sent /
                    forgotten at T: its next sighting is sent as new; else
                    new: goes out when next seen / rejected: REASON /
                    never seen; would be rejected: REASON

Reads only and takes no lock: safe beside a running invocation. Times are
YYYYMMDDhhmmss in local time, as in the reflog.

  --json                  print a JSON array, one object per URL
  options                 the runner's (--config, --state, --db, --queue-dir, ...)
`;

/** current_log's entry of a URL, with when it is due again and when it is forgotten. */
export interface CurrentEntry {
  timestamp: string;
  updatetag: string;
  hits: string;
  due_at: string;
  kept_until: string;
}

/** A URL waiting in the carry: when it was decided, by which run (null: not in runs.jsonl's tail), under which cap. */
export interface CarriedEntry {
  decided: string;
  since_run: string | null;
  cap: number | null;
}

/** What explain says of one URL. */
export interface Explained {
  input: string;
  url: string | null;
  id: string | null;
  domain: string | null;
  /** Why analyze-dump would reject the URL itself, or null. */
  invalid: string | null;
  owner: YacobotRef | null;
  pick: YacobotRef | null;
  current: CurrentEntry | null;
  /** Waiting in STATE/carry (its domain over --max-per-domain), or null. */
  carried: CarriedEntry | null;
  sent_in: string[];
  /** The timestamp of its record in the newest of sent_in, or null. */
  sent_timestamp: string | null;
  /** The run that sent it when another master published that run's hour (this master remembered it, runner/claims.ts), else null. */
  sent_by: { run: string; master: string } | null;
  /** The first MAX_REJECT_LINES rejected lines that hold it. */
  rejected_in: { file: string; line: number; reason: string }[];
  /** How many more rejected lines hold it. */
  rejected_more: number;
  as_of: JobNow | null;
  verdict: string;
}

/** Prints what the job knows of each operand URL; returns the exit status (0). */
export async function explain(a: SubArgs): Promise<number> {
  const out = await explainUrls(a.o, a.operands);
  process.stdout.write(a.json ? JSON.stringify(out, null, 2) + '\n' : out.map(humanExplained).join('\n'));
  return 0;
}

/** Explains every URL of `raws` against the state, queue and database of `o`. */
export async function explainUrls(o: RunnerOptions, raws: readonly string[]): Promise<Explained[]> {
  const hash = await loadUrlHash();
  const L = stateLayout(o.state);
  const runs = runsLog(o.state).tail();
  const last = lastCommitted(runs);
  const settings = { keepMs: last?.keep_ms ?? o.keepMs, resendMs: last?.resend_after_ms ?? o.resendAfterMs };
  const asOf = jobNow(runs, settings.keepMs);
  const out: Explained[] = raws.map((input) => {
    const c = urlIdentity(input, hash);
    const known = 'invalid' in c ? { url: null, id: null, domain: null, invalid: c.invalid } : { url: c.url, id: c.id, domain: c.domain, invalid: null };
    return {
      input,
      ...known,
      owner: null,
      pick: null,
      current: null,
      carried: null,
      sent_in: [],
      sent_timestamp: null,
      sent_by: null,
      rejected_in: [],
      rejected_more: 0,
      as_of: asOf,
      verdict: '',
    };
  });
  const cap = last?.max_per_domain ?? o.maxPerDomain;
  for (const e of out) if (e.id !== null) e.carried = carriedEntry(L.carry, runs, e.id, cap);
  await withOwners(o, out);
  for (const e of out) if (e.id !== null) e.current = currentEntry(L.currentLog, e.id, settings);
  for (const e of out) if (e.current !== null) e.sent_by = sentByOther(runs, e.current.timestamp);
  findSent(o.queueDir, out);
  await findRejected(L.rejects, out, hash);
  for (const e of out) e.verdict = verdictOf(e, asOf, settings.keepMs);
  return out;
}

/** Sets owner, or pick when there is none, for every URL with a domain; a database missing beside a state with no trace of the job names the likely cause. */
async function withOwners(o: { db: string; dbTimeouts?: Timeouts; state: string; config: string | null }, out: Explained[]): Promise<void> {
  if (!out.some((e) => e.domain !== null)) return;
  let view: PartnerView;
  try {
    view = await PartnerView.open(o.db, o.dbTimeouts);
  } catch (err) {
    const hint = err instanceof DataError && err.code === 'NO_DB' ? noStateHint(o) : null;
    if (hint === null) throw err;
    throw new DataError('NO_DB', `no such database, and ${hint} Give the options the cron uses (its --config)`, (err as DataError).place);
  }
  try {
    for (const e of out) {
      if (e.domain === null) continue;
      e.owner = await view.owner(e.domain);
      if (e.owner === null) e.pick = await view.pickNow();
    }
  } finally {
    await view.close();
  }
}

/** current_log's entry for `id`, or null. */
function currentEntry(file: string, id: string, s: { keepMs: number; resendMs: number }): CurrentEntry | null {
  const f = findById(file, id);
  if (f === null) return null;
  const ts = timestampToMs(f[1]!);
  return {
    timestamp: f[1]!,
    updatetag: f[2]!,
    hits: f[3]!,
    due_at: formatTimestamp(new Date(ts + s.resendMs)),
    kept_until: formatTimestamp(new Date(ts + s.keepMs)),
  };
}

/** The carry's record of `id` (`carry`: STATE/carry), with the committed run of `records` whose now is its decision, or null when it does not wait. */
function carriedEntry(carry: string, records: readonly unknown[], id: string, cap: number | null): CarriedEntry | null {
  const f = findById(carry, id);
  if (f === null || f.length < 7) return null;
  const decided = f[6]!;
  const by = (records as Partial<RunRecord>[]).find((r) => r.status === 'ok' && r.now === decided && typeof r.run === 'string');
  return { decided, since_run: by?.run ?? null, cap };
}

/** Fills sent_in: the queue files (QUEUE/<yacobot>/<run>.tsv, newest run last) whose records include each URL's id. */
function findSent(queueDir: string, out: Explained[]): void {
  const ids = out.flatMap((e) => (e.id === null ? [] : [e.id]));
  if (ids.length === 0) return;
  for (const y of dirNames(queueDir).filter((d) => /^[1-9]\d*$/.test(d))) {
    for (const f of dirNames(path.join(queueDir, y)).filter((n) => n.endsWith('.tsv') && !n.startsWith('.'))) {
      const file = path.join(queueDir, y, f);
      let found: Set<string>;
      try {
        found = idsInFile(file, ids);
      } catch {
        continue; // taken away by its Yacobot meanwhile
      }
      for (const e of out) if (e.id !== null && found.has(e.id)) e.sent_in.push(file);
    }
  }
  for (const e of out) e.sent_in.sort((a, b) => (path.basename(a) < path.basename(b) ? -1 : path.basename(a) > path.basename(b) ? 1 : 0));
  for (const e of out) e.sent_timestamp = sentTimestamp(e);
}

/** The timestamp of the URL's record in the newest queue file that holds it, or null. */
function sentTimestamp(e: Explained): string | null {
  const newest = e.sent_in.at(-1);
  if (newest === undefined || e.id === null) return null;
  try {
    return recordById(newest, e.id)?.[1] ?? null;
  } catch {
    return null; // taken away by its Yacobot meanwhile
  }
}

/** The entries of directory `dir`, sorted; none when it cannot be read. */
function dirNames(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** Fills rejected_in (the first MAX_REJECT_LINES) and rejected_more: the lines of STATE/rejects/*.tsv and rejects/failed/*.tsv whose URL is the input or has its id. */
async function findRejected(dir: string, out: Explained[], hash: UrlHash): Promise<void> {
  const files = [...dirNames(dir).map((f) => path.join(dir, f)), ...dirNames(path.join(dir, 'failed')).map((f) => path.join(dir, 'failed', f))];
  const ids = new Map<string, string | null>();
  for (const file of files.filter((f) => f.endsWith('.tsv') && fs.statSync(f, { throwIfNoEntry: false })?.isFile())) {
    await eachReject(file, (r) => {
      if (r.url === null) return;
      for (const e of out) {
        if (r.url !== e.input && (e.id === null || idOfReject(r.url, ids, hash) !== e.id)) continue;
        if (e.rejected_in.length < MAX_REJECT_LINES) e.rejected_in.push({ file, line: r.line, reason: r.reason });
        else e.rejected_more++;
      }
    });
  }
}

/** The id of a rejected line's URL (null when the URL itself is what was rejected), remembered per URL. */
function idOfReject(url: string, seen: Map<string, string | null>, hash: UrlHash): string | null {
  let id = seen.get(url);
  if (id === undefined) {
    const c = urlIdentity(url, hash);
    id = 'invalid' in c ? null : c.id;
    if (seen.size < 100_000) seen.set(url, id);
  }
  return id;
}

/** The explanation for a person, one field a line. */
export function humanExplained(e: Explained): string {
  const lines = [`${e.input}`];
  if (e.url !== null) lines.push(`  url: ${e.url}`, `  id: ${e.id}`, `  domain: ${e.domain}`);
  else lines.push(`  invalid: ${e.invalid}`);
  if (e.url !== null)
    lines.push(`  owner: ${e.owner ? yacobotName(e.owner) : `none (least-loaded would pick ${e.pick ? yacobotName(e.pick) : 'no active Yacobot'})`}`);
  const c = e.current;
  lines.push(
    c
      ? `  current: ${c.timestamp}, updatetag '${c.updatetag}', ${c.hits} hits; due again ${c.due_at}, forgotten ${c.kept_until}`
      : '  current: not in current_log',
  );
  if (e.carried !== null)
    lines.push(`  carried: waiting in the carry, decided at ${e.carried.decided}${e.carried.since_run ? ` by run ${e.carried.since_run}` : ''}`);
  for (const f of e.sent_in) lines.push(`  sent in: ${f}`);
  if (e.sent_by !== null) lines.push(`  sent by: master ${e.sent_by.master} in ${e.sent_by.run} (this master remembered the hour, published nothing)`);
  for (const r of e.rejected_in) lines.push(`  rejected in: ${r.file}:${r.line}: ${r.reason}`);
  if (e.rejected_more > 0) lines.push(`  rejected in: ${e.rejected_more} more line(s) not listed`);
  lines.push(`  verdict: ${e.verdict}`);
  return lines.join('\n') + '\n';
}
