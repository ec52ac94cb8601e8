// Host spellings shared by the URL code and the partner database, without loading
// the Public Suffix List (tldts) into the stages that only need this.

/**
 * The host without the one trailing dot that names the same host (`co.uk.`,
 * `localhost.`, `a..example.com.`), as tldts drops it from `example.com.`: routed
 * by domain, the two spellings must reach the same Yacobot (in either domain mode,
 * and as partner-db stores a domain typed with one).
 */
export function withoutTrailingDot(host: string): string {
  // `example.com..` ends in an empty label, as `a..example.com` has one inside: kept whole.
  const n = host.length;
  return n > 1 && host.charCodeAt(n - 1) === 46 && host.charCodeAt(n - 2) !== 46 ? host.slice(0, -1) : host;
}

/**
 * The longest domain a record may carry and the partner database stores, in bytes
 * (ASCII: hosts are punycode): DNS's limit for a host name. The same on both
 * backends, well under PostgreSQL's btree key limit (2704 bytes), which a longer
 * key failed every retry of its hour with.
 */
export const MAX_DOMAIN_BYTES = 253;

/**
 * Why a domain of `bytes` bytes (an ASCII domain's length) cannot be stored or routed,
 * or null: longer than MAX_DOMAIN_BYTES. The one rule of analyze-dump's reject,
 * upload-domains' bad record and partner-db's refusal.
 */
export function domainTooLong(bytes: number): string | null {
  return bytes > MAX_DOMAIN_BYTES ? `${bytes} bytes, max ${MAX_DOMAIN_BYTES}` : null;
}
