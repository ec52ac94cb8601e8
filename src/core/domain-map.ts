// The domain_map stream: "domain TAB yacobot_id" per line, sorted bytewise by domain,
// one line per domain (docs/formats-and-rules.md). Read whole by upload-domains --map.
import { grown } from './arrays.js';
import { BytesIndex } from './bytesindex.js';
import { LF, TAB, compareBytes, digitsValue, latin1, putBytes, putDecimal, utf8 } from './bytes.js';
import { DataError } from './errors.js';
import { checkDomain, isYacobotIdAt } from './records.js';
import { isDomainAt } from './record-checks.js';
import { FileLineReader, findTabsAt } from './lines.js';
import { AtomicFileWriter } from './writers.js';

/** A domain_map as read: its domains in file order (sorted), and each one's Yacobot. */
export interface DomainMap {
  domains: BytesIndex;
  /** `owner[k]`: the Yacobot of domain k. */
  owner: Float64Array;
  /** Whether the file was there (a missing one is an empty map: the first run). */
  existed: boolean;
}

/**
 * Reads a domain_map file (`domain TAB yacobot_id` per line, sorted bytewise by
 * domain, unique); a missing file is an empty map. A malformed, repeated or
 * out-of-order line is a DataError naming it. Domains stay bytes: a string per
 * domain, sorted again at the end, cost about 80 ms for 42k domains.
 */
export function loadDomainMap(file: string): DomainMap {
  const domains = new BytesIndex();
  let owner = new Float64Array(1024);
  const r = FileLineReader.openIfExists(file);
  if (!r) return { domains, owner, existed: false };
  const line = { buf: new Uint8Array(0), start: 0, end: 0 };
  const tab = new Int32Array(1);
  try {
    while (r.next(line)) {
      const { buf, start, end } = line;
      if (findTabsAt(buf, start, end, tab) !== 2 || tab[0] === start || !isYacobotIdAt(buf, tab[0]! + 1, end)) {
        throw new DataError('BAD_MAP', 'expected "domain TAB yacobot_id" with a positive integer id', { file, line: r.lineNo });
      }
      const dEnd = tab[0]!;
      // As domains-from-db writes them and every stream carries them: one that is not
      // would never match a record's domain, and would be written back into the map.
      if (!isDomainAt(buf, start, dEnd)) throw new DataError('BAD_MAP', checkDomain(utf8(buf, start, dEnd)) ?? 'bad domain', { file, line: r.lineNo });
      // A domain_map is sorted and unique (domains-from-db writes it so): a second
      // line for a domain would silently win over the first.
      const k = domains.size;
      if (k > 0) {
        const c = compareKeys(domains.keyBytes(k - 1), buf, start, dEnd);
        if (c >= 0) {
          const domain = utf8(buf, start, dEnd);
          throw new DataError('BAD_MAP', c === 0 ? `domain ${domain} appears twice` : `not sorted: ${domain} after ${domains.key(k - 1)}`, {
            file,
            line: r.lineNo,
          });
        }
      }
      domains.add(buf, start, dEnd);
      if (k === owner.length) owner = grown(owner);
      // Up to 18 digits: past 15, as Number() rounds them (digitsValue is exact below 16).
      owner[k] = end - dEnd - 1 <= 15 ? digitsValue(buf, dEnd + 1, end) : Number(latin1(buf, dEnd + 1, end));
    }
  } finally {
    r.close();
  }
  return { domains, owner, existed: true };
}

/** Bytewise order of `a` and `b[start, end)`: negative, zero or positive. */
function compareKeys(a: Uint8Array, b: Uint8Array, start: number, end: number): number {
  const n = end - start;
  const d = compareBytes(a, 0, b, start, Math.min(a.length, n));
  return d !== 0 ? d : a.length - n;
}

/** Bytewise order for the ASCII domains of the streams (UTF-16 order equals byte order there). */
const bytewise = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Writes a domain_map atomically, sorted bytewise by domain: the entries of `map`
 * (sorted, as loadDomainMap checked) merged with `learned`, whose Yacobot wins for a
 * domain in both.
 */
export function writeDomainMap(file: string, map: DomainMap, learned: ReadonlyMap<string, number>): void {
  const extra = [...learned.keys()].sort(bytewise).map((d) => ({ bytes: Buffer.from(d, 'utf8'), id: learned.get(d)! }));
  const w = new AtomicFileWriter(file);
  const put = (bytes: Uint8Array, id: number) => {
    w.reserve(bytes.length + 24);
    let p = putBytes(w.buf, w.pos, bytes, 0, bytes.length);
    w.buf[p++] = TAB;
    // The text Number gives an id past 2^53 - 1 read from the map, as before (putDecimal wants a safe integer).
    p = id <= Number.MAX_SAFE_INTEGER ? putDecimal(w.buf, p, id) : p + w.buf.write(String(id), p, 'latin1');
    w.buf[p++] = LF;
    w.pos = p;
  };
  try {
    let x = 0;
    for (let k = 0; k < map.domains.size; k++) {
      const d = map.domains.keyBytes(k);
      let c = 1;
      while (x < extra.length && (c = compareKeys(d, extra[x]!.bytes, 0, extra[x]!.bytes.length)) > 0) put(extra[x]!.bytes, extra[x++]!.id);
      if (c === 0) put(extra[x]!.bytes, extra[x++]!.id);
      else put(d, map.owner[k]!);
    }
    while (x < extra.length) put(extra[x]!.bytes, extra[x++]!.id);
    w.commit();
  } catch (err) {
    w.abort();
    throw err;
  }
}

/** An empty map, as for no --map. */
export function emptyDomainMap(): DomainMap {
  return { domains: new BytesIndex(), owner: new Float64Array(0), existed: false };
}
