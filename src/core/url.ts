// URL canonicalization (WHATWG URL), registrable domains (tldts, the Public Suffix
// List with private suffixes) and URL ids (XXH64 seed 0 via xxhash-wasm).
import xxhash from 'xxhash-wasm';
import { TAB, copyBytes, putBytes, putHex32 } from './bytes.js';
import { grown } from './arrays.js';
import { BytesIndex } from './bytesindex.js';
import { loadTldts } from './cjs.js';
import { MAX_DOMAIN_BYTES, domainTooLong, withoutTrailingDot } from './host.js';
import { ID_BYTES } from './records.js';
import { canonicalEnd } from './urlfast.js';

const { getDomain } = loadTldts();

export type DomainMode = 'registrable' | 'host';

export interface UrlOptions {
  /** Longest accepted URL in UTF-8 bytes, raw and canonical. */
  maxUrlBytes: number;
  /** Query parameter names to drop (globs, as parseParamGlobs gives them), or null. */
  dropParams: string[] | null;
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
 * fragment, with the optional query rewriting; and its domain (domainOfHost, or with
 * domainMode 'host' the host less one trailing dot). Returns a Reject for anything
 * that is not such a URL, and for a domain over MAX_DOMAIN_BYTES.
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
  const rewrite = Boolean(opts.dropParams) || opts.sortQuery;
  if (rewrite && u.search.length > 1) {
    u.hash = '';
    u.search = rewriteQuery(u.search.slice(1), opts.dropParams, opts.sortQuery);
    url = u.href;
  } else {
    // Cutting the serialization at its first '#' is `u.hash = ''` without a second
    // parse: WHATWG percent-encodes '#' everywhere before the fragment.
    url = u.href;
    const hash = url.indexOf('#');
    if (hash !== -1) url = url.slice(0, hash);
    // Then a '?' at the end is a bare one ('?' is percent-encoded before the query):
    // an empty query, which goes under a rewrite as a query left empty does.
    if (rewrite && url.charCodeAt(url.length - 1) === 63 /* ? */) url = url.slice(0, -1);
  }
  if (url.length > opts.maxUrlBytes) {
    // The serialization is ASCII (WHATWG percent-encodes the rest), so length is bytes.
    return { reason: 'URL too long', detail: `canonical form ${url.length} bytes, max ${opts.maxUrlBytes}` };
  }
  const domain = domainOf(host, opts.domainMode);
  const long = domainTooLong(domain.length);
  if (long !== null) return { reason: 'domain too long', detail: long };
  return { url, domain };
}

/** The domain of a canonical host: domainOfHost, or with domainMode 'host' the host less one trailing dot. */
function domainOf(host: string, mode: DomainMode): string {
  return mode === 'host' ? withoutTrailingDot(host) : domainOfHost(host);
}

/**
 * The domains of canonical hosts, by the hosts' bytes (a reflog's hosts repeat far
 * more than its URLs), for the last `max` hosts: each as ASCII bytes, copied into a
 * record as they are (a string would be encoded again for every record).
 */
class HostDomains {
  private readonly hosts = new BytesIndex();
  /** Host k's domain is `bytes[start[k], end[k])`; end[k] is -1 for a domain too long. */
  bytes: Buffer = Buffer.allocUnsafeSlow(1 << 16);
  start: Int32Array = new Int32Array(1024);
  end: Int32Array = new Int32Array(1024);
  private used = 0;

  constructor(
    private readonly mode: DomainMode,
    private readonly max: number,
  ) {}

  /** The number of host `b[s, e)` (its domain's bytes by `start` and `end`), or -1 when its domain is too long. */
  of(b: Buffer, s: number, e: number): number {
    if (this.hosts.size >= this.max) {
      this.hosts.clear();
      this.used = 0;
    }
    const k = this.hosts.add(b, s, e);
    if (!this.hosts.added) return this.end[k]! < 0 ? -1 : k;
    if (k === this.start.length) {
      this.start = grown(this.start);
      this.end = grown(this.end);
    }
    // A host in canonical form is ASCII, and so is its domain.
    const d = domainOf(b.toString('latin1', s, e), this.mode);
    if (domainTooLong(d.length) !== null) {
      this.end[k] = -1;
      return -1;
    }
    if (this.used + d.length > this.bytes.length) {
      const bigger = Buffer.allocUnsafeSlow(2 * this.bytes.length);
      copyBytes(this.bytes, 0, this.used, bigger, 0);
      this.bytes = bigger;
    }
    this.start[k] = this.used;
    this.used += this.bytes.write(d, this.used, 'latin1');
    this.end[k] = this.used;
    return k;
  }
}

/**
 * The registrable domain (public suffix + 1, private suffixes honoured) of a
 * canonical host; the host itself for IP addresses, single labels and hosts that
 * are themselves public suffixes (less one trailing dot), and for hosts with an
 * empty label anywhere.
 */
export function domainOfHost(host: string): string {
  if (host.charCodeAt(0) === 91 /* [ IPv6 */) return host;
  // An empty label anywhere (WHATWG accepts `.example.com`, `a..example.com`) makes
  // no registrable domain, as the Public Suffix List's own tests say of a leading
  // dot; tldts would answer "example.com" or ".co.uk" depending on where it is.
  if (host.charCodeAt(0) === 46 /* . */ || host.includes('..')) return withoutTrailingDot(host);
  const d = getDomain(host, { allowPrivateDomains: true, extractHostname: false });
  return d || withoutTrailingDot(host);
}

/** Parses a comma-separated glob list (`utm_*,callback,_`; `*` any run, `?` one character); null when it names none. */
export function parseParamGlobs(list: string): string[] | null {
  const globs = list
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g.length > 0);
  return globs.length === 0 ? null : globs;
}

/**
 * Whether `name` matches `glob` (`*` any run, `?` one UTF-16 unit). Greedy, going
 * back only to the last `*`: at most name length x glob length steps, where a
 * backtracking RegExp (`.*u.*u.*x`) took minutes on one hostile 8 KiB name.
 */
export function globMatch(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1;
  let mark = 0;
  while (n < name.length) {
    const c = g < glob.length ? glob.charCodeAt(g) : -1;
    if (c === 63 /* ? */ || (c === name.charCodeAt(n) && c !== 42)) {
      g++;
      n++;
    } else if (c === 42 /* * */) {
      star = g++;
      mark = n;
    } else if (star >= 0) {
      g = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.length && glob.charCodeAt(g) === 42) g++;
  return g === glob.length;
}

const matchesAny = (globs: string[], name: string) => globs.some((g) => globMatch(g, name));

/** Drops matching parameters and/or sorts by name; empty pairs (`&&`) go. */
function rewriteQuery(query: string, drop: string[] | null, sort: boolean): string {
  let pairs = query.split('&').filter((p) => p.length > 0);
  const nameOf = (p: string) => {
    const eq = p.indexOf('=');
    return eq === -1 ? p : p.slice(0, eq);
  };
  if (drop) {
    pairs = pairs.filter((p) => {
      const name = nameOf(p);
      if (matchesAny(drop, name)) return false;
      if (name.includes('%')) {
        try {
          return !matchesAny(drop, decodeURIComponent(name));
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

/** A URL id: XXH64 (seed 0) of the URL's UTF-8 bytes, as an unsigned 64-bit bigint; `raw` (when there) takes the bytes themselves. */
export type UrlHash = ((url: string) => bigint) & { raw?: (bytes: Uint8Array) => bigint };

/** Loads the URL-id function (xxhash-wasm). */
export async function loadUrlHash(): Promise<UrlHash> {
  const x = await xxhash();
  return Object.assign((url: string) => x.h64(url), { raw: (bytes: Uint8Array) => x.h64Raw(bytes) });
}

/** A URL id as the streams write it: 16 lower-case hex digits. */
export function idText(h: bigint): string {
  return h.toString(16).padStart(16, '0');
}

/** Loads the URL id as text (for checks and tools; the resolver writes its hex from the bigint). */
export async function loadUrlHasher(): Promise<(url: string) => string> {
  const hash = await loadUrlHash();
  return (url: string) => idText(hash(url));
}

/** A 64-bit id split into its 32-bit halves without BigInt arithmetic: written as one, read as two. */
const ID64 = new BigUint64Array(1);
const ID32 = new Uint32Array(ID64.buffer);
/** Which of ID32's entries holds the high half (the platform's byte order). */
const HI = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;

/** Hosts whose domains a UrlResolver with a URL memory remembers (about 1 MiB). */
const DOMAIN_CACHE_HOSTS = 1 << 14;

/** Bytes of raw URLs (keys) or of results (values) a UrlResolver holds before it starts over. */
const RESOLVER_BYTES = 4 << 20;

/** What UrlResolver.resolve takes for "canonicalEnd not known yet". */
export const NOT_SCANNED = -2;

/**
 * canonicalize() and the id for raw URL bytes. A URL already in canonical form (most
 * of a reflog's) is answered from its own bytes: its id hashed from them, its domain
 * from a memory of recent hosts. Any other URL's answer is remembered by its raw bytes,
 * so that a repeat costs a hash and a compare instead of a WHATWG parse, a suffix
 * lookup and an XXH64 (remembering the URLs in canonical form too cost more than it
 * saved: 61% of the bench's lines miss a memory of 65,536 URLs). Memory is bounded:
 * at `maxEntries`, or `maxBytes` (4 MiB) of keys or of results, it forgets
 * everything and starts over. With `maxEntries` 0 it remembers nothing.
 *
 * An answer is an entry number k: a reject (`rejected(k)`), or the record's id as
 * 16 bytes at `bytes[start[k]]`, then "domain TAB url" up to `end[k]`, and the id's
 * halves in `hi[k]`, `lo[k]`. It is valid until the next `resolve`.
 */
export class UrlResolver {
  readonly bytes: Buffer;
  readonly start: Int32Array;
  readonly end: Int32Array;
  readonly hi: Uint32Array;
  readonly lo: Uint32Array;
  private readonly keys = new BytesIndex();
  /** The domains of the hosts of URLs in canonical form. */
  private readonly domains: HostDomains;
  /** Whether a URL already in canonical form may be taken as it is (not when the query is rewritten). */
  private readonly fastPath: boolean;
  private readonly host = new Int32Array(2);
  private readonly rejects = new Map<number, Reject>();
  private used = 0;
  /** Where the remembered answers' bytes end: the answer not remembered goes after. */
  private readonly limit: number;
  /** Where `direct` puts a URL in canonical form, and views of it there by length. */
  private readonly urlAt: number;
  private readonly urlViews: (Uint8Array | undefined)[] = [];

  constructor(
    readonly opts: UrlOptions,
    private readonly hash: UrlHash,
    private readonly maxEntries = 1 << 16,
    private readonly maxBytes = RESOLVER_BYTES,
  ) {
    // Room for any one answer: a canonical URL is at most maxUrlBytes, its domain shorter;
    // then room for the answer not remembered (entry maxEntries), see `direct`.
    this.limit = Math.max(maxBytes, 2 * opts.maxUrlBytes + 64);
    this.urlAt = this.limit + ID_BYTES + MAX_DOMAIN_BYTES + 1;
    this.bytes = Buffer.allocUnsafeSlow(this.urlAt + opts.maxUrlBytes);
    this.domains = new HostDomains(opts.domainMode, maxEntries > 0 ? DOMAIN_CACHE_HOSTS : 1024);
    this.fastPath = !opts.dropParams && !opts.sortQuery;
    this.start = new Int32Array(maxEntries + 1);
    this.end = new Int32Array(maxEntries + 1);
    this.hi = new Uint32Array(maxEntries + 1);
    this.lo = new Uint32Array(maxEntries + 1);
  }

  /**
   * The answer for the raw URL `buf[s, e)`, decoded as UTF-8 if `utf8`, else as Latin-1
   * (ASCII). `scanned`, unless NOT_SCANNED, is canonicalEnd of the URL, with its host in
   * `host` (the reflog's native pass over a line finds them).
   */
  resolve(buf: Buffer, s: number, e: number, utf8: boolean, scanned = NOT_SCANNED, host = this.host): number {
    const fast = this.fastPath && e - s <= this.opts.maxUrlBytes;
    // A URL already in canonical form (most are) is taken as its bytes, without the parser
    // and without the memory, which would cost it about as much as the answer itself.
    const cut = !fast ? -1 : scanned !== NOT_SCANNED ? scanned : canonicalEnd(buf, s, e, host);
    const hk = cut < 0 ? -1 : this.domains.of(buf, host[0]!, host[1]!);
    // Without a memory every answer is entry 0, the last one's reject included.
    if (this.maxEntries === 0) {
      this.rejects.clear();
      this.used = 0;
    }
    if (hk >= 0) return this.direct(buf, s, cut, hk);
    let k = 0;
    if (this.maxEntries > 0) {
      if (this.keys.size >= this.maxEntries || this.keys.bytes + (e - s) > this.maxBytes) this.forget();
      k = this.keys.add(buf, s, e);
      if (!this.keys.added) return k;
    }
    const c = canonicalize(buf.toString(utf8 ? 'utf8' : 'latin1', s, e), this.opts);
    if ('reason' in c) {
      this.rejects.set(k, c);
      this.start[k] = this.end[k] = this.used;
      return k;
    }
    return this.keep(k, buf, s, e, c.domain, c.url);
  }

  /**
   * The answer for the URL in canonical form `buf[s, cut)` of host `hk` (HostDomains), as
   * entry maxEntries, not remembered. The URL is copied to `urlAt`, which does not move,
   * so that XXH64 reads it there through a view made once for each length (a view a URL
   * was garbage a line); the id and the domain are written before it.
   */
  private direct(buf: Buffer, s: number, cut: number, hk: number): number {
    const k = this.maxEntries;
    const out = this.bytes;
    const at = this.urlAt;
    const n = cut - s;
    putBytes(out, at, buf, s, cut);
    const raw = this.hash.raw;
    ID64[0] = raw ? raw((this.urlViews[n] ??= new Uint8Array(out.buffer, out.byteOffset + at, n))) : this.hash(out.toString('latin1', at, at + n));
    const hi = ID32[HI]!;
    const lo = ID32[1 - HI]!;
    const d = this.domains;
    const ds = d.start[hk]!;
    const de = d.end[hk]!;
    let p = at - 1 - (de - ds) - ID_BYTES;
    this.start[k] = p;
    p = putHex32(out, putHex32(out, p, hi), lo);
    p = putBytes(out, p, d.bytes, ds, de);
    out[p] = TAB;
    this.end[k] = at + n;
    this.hi[k] = hi;
    this.lo[k] = lo;
    return k;
  }

  /**
   * Stores answer `k` for the raw URL `buf[s, e)`: `domain`, the canonical URL `url`
   * (ASCII: WHATWG percent-encodes the rest; hosts are punycode) and its id; returns its
   * number (another if the memory had to start over).
   */
  private keep(k: number, buf: Buffer, s: number, e: number, domain: string, url: string): number {
    const need = ID_BYTES + domain.length + 1 + url.length;
    if (this.used + need > this.limit) {
      this.forget();
      if (this.maxEntries > 0) k = this.keys.add(buf, s, e);
    }
    this.used = this.put(k, this.used, domain, url);
    return k;
  }

  /** Writes answer `k` at `bytes[p]`: the id of `url`, `domain` TAB `url`; returns where it ends. */
  private put(k: number, p: number, domain: string, url: string): number {
    // Writing the hex from the id's halves costs less than asking xxhash-wasm for text
    // (measured: 145 against 320 ns a URL).
    ID64[0] = this.hash(url);
    const hi = ID32[HI]!;
    const lo = ID32[1 - HI]!;
    const out = this.bytes;
    this.start[k] = p;
    p = putHex32(out, putHex32(out, p, hi), lo);
    p += out.write(domain, p, 'latin1');
    out[p++] = TAB;
    p += out.write(url, p, 'latin1');
    this.end[k] = p;
    this.hi[k] = hi;
    this.lo[k] = lo;
    return p;
  }

  /** The reject for answer `k`, or undefined for a record. */
  rejected(k: number): Reject | undefined {
    return this.rejects.size === 0 ? undefined : this.rejects.get(k);
  }

  private forget(): void {
    this.keys.clear();
    this.rejects.clear();
    this.used = 0;
  }
}
