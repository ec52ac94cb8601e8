// URL identity follows the parser (SPEC "Runs"): the canonical URL, and so the id and
// the domain, comes from the runtime's WHATWG URL parser (ada, inside Node.js), which
// changes between Node.js releases. The state records what produced its ids
// (settings.json's keyed_by); the first run under another parser re-keys the memory,
// current_log and the carry, before its hour (rekey-log.ts: each URL re-canonicalized
// and re-hashed, its domain retaken, the file re-sorted, entries that now share an id
// merged). The re-keyed files are staged in the run's work area and read by
// join-current and limit-domains in place of the state's, so they reach the state only
// through the run's own commit (with the new keyed_by): a crash before it leaves the
// old state, which the rerun re-keys again.
//
// What re-parsing cannot recover: a host the old parser mapped with a loss. Node 20's
// parser (ada 2.9) maps the capital sharp s (U+1E9E) to "ss", Node 24's (ada 4) to ß:
// a `ss` in an old canonical host may have been either. For such characters (found
// by comparing the stored parser's answers for probe hosts with this one's), the
// re-key reads the hour's reflog: each URL whose host has one gets, besides its own
// canonical form, the old parser's (the character replaced as the old parser did); a
// current_log entry under that old form is copied to the new form (held back either
// way), a carry entry moved to it (sent once, as the hour spells it). keyed_by keeps the
// old parser's probes for --keep after the re-key (`legacy`), and the runs until then
// do the same for their hours, when current_log or the carry holds such an entry.
import * as fs from 'node:fs';
import { DataError, formatPlace, visibleName } from '../../core/errors.js';
import { FileLineReader } from '../../core/lines.js';
import { parseSize } from '../../core/size.js';
import { canonicalize, idText, loadUrlHash, type UrlHash } from '../../core/url.js';
import type { RunnerOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { carryWaits } from '../state/carry.js';
import { type KeyedBy, RUNNER_URL_OPTIONS, UNKNOWN_KEYING, keyedByHere, liveLegacy, lostCharacters, sameKeying, storedKeying } from '../state/keying.js';
import { type RunPaths, stagingLayout, stateLayout } from '../state/layout.js';
import type { RekeyCounts, RekeyReport } from '../state/run-record.js';
import type { RunProgress } from './progress.js';
import { type Keyed, type MemoryFile, rekeyLog } from './rekey-log.js';

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

/** Says that run `run` re-keyed current_log (and the carry), on stderr and in the log. */
function warnRekeyed(say: Say, run: string, r: RekeyReport, from: KeyedBy, to: KeyedBy, skipped: number): void {
  const c = r.carry;
  const carry =
    c === undefined
      ? ''
      : `, and the carry's ${c.urls} (${c.changed} changed, ${c.merged} merged, ${c.dropped} dropped, ${c.aliased} moved to this hour's spelling)`;
  say.warn(
    `${visibleName(run)}: current_log was keyed by ${parserName(from)}, this runtime keys by ${parserName(to)}: ` +
      `re-keyed its ${r.urls} URLs before the hour (${r.changed} changed, ${r.merged} merged, ${r.dropped} dropped, ${r.aliased} copied for this hour's URLs)${carry}; ` +
      `${r.domains_changed + (c?.domains_changed ?? 0)} domains are spelled anew and are new to the partner database (see "Upgrading Node.js" in docs/operations.md)`,
    { fields: { run, rekeyed: r, aliases_skipped: skipped }, msg: 'current_log re-keyed for another URL parser' },
  );
  if (skipped > 0)
    say.warn(
      `${visibleName(run)}: more than ${MAX_ALIASES} URLs of this hour have a host the old parser spelled otherwise; ${skipped} of them may be sent again`,
    );
}

/** Whether some entry of `file` (current_log or the carry) has one of the ids `ids` holds. */
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

/** current_log's counts when only the carry was re-keyed. */
const NONE: RekeyCounts = { urls: 0, changed: 0, merged: 0, dropped: 0, aliased: 0, domains_changed: 0, entries_out: 0 };

/** The files of the memory to re-key (`all`: every one there; else those that hold one of `aliases`' ids), each with where its re-keyed copy is staged. */
function filesToRekey(state: string, p: RunPaths, all: boolean, aliases: Map<string, unknown>): { kind: MemoryFile; file: string; staged: string }[] {
  const L = stateLayout(state);
  const S = stagingLayout(p.staging);
  const files = [
    { kind: 'current_log' as const, file: L.currentLog, staged: S.rekeyed, there: fs.existsSync(L.currentLog) },
    { kind: 'carry' as const, file: L.carry, staged: S.carryRekeyed, there: carryWaits(state) },
  ];
  return files.filter((f) => f.there && (all || anyIdIn(f.file, aliases)));
}

/**
 * Before run `p`'s hour (its now `now`): when the state was keyed otherwise than this
 * process keys (keyedByHere; a state with no record counts as UNKNOWN_KEYING), re-keys
 * current_log and the carry into the run's work area, where join-current and
 * limit-domains read them (p.currentIn, p.carryIn), and says so; while a legacy lasts
 * (KeyedBy.legacy), does so for the aliases alone, in each that holds an old form of the
 * hour's URLs. Null when there was nothing to do; else the report, or the error that
 * fails the run. `progress` is told how far it got.
 */
export async function rekeyBeforeHour(
  o: RunnerOptions,
  say: Say,
  p: RunPaths,
  now: string,
  progress?: RunProgress,
): Promise<{ report: RekeyReport } | { error: string } | null> {
  const stored = storedKeying(o.state);
  const to = keyedByHere();
  const same = sameKeying(stored, to);
  const legacy = same ? liveLegacy(stored, now) : null;
  if ((same && legacy === null) || filesToRekey(o.state, p, true, new Map()).length === 0) return null;
  const from = legacy === null ? stored : { ...stored, idna: legacy.idna };
  const t0 = Date.now();
  const hash = await loadUrlHash();
  const found = aliasesOf(p.reflog, from, to, hash);
  const files = filesToRekey(o.state, p, !same, found.aliases);
  if (files.length === 0) return null;
  const counts: Partial<Record<MemoryFile, RekeyCounts>> = {};
  for (const f of files) {
    const memory = (o.memory === null ? null : parseSize(o.memory)) ?? DEFAULT_MEMORY;
    const tick = (step: 'reading' | 'writing', urls: number) => {
      if (progress === undefined) return;
      progress.rekey = { file: f.kind, step, urls };
      progress.tick();
    };
    try {
      counts[f.kind] = await rekeyLog(f.file, f.staged, found.aliases, hash, memory, p.tmp, f.kind, tick);
    } catch (err) {
      if (!(err instanceof DataError)) throw err;
      return { error: `re-keying ${f.kind === 'carry' ? 'the carry' : f.kind} for this runtime's URL parser: ${formatPlace(err.place, err.message)}` };
    }
    if (f.kind === 'carry') p.carryIn = f.staged;
    else p.currentIn = f.staged;
  }
  const seconds = Math.round((Date.now() - t0) / 100) / 10;
  const report: RekeyReport = {
    ...(counts.current_log ?? NONE),
    ...(same && { aliases_only: true as const }),
    ...(counts.carry && { carry: counts.carry }),
    from: versionsOf(stored),
    to: versionsOf(to),
    seconds,
  };
  progress?.clear();
  if (same)
    say.log?.info(
      { run: p.name, rekeyed: report, aliases_skipped: found.skipped },
      "entries of the earlier parser copied (current_log) or moved (carry) for this hour's URLs",
    );
  else warnRekeyed(say, p.name, report, stored, to, found.skipped);
  return { report };
}
