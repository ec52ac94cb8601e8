// URL identity follows the parser (SPEC "Runs"): the canonical URL, and so the id and
// the domain, comes from the runtime's WHATWG URL parser (ada, inside Node.js), which
// changes between Node.js releases. The state records what produced its ids
// (settings.json's keyed_by); the first run under another parser re-keys current_log
// before its hour: each URL re-canonicalized and re-hashed, its domain retaken, the
// log re-sorted in the usual memory bound, entries that now share an id merged as
// group-sum merges them. The re-keyed log is staged in the run's work area and read
// by join-current in place of current_log, so it reaches the state only through the
// run's own commit (with the new keyed_by): a crash before it leaves the old state,
// which the rerun re-keys again.
//
// What re-parsing cannot recover: a host the old parser mapped with a loss. Node 20's
// parser (ada 2.9) maps the capital sharp s (U+1E9E) to "ss", Node 24's (ada 4) to ß:
// a `ss` in an old canonical host may have been either. For such characters (found
// by comparing the stored parser's answers for probe hosts with this one's), the
// re-key reads the hour's reflog: each URL whose host has one gets, besides its own
// canonical form, the old parser's (the character replaced as the old parser did),
// and a current_log entry under that old form is copied to the new form. keyed_by
// keeps the old parser's probes for --keep after the re-key (`legacy`), and the runs
// until then make the same copies for their hours, when current_log holds such an entry.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { DataError, formatPlace, visibleName } from '../core/errors.js';
import { FileLineReader } from '../core/lines.js';
import { U_DOMAIN, U_HITS, U_TAG, U_TS, U_URL, checkUrlRecord } from '../core/records.js';
import { addHits } from '../core/hits.js';
import { parseSize } from '../core/size.js';
import { formatTimestamp, timestampToMs } from '../core/time.js';
import { RecordBatch, RecordSorter } from '../core/sorter.js';
import { FileWriter } from '../core/writers.js';
import { DEFAULT_MAX_URL_BYTES, canonicalize, idText, loadUrlHash, type UrlHash, type UrlOptions } from '../core/url.js';
import { PROG, type RunnerOptions } from './options.js';
import type { RunPaths } from './plan.js';
import { settingsFile } from './settings.js';

/** How the runner keys URLs: analyze-dump's defaults (the runner passes no keying option). */
export const RUNNER_URL_OPTIONS: UrlOptions = { maxUrlBytes: DEFAULT_MAX_URL_BYTES, dropParams: null, sortQuery: false, domainMode: 'registrable' };

/** What produced a state's ids: the parser's versions and the keying options, as settings.json's keyed_by holds them. */
export interface KeyedBy {
  ada: string;
  icu: string | null;
  unicode: string | null;
  /** The Node.js release (said, not compared: the three above decide). */
  node: string;
  domain_mode: UrlOptions['domainMode'];
  drop_params: string[] | null;
  sort_query: boolean;
  max_url_bytes: number;
  /** The host the parser makes of `x<c>x.de` for each IDNA deviation character c (null: refused). */
  idna: Record<string, string | null>;
  /**
   * After a re-key from a parser that lost characters: its probes, and until when
   * current_log may still hold entries it keyed (the re-key run's now plus --keep).
   */
  legacy?: { idna: Record<string, string | null>; until: string };
}

/**
 * The IDNA deviation characters (and the capital sharp s) with what transitional
 * processing makes of them: a parser that maps one so loses it.
 */
const DEVIATIONS: Record<string, string> = { '\u1e9e': 'ss', '\u00df': 'ss', '\u03c2': '\u03c3', '\u200d': '', '\u200c': '' };

/**
 * The keying of a state with no record: the previous release, which ran on Node.js 20
 * only (ada 2.9.2, ICU 78.2, Unicode 17.0 as measured on 20.20.2; the probes are its answers).
 */
export const UNKNOWN_KEYING: KeyedBy = {
  ada: 'unknown',
  icu: 'unknown',
  unicode: 'unknown',
  node: 'unknown',
  domain_mode: 'registrable',
  drop_params: null,
  sort_query: false,
  max_url_bytes: DEFAULT_MAX_URL_BYTES,
  idna: { '\u1e9e': 'xssx.de', '\u00df': 'xn--xx-gia.de', '\u03c2': 'xn--xx-sbc.de', '\u200d': null, '\u200c': null },
};

/** The host this runtime's parser makes of `http://<host>/`, or null when it refuses it. */
function hostHere(host: string): string | null {
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return null;
  }
}

/** What keys URLs in this process: this runtime's parser with the runner's keying options. */
export function keyedByHere(): KeyedBy {
  const v = process.versions as Record<string, string | undefined>;
  return {
    ada: v.ada ?? 'none',
    icu: v.icu ?? null,
    unicode: v.unicode ?? null,
    node: process.version,
    domain_mode: RUNNER_URL_OPTIONS.domainMode,
    drop_params: RUNNER_URL_OPTIONS.dropParams,
    sort_query: RUNNER_URL_OPTIONS.sortQuery,
    max_url_bytes: RUNNER_URL_OPTIONS.maxUrlBytes,
    idna: Object.fromEntries(Object.keys(DEVIATIONS).map((c) => [c, hostHere(`x${c}x.de`)])),
  };
}

/** Whether two keyings give every URL the same id and domain: the same parser versions and keying options. */
export function sameKeying(a: KeyedBy, b: KeyedBy): boolean {
  const key = (k: KeyedBy) => JSON.stringify([k.ada, k.icu, k.unicode, k.domain_mode, k.drop_params, k.sort_query, k.max_url_bytes]);
  return key(a) === key(b);
}

/** `x` as a KeyedBy when it has the shape of one, else null. */
function asKeyedBy(x: unknown): KeyedBy | null {
  const k = x as Partial<KeyedBy> | null;
  if (k === null || typeof k !== 'object' || typeof k.ada !== 'string' || typeof k.max_url_bytes !== 'number' || typeof k.idna !== 'object' || k.idna === null)
    return null;
  return k as KeyedBy;
}

/** The keying stored with the state (settings.json's keyed_by), or UNKNOWN_KEYING when it holds none. */
export function storedKeying(state: string): KeyedBy {
  try {
    return asKeyedBy((JSON.parse(fs.readFileSync(settingsFile(state), 'utf8')) as { keyed_by?: unknown }).keyed_by) ?? UNKNOWN_KEYING;
  } catch {
    return UNKNOWN_KEYING;
  }
}

/**
 * The characters the `from` parser lost that this one keeps, with what `from` made of
 * each: those for which `from`'s probe host is this parser's host of the probe with the
 * character replaced as transitional processing replaces it, and not this parser's own.
 */
export function lostCharacters(from: KeyedBy, to: KeyedBy): Map<string, string> {
  const lost = new Map<string, string>();
  for (const [c, mapped] of Object.entries(DEVIATIONS)) {
    const before = from.idna[c];
    if (before !== undefined && before !== null && before !== to.idna[c] && before === hostHere(`x${mapped}x.de`)) lost.set(c, mapped);
  }
  return lost;
}

/**
 * What a run committed at `now` with --keep `keepMs` stores as keyed_by: this runtime's
 * keying, and a legacy (KeyedBy.legacy) when the run re-keyed from a parser that lost
 * characters, or the state's own while it lasts.
 */
export function keyingToStore(state: string, now: string, keepMs: number, rekeyed: boolean): KeyedBy {
  const here = keyedByHere();
  const stored = storedKeying(state);
  if (rekeyed && lostCharacters(stored, here).size > 0) {
    return { ...here, legacy: { idna: stored.idna, until: formatTimestamp(new Date(timestampToMs(now) + keepMs)) } };
  }
  const legacy = sameKeying(stored, here) ? liveLegacy(stored, now) : null;
  return legacy === null ? here : { ...here, legacy };
}

/** The legacy `k` carries if it lasts beyond `now`, else null. */
function liveLegacy(k: KeyedBy, now: string): NonNullable<KeyedBy['legacy']> | null {
  const l = k.legacy;
  return l !== undefined && typeof l.until === 'string' && typeof l.idna === 'object' && l.idna !== null && now < l.until ? l : null;
}

/** The `rekeyed` member of a run's record. */
export interface RekeyReport {
  /** Entries of current_log read. */
  urls: number;
  /** Entries whose canonical URL changed. */
  changed: number;
  /** Entries merged into another that now has their id. */
  merged: number;
  /** Entries whose URL this parser refuses (no reflog line can give it again): dropped. */
  dropped: number;
  /** Copies made under the new form of an hour's URL whose host had a character the old parser lost. */
  aliased: number;
  /** Only copies were made (a later run while KeyedBy.legacy lasts): `from` and `to` are the same parser. */
  aliases_only?: true;
  /** Distinct domains spelled otherwise than before: new to the partner database. */
  domains_changed: number;
  entries_out: number;
  from: { ada: string; icu: string | null; unicode: string | null; node: string };
  to: { ada: string; icu: string | null; unicode: string | null; node: string };
  seconds: number;
}

/** One URL under its new key: id (16 hex digits), domain and canonical URL. */
interface Keyed {
  id: string;
  domain: string;
  url: string;
}

/** Most alias pairs taken from one hour's reflog (each a few hundred bytes). */
const MAX_ALIASES = 100_000;

/**
 * Where `raw`'s host is, as a special-scheme URL's: after the scheme's ':' and any
 * slashes, up to the first of / \ ? #, after the last '@' (the user info) before it.
 */
function hostSpan(raw: string): [number, number] {
  let s = raw.indexOf(':') + 1;
  while (raw[s] === '/' || raw[s] === '\\') s++;
  let e = s;
  while (e < raw.length && !'/\\?#'.includes(raw[e]!)) e++;
  const at = raw.lastIndexOf('@', e - 1);
  return [at >= s ? at + 1 : s, e];
}

/** The percent-encoded UTF-8 of `c`, lower-case (`%e1%ba%9e`). */
const percentOf = (c: string) => [...Buffer.from(c, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

/** `text` with each of `lost`'s characters, written or percent-encoded (any case), replaced by what the old parser made of it. */
function replaceLost(text: string, lost: Map<string, string>): string {
  for (const [c, mapped] of lost)
    text = text
      .split(c)
      .join(mapped)
      .replace(new RegExp(percentOf(c), 'gi'), mapped);
  return text;
}

/** Most bytes of a reflog line looked at for aliases (analyze-dump rejects longer ones). */
const MAX_LINE = 1 << 20;

/** Calls `fn` with each LF-ended line of `file` (the last one too), as bytes; lines over MAX_LINE are skipped. */
function forEachLine(file: string, fn: (line: Buffer) => void): void {
  const fd = fs.openSync(file, 'r');
  try {
    const block = Buffer.allocUnsafe(1 << 20);
    let carry: Buffer[] = [];
    let carried = 0;
    for (let n = fs.readSync(fd, block); n > 0; n = fs.readSync(fd, block)) {
      let from = 0;
      for (let nl = block.indexOf(10, from); nl !== -1 && nl < n; nl = block.indexOf(10, from)) {
        if (carried + nl - from <= MAX_LINE) fn(carried > 0 ? Buffer.concat([...carry, block.subarray(from, nl)]) : block.subarray(from, nl));
        carry = [];
        carried = 0;
        from = nl + 1;
      }
      if (from < n && carried + n - from <= MAX_LINE) carry.push(Buffer.from(block.subarray(from, n)));
      carried += n - from;
    }
    if (carried > 0 && carried <= MAX_LINE) fn(Buffer.concat(carry));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The aliases of an hour's reflog: for each URL whose host holds a character of `lost`,
 * the id of its old canonical form (re-keyed) with its new key, when the two differ.
 * At most MAX_ALIASES; `skipped` counts those beyond.
 */
export function hourAliases(reflog: string, lost: Map<string, string>, hash: UrlHash): { aliases: Map<string, Keyed[]>; skipped: number } {
  const aliases = new Map<string, Keyed[]>();
  let skipped = 0;
  if (lost.size === 0) return { aliases, skipped };
  const literal = [...lost.keys()].map((c) => Buffer.from(c, 'utf8'));
  const percent = [...lost.keys()].map(percentOf);
  const mayHold = (b: Buffer) =>
    literal.some((n) => b.includes(n)) || (b.includes(37 /* % */) && percent.some((p) => b.toString('latin1').toLowerCase().includes(p)));
  forEachLine(reflog, (bytes) => {
    if (!mayHold(bytes)) return;
    const raw = bytes.toString('utf8').replace(/\r$/, '').split('\t')[4];
    if (raw === undefined) return;
    const [s, e] = hostSpan(raw);
    const now = canonicalize(raw, RUNNER_URL_OPTIONS);
    const before = canonicalize(raw.slice(0, s) + replaceLost(raw.slice(s, e), lost) + raw.slice(e), RUNNER_URL_OPTIONS);
    if ('reason' in now || 'reason' in before || now.url === before.url) return;
    const oldId = idText(hash(before.url));
    const list = aliases.get(oldId) ?? [];
    if (list.some((k) => k.url === now.url)) return;
    if (list.length === 0 && aliases.size >= MAX_ALIASES) {
      skipped++;
      return;
    }
    list.push({ id: idText(hash(now.url)), domain: now.domain, url: now.url });
    aliases.set(oldId, list);
  });
  return { aliases, skipped };
}

/** What rekeyLog counts. */
type RekeyCounts = Pick<RekeyReport, 'urls' | 'changed' | 'merged' | 'dropped' | 'aliased' | 'domains_changed' | 'entries_out'>;

/** Where re-keyed records are collected: a RecordBatch handed to the sorter every MiB. */
class RekeySink {
  private readonly batch = new RecordBatch(2 << 20, 1 << 14);
  constructor(private readonly sorter: RecordSorter) {}

  /** Adds the entry `f` (URL record fields) under the key `k`. */
  add(k: Keyed, f: readonly string[]): void {
    const text = `${k.id}\t${f[U_TS]}\t${f[U_TAG]}\t${f[U_HITS]}\t${k.domain}\t${k.url}\n`;
    const b = this.batch;
    b.reserve(Buffer.byteLength(text));
    const end = b.pos + b.buf.write(text, b.pos, 'utf8');
    b.commit(end, parseInt(k.id.slice(0, 8), 16), parseInt(k.id.slice(8), 16), Number(f[U_TS]));
    if (b.pos >= 1 << 20) this.flush();
  }

  /** Hands what was collected to the sorter. */
  flush(): void {
    this.sorter.addPacked(this.batch.take());
  }
}

/**
 * Reads the current_log `input` into `sink`, each entry under its new key (this
 * parser's canonical form of its URL, its id and domain) and a copy under each alias
 * of that id; counts what changed. An entry this parser refuses is dropped and counted;
 * a malformed one is a DataError naming its line.
 */
function readRekeyed(input: string, sink: RekeySink, aliases: Map<string, Keyed[]>, hash: UrlHash): RekeyCounts {
  const c: RekeyCounts = { urls: 0, changed: 0, merged: 0, dropped: 0, aliased: 0, domains_changed: 0, entries_out: 0 };
  const domains = new Set<string>();
  const reader = new FileLineReader(input);
  const line = { buf: Buffer.alloc(0) as Uint8Array, start: 0, end: 0 };
  try {
    while (reader.next(line)) {
      const f = Buffer.from(line.buf.buffer, line.buf.byteOffset + line.start, line.end - line.start)
        .toString('utf8')
        .split('\t');
      const bad = checkUrlRecord(f);
      if (bad !== null) throw new DataError('BAD_RECORD', bad, { file: input, line: reader.lineNo });
      c.urls++;
      const k = canonicalize(f[U_URL]!, RUNNER_URL_OPTIONS);
      if ('reason' in k) {
        c.dropped++;
        continue;
      }
      if (k.url !== f[U_URL]) c.changed++;
      if (k.domain !== f[U_DOMAIN]) domains.add(k.domain);
      const id = idText(hash(k.url));
      sink.add({ id, domain: k.domain, url: k.url }, f);
      for (const a of aliases.get(id) ?? []) {
        c.aliased++;
        if (a.domain !== k.domain) domains.add(a.domain);
        sink.add(a, f);
      }
    }
  } finally {
    reader.close();
  }
  sink.flush();
  c.domains_changed = domains.size;
  return c;
}

/**
 * Writes the sorted records of `sorter` to `output`, entries that share an id merged
 * as group-sum merges them (the latest timestamp, the last non-empty updatetag, the
 * hits summed); returns the entries written and merged away.
 */
async function writeMerged(sorter: RecordSorter, output: string): Promise<{ out: number; merged: number }> {
  const w = new FileWriter(output);
  let pending: string[] | null = null;
  let out = 0;
  let merged = 0;
  const put = () => {
    if (pending === null) return;
    w.write(pending.join('\t') + '\n');
    out++;
  };
  await sorter.drain((chunk) => {
    for (const l of chunk.toString('utf8').split('\n')) {
      if (l === '') continue;
      const f = l.split('\t');
      if (pending === null || pending[0] !== f[0]) {
        put();
        pending = f;
        continue;
      }
      merged++;
      pending[U_TS] = f[U_TS]!; // sorted by (id, timestamp): the later one
      if (f[U_TAG] !== '') pending[U_TAG] = f[U_TAG]!;
      pending[U_HITS] = addHits(pending[U_HITS]!, f[U_HITS]!);
    }
  });
  put();
  w.close(true);
  return { out, merged };
}

/**
 * Re-keys the current_log `input` into `output` (see readRekeyed), sorted by (id,
 * timestamp) within `memoryBytes` (spilling to `tmpDir`), entries that share an id
 * merged (writeMerged).
 */
export async function rekeyLog(
  input: string,
  output: string,
  aliases: Map<string, Keyed[]>,
  hash: UrlHash,
  memoryBytes: number,
  tmpDir: string,
): Promise<RekeyCounts> {
  const sorter = new RecordSorter({ memoryBytes, tmpDir });
  try {
    const c = readRekeyed(input, new RekeySink(sorter), aliases, hash);
    const { out, merged } = await writeMerged(sorter, output);
    return { ...c, merged, entries_out: out };
  } finally {
    sorter.dispose();
  }
}

/** analyze-dump's memory bound, which the re-key keeps too (it runs before the chain). */
const DEFAULT_MEMORY = 256 << 20;

/** The versions a report names of a keying. */
const versionsOf = (k: KeyedBy) => ({ ada: k.ada, icu: k.icu, unicode: k.unicode, node: k.node });

/** A keying as a warning names it. */
function parserName(k: KeyedBy): string {
  return k === UNKNOWN_KEYING || k.ada === 'unknown'
    ? "an unrecorded parser (taken as Node.js 20's)"
    : `ada ${k.ada} (Node.js ${k.node}, ICU ${k.icu}, Unicode ${k.unicode})`;
}

/** Says that run `run` re-keyed current_log, on stderr and in the log. */
function warnRekeyed(log: Logger, run: string, r: RekeyReport, from: KeyedBy, to: KeyedBy, skipped: number): void {
  log.warn({ run, rekeyed: r, aliases_skipped: skipped }, 'current_log re-keyed for another URL parser');
  process.stderr.write(
    `${PROG}: warning: ${visibleName(run)}: current_log was keyed by ${parserName(from)}, this runtime keys by ${parserName(to)}: ` +
      `re-keyed its ${r.urls} URLs before the hour (${r.changed} changed, ${r.merged} merged, ${r.dropped} dropped, ${r.aliased} copied for this hour's URLs); ` +
      `${r.domains_changed} domains are spelled anew and are new to the partner database (see "Upgrading Node.js" in docs/operations.md)\n`,
  );
  if (skipped > 0)
    process.stderr.write(
      `${PROG}: warning: ${visibleName(run)}: more than ${MAX_ALIASES} URLs of this hour have a host the old parser spelled otherwise; ${skipped} of them may be sent again\n`,
    );
}

/** Whether some entry of the current_log `file` has one of the ids `ids` holds. */
function anyIdIn(file: string, ids: Map<string, unknown>): boolean {
  if (ids.size === 0) return false;
  const reader = new FileLineReader(file);
  const line = { buf: Buffer.alloc(0) as Uint8Array, start: 0, end: 0 };
  try {
    while (reader.next(line)) if (ids.has(Buffer.from(line.buf.buffer, line.buf.byteOffset + line.start, 16).toString('latin1'))) return true;
  } finally {
    reader.close();
  }
  return false;
}

/**
 * The aliases of the hour `reflog` for the characters `from` lost and `to` keeps (none
 * when the reflog cannot be read: the chain fails on it, naming it).
 */
function aliasesOf(reflog: string, from: KeyedBy, to: KeyedBy, hash: UrlHash): ReturnType<typeof hourAliases> {
  try {
    return hourAliases(reflog, lostCharacters(from, to), hash);
  } catch {
    return { aliases: new Map(), skipped: 0 };
  }
}

/**
 * Before run `p`'s hour (its now `now`): when STATE/current_log was keyed otherwise
 * than this process keys (keyedByHere; a state with no record counts as
 * UNKNOWN_KEYING), re-keys it into the run's work area, where join-current reads it
 * (p.currentIn), and says so; while a legacy lasts (KeyedBy.legacy), does so for the
 * copies alone when the hour has URLs whose old form current_log holds. Null when there
 * was nothing to do; else the report, or the error that fails the run.
 */
export async function rekeyBeforeHour(o: RunnerOptions, log: Logger, p: RunPaths, now: string): Promise<{ report: RekeyReport } | { error: string } | null> {
  const current = path.join(o.state, 'current_log');
  const stored = storedKeying(o.state);
  const to = keyedByHere();
  const same = sameKeying(stored, to);
  const legacy = same ? liveLegacy(stored, now) : null;
  if ((same && legacy === null) || !fs.existsSync(current)) return null;
  const from = legacy === null ? stored : { ...stored, idna: legacy.idna };
  const t0 = Date.now();
  const hash = await loadUrlHash();
  const found = aliasesOf(p.reflog, from, to, hash);
  if (same && !anyIdIn(current, found.aliases)) return null;
  const staged = path.join(p.work, 'current_log.rekeyed');
  let counts: RekeyCounts;
  try {
    counts = await rekeyLog(current, staged, found.aliases, hash, (o.memory === null ? null : parseSize(o.memory)) ?? DEFAULT_MEMORY, p.tmp);
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return { error: `re-keying current_log for this runtime's URL parser: ${formatPlace(err.place, err.message)}` };
  }
  p.currentIn = staged;
  const report: RekeyReport = {
    ...counts,
    ...(same && { aliases_only: true as const }),
    from: versionsOf(stored),
    to: versionsOf(to),
    seconds: Math.round((Date.now() - t0) / 100) / 10,
  };
  if (same) log.info({ run: p.name, rekeyed: report, aliases_skipped: found.skipped }, "current_log entries of the earlier parser copied for this hour's URLs");
  else warnRekeyed(log, p.name, report, stored, to, found.skipped);
  return { report };
}
