// Synthetic reflog generator for the benchmark: reproducible (seeded), with the skew
// of real ad-network traffic. Usage:
//   node dist/scripts/gen-reflog.js --lines N --hour H [--seed S] [--flood | --messy] [--out FILE]
// Shape: Zipf-like domains and pages; about 40% of lines are long-tail pages seen
// once; popular pages repeat within the hour and across hours (the page pool does
// not depend on the hour); about 0.2% bad lines; a header line first; a share of
// URLs that canonicalization changes (upper-case host, default port, fragment,
// dot segments, IDN hosts). With --flood, every line is on a new domain of its own. With
// --messy, the URLs are spelled every way URL parsers of different releases may disagree
// on (IDNA deviation characters, every ASCII punctuation mark, percent-encodings, odd
// hosts), drawn from a pool that does not depend on the hour.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { UsageError, ioError } from '../src/core/errors.js';
import { prng } from './prng.js';

export interface GenOptions {
  lines: number;
  /** 1-based hour of the run; hour 1 is 2011-07-28 05:00 local time. */
  hour: number;
  seed: number;
  /** Every line on a domain of its own that no other hour or bench table holds (a flood of new domains). */
  flood?: boolean;
  /** Messy URLs (messyUrl) instead of the benchmark's pages. */
  messy?: boolean;
}

/**
 * sfc32: a small fast PRNG; `next()` is uniform in [0, 1). Not scripts/prng.ts: the
 * bench caches generated reflogs by lines, seed and hour, and its figures are
 * compared across commits; another generator would change them under the same names.
 */
class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d = 1;
  constructor(seed: number) {
    this.a = 0x9e3779b9 ^ seed;
    this.b = 0x243f6a88 + seed;
    this.c = 0xb7e15162 ^ Math.imul(seed, 0x85ebca6b);
    for (let i = 0; i < 16; i++) this.u32();
  }
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }
  next(): number {
    return this.u32() / 4294967296;
  }
}

/** A 32-bit integer hash (murmur3 finalizer): page properties that must not depend on the hour. */
function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Zipf-like rank in [0, n) for u uniform in [0, 1): density ~ 1/rank (s = 1). */
const zipf = (u: number, n: number) => Math.min(n - 1, Math.floor(Math.exp(u * Math.log(n + 1))) - 1);

const SUFFIXES = ['com', 'ru', 'net', 'org', 'co.uk', 'com.ru', 'de', 'blogspot.com', 'narod.ru', 'info', 'com.ua', 'github.io', 'msk.ru', 'fr'];
const WORDS = ['news', 'shop', 'forum', 'blog', 'auto', 'photo', 'games', 'music', 'video', 'travel', 'home', 'sport', 'kino', 'market'];
const SUBS = ['www.', '', '', 'm.', 'forum.', 'shop.', ''];
const SECTIONS = ['article', 'item', 'topic', 'catalog', 'page', 'post', 'show', 'p'];

const N_DOMAINS = 60_000;

function domainOf(rank: number): string {
  const h = mix(rank + 0x51ed27);
  const base = `${WORDS[h % WORDS.length]}${rank.toString(36)}`;
  if (h % 97 === 0) return `s${rank.toString(36)}.xn--e1afmkfd.xn--p1ai`; // IDN written in punycode
  if (h % 89 === 0) return `пример${rank}.рф`; // IDN written in Unicode
  return `${SUBS[(h >>> 8) % SUBS.length]}${base}.${SUFFIXES[(h >>> 12) % SUFFIXES.length]}`;
}

/**
 * The domain of line `n` of a flood hour: a hashed label spread over the key space, and
 * the hour after a '-' (no other hour's domain, nor the bench's pre-filled ones, has one).
 */
export function floodDomain(n: number, hour: number): string {
  const h = mix(n ^ 0x6a09e667);
  return `${WORDS[h % WORDS.length]}${mix(n).toString(16).padStart(8, '0')}-${hour}.${SUFFIXES[(h >>> 12) % SUFFIXES.length]}`;
}

/** The URL of popular page `i` (same in every hour), plus its canonicalization noise. */
function pageUrl(i: number, rng: Rng): string {
  const h = mix(i ^ 0x2545f491);
  const dom = domainOf(zipf((h & 0xffffff) / 0x1000000, N_DOMAINS));
  const scheme = h % 5 === 0 ? 'https' : 'http';
  let path = `/${SECTIONS[(h >>> 24) % SECTIONS.length]}/${i.toString(36)}`;
  if (h % 3 === 0) path += `.html?id=${(h >>> 5) % 100000}`;
  else if (h % 7 === 1) path += `/?page=${(h >>> 9) % 50}&sort=date`;
  return noisy(scheme, dom, path, rng);
}

function noisy(scheme: string, host: string, path: string, rng: Rng): string {
  const r = rng.u32() % 100;
  if (r < 3) host = host.toUpperCase();
  else if (r < 5) host = `${host}:${scheme === 'http' ? 80 : 443}`;
  else if (r < 7) path = `/./${path.slice(1)}`;
  let url = `${scheme}://${host}${path}`;
  if (r >= 90 && r < 95) url += `#c${r}`;
  else if (r >= 95 && r < 97) url += (url.includes('?') ? '&' : '?') + `utm_source=yd${r}`;
  return url;
}

const MESSY_LABELS = [
  'shop',
  'straße',
  'STRAẞE',
  'faß',
  'ẞ',
  'ss',
  'σοφός',
  'ΣΟΦΟΣ',
  'a\u200db',
  'ab\u200c',
  'क्\u200d',
  'пример',
  'ПРИМЕР',
  'xn--strae-oqa',
  'xn--zca',
  'xn--ab',
  '١٢٣',
  'a٠',
  'ǅ',
  'ﬀ',
  '①',
  'Ⅸ',
  'é',
  'e\u0301',
  'a_b',
  'a~b',
  '-x',
  'x-',
  'ab--c',
  '例え',
  '😀',
];
const MESSY_TLDS = ['de', 'com', 'ru', 'рф', 'gr', 'co.uk', 'DE', 'xn--p1ai', 'com.', 'blogspot.com'];
const MESSY_PATH = [
  'é',
  'ẞ',
  'ß',
  '\u00a0',
  '%',
  '%41',
  '%7e',
  '%zz',
  '%C3%9F',
  '..',
  '.',
  '%2e',
  '%2E%2e',
  '\\',
  ' ',
  '"',
  "'",
  '<',
  '>',
  '`',
  '{',
  '}',
  '|',
  '^',
  '[',
  ']',
  '@',
  ':',
  ';',
  '=',
  '&',
  '+',
  ',',
  '$',
  '!',
  '*',
  '(',
  ')',
  '~',
  '_',
  '-',
];

/** A seeded choice in a list. */
const pickOf = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** A text of 1 to 4 pieces of `xs` and letters. */
function messyText(r: () => number, xs: readonly string[]): string {
  let s = '';
  for (let k = 1 + Math.floor(r() * 4); k > 0; k--) s += r() < 0.5 ? pickOf(r, xs) : String.fromCharCode(97 + Math.floor(r() * 26));
  return s;
}

/** The percent-encoding of `s`'s UTF-8 bytes. */
const percentAll = (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');

/** Messy URL `i` of the pool (the same in every hour): an odd host, path, query and fragment. */
function messyUrl(i: number): string {
  const r = prng(mix(i ^ 0x3c6ef372));
  let host = `${pickOf(r, MESSY_LABELS)}${r() < 0.5 ? i % 97 : ''}`;
  if (r() < 0.3) host = `${pickOf(r, MESSY_LABELS)}.${host}`;
  host = `${host}.${pickOf(r, MESSY_TLDS)}`;
  if (r() < 0.1) host = percentAll(host);
  // biome-ignore lint/suspicious/noDuplicateElseIf: each r() is a new random draw
  else if (r() < 0.1) host = host.toUpperCase();
  const scheme = r() < 0.1 ? 'HTTP' : r() < 0.3 ? 'https' : 'http';
  const slashes = r() < 0.05 ? ':\\\\' : '://';
  const user = r() < 0.03 ? 'u:p@' : '';
  const port = r() < 0.05 ? ':80' : r() < 0.05 ? ':8080' : '';
  let path = '';
  for (let k = Math.floor(r() * 4); k > 0; k--) path += `/${messyText(r, MESSY_PATH)}`;
  const query = r() < 0.4 ? `?${messyText(r, MESSY_PATH)}=${messyText(r, MESSY_PATH)}` : '';
  const frag = r() < 0.1 ? `#${messyText(r, MESSY_PATH)}` : '';
  return `${scheme}${slashes}${user}${host}${port}${path}${query}${frag}`.replace(/[\t\r\n]/g, '');
}

const BAD = [
  (ts: string, url: string) => `1\t5\t${ts.slice(0, 13)}x\t7\t${url}\t1`,
  (ts: string, url: string) => `1\t5\t${ts}\t7\t${url}\t-3`,
  (ts: string) => `1\t5\t${ts}\t7\tftp://files.example.com/pub/x\t1`,
  (ts: string, url: string) => `1\t5\t${ts}\t${url}\t1`,
  (ts: string) => `1\t5\t${ts}\t7\tnot a url at all\t1`,
  (ts: string, url: string) => `1\t5\t20110231${ts.slice(8)}\t7\t${url}\t1`,
];

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/**
 * Writes `o.lines` reflog lines (plus a header line) for hour `o.hour` to `fd`;
 * returns the number of bad lines among them.
 */
export function generateReflog(fd: number, o: GenOptions): number {
  const rng = new Rng(o.seed * 7919 + o.hour);
  const pool = Math.max(1000, Math.floor(o.lines * 0.1));
  const hourStart = new Date(2011, 6, 28, 4 + o.hour, 0, 0);
  const datePart = `${hourStart.getFullYear()}${pad2(hourStart.getMonth() + 1)}${pad2(hourStart.getDate())}${pad2(hourStart.getHours())}`;
  let parts: string[] = [`reflog-dump v2 hour ${o.hour}\n`];
  let bad = 0;
  let longTail = 0;
  for (let n = 0; n < o.lines; n++) {
    // Lines arrive roughly in time order, with a little jitter.
    const sec = Math.min(3599, Math.floor((n * 3600) / o.lines) + (rng.u32() % 5));
    const ts = `${datePart}${pad2(Math.floor(sec / 60))}${pad2(sec % 60)}`;
    const kind = rng.next();
    let url: string;
    let tag = '';
    if (o.messy) {
      url = messyUrl(zipf(rng.next(), pool));
    } else if (o.flood) {
      url = noisy('http', floodDomain(n, o.hour), `/${SECTIONS[n % SECTIONS.length]}/${n.toString(36)}`, rng);
    } else if (kind < 0.4) {
      const dom = domainOf(zipf(rng.next(), N_DOMAINS));
      url = noisy('http', dom, `/${SECTIONS[longTail % SECTIONS.length]}/h${o.hour}-${(longTail++).toString(36)}-${rng.u32() % 1000}`, rng);
    } else {
      const i = zipf(rng.next(), pool);
      url = pageUrl(i, rng);
      const h = mix(i + 17);
      if (h % 4 === 0) tag = `v${(h >>> 4) % 1000}${h % 40 === 0 ? `-${o.hour}` : ''}`; // 1 in 10 tags change hourly
    }
    const hits = rng.u32() % 10 === 0 ? 1 + (rng.u32() % 20) : 1;
    let line: string;
    if (rng.u32() % 500 === 0) {
      line = BAD[rng.u32() % BAD.length]!(ts, url);
      bad++;
    } else {
      line = `${1000 + (n >>> 16)}\t${rng.u32() % 10}\t${ts}\t${rng.u32() % 100000}\t${url}\t${hits}`;
      if (tag !== '' || rng.u32() % 3 === 0) line += `\t${tag}`;
    }
    parts.push(line + '\n');
    if (parts.length >= 8192) {
      writeAll(fd, parts.join(''));
      parts = [];
    }
  }
  if (parts.length) writeAll(fd, parts.join(''));
  return bad;
}

/** Writes all of `text` to `fd`: a pipe may take part of it, or none for now (EAGAIN). */
function writeAll(fd: number, text: string): void {
  const b = Buffer.from(text);
  for (let at = 0; at < b.length; ) {
    try {
      at += fs.writeSync(fd, b, at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // the reader is slow: wait 1 ms
    }
  }
}

function main(argv: string[]): Promise<never> {
  return runAdmin(
    'gen-reflog',
    (p) =>
      p
        .description("Writes a seeded synthetic reflog (the benchmark's input) to --out or stdout.")
        .option('--lines <N>', 'lines to write: 1000000, 1M, 500k', countOption('--lines'), 1_000_000)
        .option('--hour <H>', 'hour of the run, from 1 (hour 1 is 2011-07-28 05:00)', intOption('--hour', 1, 100_000), 1)
        .option('--seed <S>', 'seed of the generator', intOption('--seed', 0), 1)
        .option('--flood', 'every line on a new domain of its own (an hour that floods the partner table)')
        .option('--messy', 'messy URLs, spelled every way URL parsers of different releases may disagree on')
        .option('--out <FILE>', 'write here instead of stdout')
        .action((o: GenOptions & { out?: string }) => {
          const where = o.out ?? 'stdout';
          try {
            const fd = o.out ? fs.openSync(o.out, 'w') : 1;
            generateReflog(fd, o);
            if (o.out) fs.closeSync(fd);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0); // | head: quietly, as the stages
            throw ioError(err, where, 'write');
          }
        }),
    argv,
  );
}

/** A commander parser for a line count option (`1000000`, `1M`, `10M`, `500k`; at least 1), or a UsageError naming the option. */
export function countOption(name: string): (text: string) => number {
  return (text) => {
    const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text.trim());
    const n = m ? Math.round(Number(m[1]) * (m[2] === '' ? 1 : m[2]!.toLowerCase() === 'k' ? 1e3 : 1e6)) : 0;
    if (n < 1) throw new UsageError(`${name} must be a line count such as 1000000, 1M or 500k, not '${text}'`);
    return n;
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) void main(process.argv);
