// URL canonicalization (WHATWG URL), registrable domains (tldts, the Public Suffix
// List with private suffixes) and URL ids (XXH64 seed 0 via xxhash-wasm).
import { getDomain } from 'tldts';
import xxhash from 'xxhash-wasm';

export type DomainMode = 'registrable' | 'host';

export interface UrlOptions {
  /** Longest accepted URL in UTF-8 bytes, raw and canonical. */
  maxUrlBytes: number;
  /** Query parameter names to drop (compiled glob list), or null. */
  dropParams: RegExp | null;
  /** Sort query parameters by name (stable for repeated names). */
  sortQuery: boolean;
  domainMode: DomainMode;
}

/** A reject: a short fixed reason (counted in the summary) and a detail for the operator. */
export interface Reject {
  reason: string;
  detail: string;
}

export interface CanonicalUrl {
  url: string;
  domain: string;
}

export const DEFAULT_MAX_URL_BYTES = 8192;

/**
 * Canonical form of an absolute http(s) URL: WHATWG serialization without the
 * fragment, with the optional query rewriting; and its domain. Returns a Reject for
 * anything that is not such a URL.
 */
export function canonicalize(raw: string, opts: UrlOptions): CanonicalUrl | Reject {
  if (raw.length > opts.maxUrlBytes || (raw.length * 3 > opts.maxUrlBytes && Buffer.byteLength(raw) > opts.maxUrlBytes)) {
    return { reason: 'URL too long', detail: `${Buffer.byteLength(raw)} bytes, max ${opts.maxUrlBytes}` };
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { reason: 'bad URL', detail: raw.includes(':') ? 'not a valid absolute URL' : 'not an absolute URL' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    return { reason: 'unsupported scheme', detail: u.protocol.slice(0, -1).slice(0, 40) };
  }
  const host = u.hostname;
  if (host === '') return { reason: 'bad URL', detail: 'no host' };
  let url: string;
  if ((opts.dropParams || opts.sortQuery) && u.search.length > 1) {
    u.hash = '';
    u.search = rewriteQuery(u.search.slice(1), opts.dropParams, opts.sortQuery);
    url = u.href;
  } else {
    // Cutting the serialization at its first '#' is `u.hash = ''` without a second
    // parse: WHATWG percent-encodes '#' everywhere before the fragment.
    url = u.href;
    const hash = url.indexOf('#');
    if (hash !== -1) url = url.slice(0, hash);
  }
  if (url.length > opts.maxUrlBytes) {
    // The serialization is ASCII (WHATWG percent-encodes the rest), so length is bytes.
    return { reason: 'URL too long', detail: `canonical form ${url.length} bytes, max ${opts.maxUrlBytes}` };
  }
  return { url, domain: opts.domainMode === 'host' ? host : domainOfHost(host) };
}

/**
 * The registrable domain (public suffix + 1, private suffixes honoured) of a
 * canonical host; the host itself for IP addresses, single labels, hosts that are
 * themselves public suffixes, and hosts with an empty label before their suffix.
 */
export function domainOfHost(host: string): string {
  if (host.charCodeAt(0) === 91 /* [ IPv6 */) return host;
  const d = getDomain(host, { allowPrivateDomains: true, extractHostname: false });
  // An empty label (WHATWG accepts `x.y..co.uk`) makes no registrable domain: tldts
  // would answer ".co.uk", a shared bucket no partner-db command can name.
  return d && d.charCodeAt(0) !== 46 /* . */ ? d : host;
}

/**
 * Compiles a comma-separated glob list (`utm_*,callback,_`; `*` any run, `?` one
 * character) into one anchored RegExp over parameter names.
 */
export function compileParamGlobs(list: string): RegExp | null {
  const globs = list
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g.length > 0);
  if (globs.length === 0) return null;
  const alts = globs.map((g) =>
    g.replace(/[.+^${}()|[\]\\*?]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`)),
  );
  return new RegExp(`^(?:${alts.join('|')})$`);
}

/** Drops matching parameters and/or sorts by name; empty pairs (`&&`) go. */
function rewriteQuery(query: string, drop: RegExp | null, sort: boolean): string {
  let pairs = query.split('&').filter((p) => p.length > 0);
  const nameOf = (p: string) => {
    const eq = p.indexOf('=');
    return eq === -1 ? p : p.slice(0, eq);
  };
  if (drop) {
    pairs = pairs.filter((p) => {
      const name = nameOf(p);
      if (drop.test(name)) return false;
      if (name.includes('%')) {
        try {
          return !drop.test(decodeURIComponent(name));
        } catch {
          return true;
        }
      }
      return true;
    });
  }
  if (sort) {
    const keyed = pairs.map((p, i) => ({ p, n: nameOf(p), i }));
    keyed.sort((a, b) => (a.n < b.n ? -1 : a.n > b.n ? 1 : a.i - b.i));
    pairs = keyed.map((k) => k.p);
  }
  return pairs.length ? `?${pairs.join('&')}` : '';
}

/** Returns the URL-id function: XXH64 (seed 0) of the UTF-8 bytes, 16 lower-case hex digits. */
export async function loadUrlHasher(): Promise<(url: string) => string> {
  const { h64ToString } = await xxhash();
  return (url: string) => {
    const h = h64ToString(url);
    return h.length === 16 ? h : h.padStart(16, '0');
  };
}
