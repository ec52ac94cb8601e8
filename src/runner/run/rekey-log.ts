// The re-key of one file of the memory (rekey.ts says when): current_log or the carry,
// each URL re-canonicalized and re-hashed by this runtime's parser, its domain retaken,
// the file re-sorted in a memory bound, entries that now share an id merged as
// group-sum merges them. The carry's `decided` stays the first decision's (the oldest).
import { DataError } from '../../core/errors.js';
import { addHits } from '../../core/hits.js';
import { FileLineReader } from '../../core/lines.js';
import { C_DECIDED, U_DOMAIN, U_HITS, U_TAG, U_TS, U_URL, URL_RECORD, checkCarryRecord, checkUrlRecord } from '../../core/records.js';
import { RecordBatch, RecordSorter } from '../../core/sorter.js';
import { canonicalize, idText, type UrlHash } from '../../core/url.js';
import { FileWriter } from '../../core/writers.js';
import { RUNNER_URL_OPTIONS } from '../state/keying.js';
import type { RekeyCounts } from '../state/run-record.js';

/** One URL under its new key: id (16 hex digits), domain and canonical URL. */
export interface Keyed {
  id: string;
  domain: string;
  url: string;
}

/** Which file of the memory is re-keyed: the shape of its records, and what an alias does to an entry. */
export type MemoryFile = 'current_log' | 'carry';

/** Where re-keyed records are collected: a RecordBatch handed to the sorter every MiB. */
class RekeySink {
  private readonly batch = new RecordBatch(2 << 20, 1 << 14);
  constructor(private readonly sorter: RecordSorter) {}

  /** Adds the entry `f` (URL record fields, and a carry record's `decided`) under the key `k`. */
  add(k: Keyed, f: readonly string[]): void {
    const tail = f.length > URL_RECORD.length ? `\t${f.slice(URL_RECORD.length).join('\t')}` : '';
    const text = `${k.id}\t${f[U_TS]}\t${f[U_TAG]}\t${f[U_HITS]}\t${k.domain}\t${k.url}${tail}\n`;
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
 * Reads `input` (`kind`) into `sink`, each entry under its new key (this parser's
 * canonical form of its URL, its id and domain); an id with aliases gives current_log's
 * entry a copy under each, and moves the carry's to them (what waits is sent once, in
 * the spelling the hour gives it). Counts what changed. An entry this parser refuses is
 * dropped and counted; a malformed one is a DataError naming its line.
 */
function readRekeyed(input: string, kind: MemoryFile, sink: RekeySink, aliases: Map<string, Keyed[]>, hash: UrlHash, tick: Tick): RekeyCounts {
  const c: RekeyCounts = { urls: 0, changed: 0, merged: 0, dropped: 0, aliased: 0, domains_changed: 0, entries_out: 0 };
  const domains = new Set<string>();
  const check = kind === 'carry' ? checkCarryRecord : checkUrlRecord;
  const reader = new FileLineReader(input);
  const line = { buf: Buffer.alloc(0) as Uint8Array, start: 0, end: 0 };
  try {
    while (reader.next(line)) {
      const f = Buffer.from(line.buf.buffer, line.buf.byteOffset + line.start, line.end - line.start)
        .toString('utf8')
        .split('\t');
      const bad = check(f);
      if (bad !== null) throw new DataError('BAD_RECORD', bad, { file: input, line: reader.lineNo });
      if ((++c.urls & 0xffff) === 0) tick('reading', c.urls);
      const k = canonicalize(f[U_URL]!, RUNNER_URL_OPTIONS);
      if ('reason' in k) {
        c.dropped++;
        continue;
      }
      if (k.url !== f[U_URL]) c.changed++;
      if (k.domain !== f[U_DOMAIN]) domains.add(k.domain);
      const id = idText(hash(k.url));
      const also = aliases.get(id) ?? [];
      if (kind === 'current_log' || also.length === 0) sink.add({ id, domain: k.domain, url: k.url }, f);
      for (const a of also) {
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
 * hits summed; a carry record's `decided`, the oldest); returns the entries written and
 * merged away.
 */
async function writeMerged(sorter: RecordSorter, output: string, tick: Tick): Promise<{ out: number; merged: number }> {
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
    tick('writing', out);
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
      if (f[C_DECIDED] !== undefined && f[C_DECIDED] < pending[C_DECIDED]!) pending[C_DECIDED] = f[C_DECIDED];
    }
  });
  put();
  w.close(true);
  return { out, merged };
}

/** Told, once per batch, how many URLs the re-key read or wrote so far. */
export type Tick = (step: 'reading' | 'writing', urls: number) => void;

/**
 * Re-keys `input`, current_log or the carry (`kind`), into `output` (see readRekeyed),
 * sorted by (id, timestamp) within `memoryBytes` (spilling to `tmpDir`), entries that
 * share an id merged (writeMerged); `tick` is told how far it got.
 */
export async function rekeyLog(
  input: string,
  output: string,
  aliases: Map<string, Keyed[]>,
  hash: UrlHash,
  memoryBytes: number,
  tmpDir: string,
  kind: MemoryFile = 'current_log',
  tick: Tick = () => undefined,
): Promise<RekeyCounts> {
  const sorter = new RecordSorter({ memoryBytes, tmpDir });
  try {
    const c = readRekeyed(input, kind, new RekeySink(sorter), aliases, hash, tick);
    const { out, merged } = await writeMerged(sorter, output, tick);
    return { ...c, merged, entries_out: out };
  } finally {
    sorter.dispose();
  }
}
