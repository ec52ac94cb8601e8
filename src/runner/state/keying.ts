// What keyed a state's URLs (SPEC "Runs"): the canonical URL, and so the id and the
// domain, comes from the runtime's WHATWG URL parser (ada, inside Node.js), which changes
// between Node.js releases; settings.json's keyed_by records the parser and the keying
// options, and the probes that tell which characters an older parser lost (the re-key
// before a run: run/rekey.ts).
import * as fs from 'node:fs';
import { DEFAULT_URL_OPTIONS } from '../../core/reflog.js';
import { formatTimestamp, timestampToMs } from '../../core/time.js';
import { DEFAULT_MAX_URL_BYTES, type UrlOptions } from '../../core/url.js';
import { stateLayout } from './layout.js';

/** How the runner keys URLs: analyze-dump's defaults (the runner passes no keying option). */
export const RUNNER_URL_OPTIONS: UrlOptions = DEFAULT_URL_OPTIONS;

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
   * current_log or the carry may still hold entries it keyed (the re-key run's now plus
   * --keep, or --carry-keep with a cap when that is longer).
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
    return asKeyedBy((JSON.parse(fs.readFileSync(stateLayout(state).settings, 'utf8')) as { keyed_by?: unknown }).keyed_by) ?? UNKNOWN_KEYING;
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
 * What a run committed at `now` stores as keyed_by: this runtime's keying, and a legacy
 * (KeyedBy.legacy, for `keepMs`: the longest an entry stays in current_log or the carry)
 * when the run re-keyed from a parser that lost characters, or the state's own while it lasts.
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
export function liveLegacy(k: KeyedBy, now: string): NonNullable<KeyedBy['legacy']> | null {
  const l = k.legacy;
  return l !== undefined && typeof l.until === 'string' && typeof l.idna === 'object' && l.idna !== null && now < l.until ? l : null;
}
