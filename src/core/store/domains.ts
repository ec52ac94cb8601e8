// The spelling of a domain a person types (CSV import, assign): the one records carry.
import { domainToASCII } from 'node:url';
import { clipText } from '../errors.js';
import { domainTooLong, withoutTrailingDot } from '../host.js';

/** `s` without the spaces and tabs at its ends (and nothing else: not String.prototype.trim's Unicode spaces). */
function trimBlanks(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s[a] === ' ' || s[a] === '\t')) a++;
  while (b > a && (s[b - 1] === ' ' || s[b - 1] === '\t')) b--;
  return s.slice(a, b);
}

/**
 * Normalizes a domain typed by a person (CSV import, assign) to the spelling URL
 * records carry: drops the spaces and tabs at its ends, then parses it as the URL
 * parser parses a host, and drops one trailing dot as canonicalize does. Every domain
 * a record can carry comes back unchanged. Returns the domain, or an error message
 * for something that is no host or is longer than MAX_DOMAIN_BYTES.
 */
export function normalizeDomain(text: string): { domain: string } | { error: string } {
  // Not trim(): it also drops a no-break space (or U+3000, ...), and '\u00a0.de', which
  // the parser refuses, was stored as the domain '.de'.
  const d = trimBlanks(text);
  if (d === '') return { error: 'empty domain' };
  // Checked before IDN conversion, which would silently drop tabs and newlines.
  if (/[\x00-\x20\x7f]/.test(d)) return { error: `bad domain '${clipText(d)}' (space or control character)` };
  // The host as the URL records carry it (WHATWG host parsing, as analyze-dump's URL
  // parser): lower case and IDN to punycode by its own mapping (not toLowerCase, which
  // makes capital sharp s a ß where the parser has "ss"), an IPv4 address in any form
  // (0xC0.0xA8.0.1, 3232235521) to dotted decimal, an IPv6 literal compressed. Another
  // spelling would be stored and reported as assigned, but never match a record. No
  // rule of its own beyond that: what the parser takes (`a*b.com`, a label of 64
  // characters, `-a-.com`, `a..b.com`) records carry, and upload-domains assigns.
  // (The parser would take 'a/b' or 'a?b' for the host 'a' with more after it;
  // domainToASCII refuses a port or userinfo.)
  const ascii = /[/?#\\]/.test(d) ? '' : domainToASCII(d);
  if (ascii === '') return { error: `bad domain '${clipText(d)}'` };
  // After the mapping: a trailing '。' is a trailing dot too.
  const domain = withoutTrailingDot(ascii);
  const long = domainTooLong(domain.length);
  return long === null ? { domain } : { error: `domain too long (${long}): '${clipText(domain)}'` };
}
