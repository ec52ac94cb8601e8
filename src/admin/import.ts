// partner-db import: a domain,yacobot CSV file read and checked whole (UTF-8, RFC 4180
// quoting, every row's domain and Yacobot), then written in one write transaction.
import { constants as bufferConstants, isUtf8 } from 'node:buffer';
import * as fs from 'node:fs';
import { CsvError, parse as parseCsv } from 'csv-parse/sync';
import { DataError, clipText, formatPlace, ioError, visibleName } from '../core/errors.js';
import { parseCount } from '../core/numbers.js';
import { normalizeDomain } from '../core/store/domains.js';
import { countMove } from '../core/store/moves.js';
import type { PartnerStore } from '../core/store/store.js';
import type { Yacobot } from '../core/store/yacobots.js';
import { formatTimestamp } from '../core/time.js';
import { NAME, label, say, subdomainNote, warn } from './messages.js';
import { Progress, countText, percentOf } from '../cli/progress.js';

/** At most this many bad CSV rows are listed before the import gives up. */
const MAX_REPORTED_ROWS = 20;
/** The longest string V8 makes: the largest CSV file an import reads at once. */
const MAX_STRING_LENGTH = bufferConstants.MAX_STRING_LENGTH;
/** The most distinct domains one import holds: V8's Maps stop at 2^24 entries. */
const MAX_IMPORT_DOMAINS = 16_000_000;
/** Domains an import looks up and writes per step (PostgreSQL: per statement). */
const IMPORT_BATCH = 5000;

/**
 * The rows of a CSV import, one per domain, as parallel arrays (an object per row, with
 * csv-parse's records and an info object each, costs about 1 GB a million rows: seven
 * million would not fit in the heap): the domain as records spell it, its Yacobot's id,
 * and the line.
 */
export interface ImportRows {
  domains: string[];
  ids: number[];
  lines: number[];
}

/**
 * Parses and validates a `domain,yacobot` CSV (RFC 4180 quoting, an optional
 * `domain,yacobot` header, blank lines skipped). Bad rows are counted (`bad`), the
 * first MAX_REPORTED_ROWS of them kept as errors naming their line; nothing is
 * written to the database here. `read(done, total)` is told every 4096 rows how many
 * bytes of the text are parsed.
 */
export function readImportCsv(
  text: string,
  file: string,
  yacobots: Yacobot[],
  maxDomains = MAX_IMPORT_DOMAINS,
  read?: (done: number, total: number) => void,
): { rows: ImportRows; errors: DataError[]; bad: number } {
  const byId = new Map(yacobots.map((y) => [String(y.id), y]));
  const byName = new Map(yacobots.map((y) => [y.name, y]));
  // The text csv-parse reads: no BOM (its own BOM option would no longer see it), the
  // spaces it must not trim hidden.
  const csv = hideSpaces(text.startsWith('\ufeff') ? text.slice(1) : text);
  // csv-parse's own line count takes a CRLF inside quotes for two lines: lines are
  // counted here from its byte offsets (into the UTF-8 bytes it parsed).
  const bytes = Buffer.from(csv, 'utf8');
  const lines = new LineCounter(bytes);
  const rows: ImportRows = { domains: [], ids: [], lines: [] };
  const errors: DataError[] = [];
  let bad = 0;
  // Each domain's row so far, by its index in `rows`.
  const rowOf = new Map<string, number>();
  let prevEnd = 0;
  let index = 0;
  // Each record as csv-parse reads it; none is kept (returning undefined drops it).
  const onRecord = (hidden: string[], context: { bytes: number }): undefined => {
    // context.bytes is where the record ends; a quoted field may span lines, so name where it starts.
    const line = lines.recordStartLine(prevEnd);
    prevEnd = context.bytes;
    if (read && (index & 4095) === 0) read(context.bytes, bytes.length);
    const record = hidden.map(unhideSpaces);
    const fail = (m: string): undefined => {
      if (errors.length < MAX_REPORTED_ROWS) errors.push(new DataError('BAD_ROW', m, { file, line }));
      bad++;
      return undefined;
    };
    if (index++ === 0 && record.length === 2 && record[0]!.toLowerCase() === 'domain' && /^yacobot(_id)?$/i.test(record[1]!)) return undefined;
    if (record.length !== 2) return fail(`expected 2 fields (domain,yacobot), got ${record.length}`);
    const nd = normalizeDomain(record[0]!);
    if ('error' in nd) return fail(nd.error);
    const ref = record[1]!;
    const y = /^\d+$/.test(ref) ? byId.get(String(parseCount(ref))) : byName.get(ref);
    if (!y) return fail(/^\d+$/.test(ref) ? `no Yacobot with id ${ref}` : `no Yacobot named '${clipText(ref)}'`);
    if (!y.active) return fail(`Yacobot ${label(y)} is disabled`);
    const prev = rowOf.get(nd.domain);
    if (prev !== undefined) {
      if (rows.ids[prev] !== y.id) fail(`domain ${nd.domain} was given to another Yacobot on line ${rows.lines[prev]}`);
      return undefined;
    }
    if (rows.domains.length === maxDomains) {
      throw new DataError(
        'CSV_TOO_BIG',
        `more than ${maxDomains} distinct domains, the most one import holds; split the file (each part is then all or nothing)`,
        { file, line },
      );
    }
    rowOf.set(nd.domain, rows.domains.length);
    rows.domains.push(nd.domain);
    rows.ids.push(y.id);
    rows.lines.push(line);
    return undefined;
  };
  try {
    // Every line end, in any mix: csv-parse would otherwise take the first one for all.
    parseCsv(csv, { skip_empty_lines: true, relax_column_count: true, trim: true, record_delimiter: ['\r\n', '\n', '\r'], on_record: onRecord });
  } catch (err) {
    const e = err as { message?: string; bytes?: number; code?: string };
    // csv-parse passes on what onRecord throws: only its own errors are CSV syntax.
    if (!(err instanceof CsvError)) throw err;
    if (e.code === 'CSV_QUOTE_NOT_CLOSED') {
      // csv-parse names the end of the file; the operator needs the line of the quote.
      throw new DataError('BAD_CSV', 'CSV syntax: the quote opened on this line is never closed', {
        file,
        line: new LineCounter(bytes).lineAt(unclosedQuoteAt(bytes)),
      });
    }
    const msg = unhideSpaces(String(e.message ?? err))
      .replace(/^Invalid (Opening|Closing) Quote: /, '')
      .replace(/ on field (\d+)/, (_, n: string) => ` in field ${Number(n) + 1}`) // it counts from 0
      .replace(/ at line \d+/, ''); // its count, off after a CRLF inside quotes; the place names the line
    throw new DataError('BAD_CSV', `CSV syntax: ${msg}`, { file, line: typeof e.bytes === 'number' ? new LineCounter(bytes).lineAt(e.bytes) : undefined });
  }
  return { rows, errors, bad };
}

// csv-parse's trim takes off a field's ends every space String.prototype.trim() does
// (a no-break space, U+3000, ..., and \v, \f), where only spaces and tabs may go: a
// no-break space pasted before '.de' made the row the domain '.de'. So those
// characters are hidden from it, each as SPACE_MARK and its 4 hex digits (the mark
// itself too), and put back in the fields it returns, which then hold them as written.
const SPACE_MARK = '\ue000';
const TRIMMED_SPACE = /[^\S\t\n\r ]|\ue000/g;
const MARKED = /\ue000([0-9a-f]{4})/g;
const hideSpaces = (s: string) => s.replace(TRIMMED_SPACE, (c) => SPACE_MARK + c.charCodeAt(0).toString(16).padStart(4, '0'));
const unhideSpaces = (s: string) => s.replace(MARKED, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

/** The line (from 1; LF, CRLF or a lone CR ends one) of the first byte sequence in `b` that is not UTF-8. */
function firstNonUtf8Line(b: Buffer): number {
  let line = 1;
  let from = 0;
  for (let i = 0; i <= b.length; i++) {
    const c = b[i];
    if (i < b.length && c !== 10 && c !== 13) continue;
    if (!isUtf8(b.subarray(from, i))) return line;
    if (c === 13 && b[i + 1] === 10) i++;
    line++;
    from = i + 1;
  }
  return line;
}

/** Line numbers (from 1) of byte offsets into a text, asked in increasing order. */
class LineCounter {
  private at = 0;
  private line = 1;

  constructor(private readonly b: Buffer) {}

  /** The line of byte `offset`: LF, CRLF and a lone CR each end one line, as the parser reads them. */
  lineAt(offset: number): number {
    const to = Math.min(offset, this.b.length);
    for (; this.at < to; this.at++) {
      const c = this.b[this.at];
      if (c === 10 || (c === 13 && this.b[this.at + 1] !== 10)) this.line++;
    }
    return this.line;
  }

  /** The line where a record starts that follows byte `offset` (blank lines skipped, as the parser does with trim). */
  recordStartLine(offset: number): number {
    let p = offset;
    for (let c = this.b[p]; c === 10 || c === 13 || c === 32 || c === 9; c = this.b[++p]);
    return this.lineAt(p);
  }
}

/** The byte offset of the quote that RFC 4180 quoting leaves open at the end of `b`. */
function unclosedQuoteAt(b: Buffer): number {
  let open = 0;
  let inQuote = false;
  for (let i = 0; i < b.length; i++) {
    if (b[i] !== 34) continue;
    if (!inQuote) {
      open = i;
      inQuote = true;
    } else if (b[i + 1] === 34)
      i++; // a doubled quote inside quotes is an escaped one
    else inQuote = false;
  }
  return open;
}

/** The text of a CSV file to import: UTF-8, of a size one string holds. */
export function readCsvText(csvFile: string): string {
  try {
    // A file past the longest string V8 makes would fail with ERR_STRING_TOO_LONG as its "read" error.
    if (fs.statSync(csvFile).size > MAX_STRING_LENGTH) {
      throw new DataError(
        'CSV_TOO_BIG',
        `larger than ${MAX_STRING_LENGTH >> 20} MiB, the most one import can read; split it (each part is then all or nothing)`,
        { file: csvFile },
      );
    }
    const bytes = fs.readFileSync(csvFile);
    // Decoded as it is, a Latin-1 file's 'münchen.de' would fail as "bad domain 'm\ufffdnchen.de'".
    if (!isUtf8(bytes))
      throw new DataError('BAD_CSV', 'not UTF-8 text (convert it first, e.g. iconv -f latin1 -t utf-8)', { file: csvFile, line: firstNonUtf8Line(bytes) });
    return bytes.toString('utf8');
  } catch (err) {
    if (err instanceof DataError) throw err;
    throw ioError(err, csvFile, 'read');
  }
}

/** readImportCsv, saying how far it got as the writing does (a file of millions of rows takes a while to parse). */
function readWithProgress(text: string, csvFile: string, yacobots: Yacobot[]): ReturnType<typeof readImportCsv> {
  let done = 0;
  let total = 0;
  const progress = new Progress({ log: null, plain: NAME }, () => ({
    fields: {},
    text: `import: reading ${visibleName(csvFile)}: ${countText(done)} of ${countText(total)} bytes (${percentOf(done, total)}%)`,
  }));
  // No timer: the parse holds the thread until it ends, so each 4096 rows tick it.
  try {
    return readImportCsv(text, csvFile, yacobots, undefined, (d, t) => {
      done = d;
      total = t;
      progress.tick();
    });
  } finally {
    progress.stop();
  }
}

/** import: every row of a checked CSV file in one write transaction, or none. */
export async function importCommand(store: PartnerStore, csvFile: string, text: string): Promise<void> {
  const yacobots = await store.yacobotLoads();
  const { rows, errors, bad } = readWithProgress(text, csvFile, yacobots);
  if (bad > 0) {
    for (const e of errors) process.stderr.write(`${NAME}: ${visibleName(formatPlace(e.place ?? { file: csvFile }, e.message))}\n`);
    const more = bad > errors.length ? ` (first ${errors.length} shown)` : '';
    throw new DataError('BAD_CSV', `${bad} bad row(s)${more}; nothing imported`, { file: csvFile });
  }
  const now = formatTimestamp(new Date());
  let done = () => 0;
  const total = rows.domains.length;
  const progress = new Progress({ log: null, plain: NAME }, () => ({
    fields: {},
    text: `import: ${countText(done())} of ${countText(total)} domains (${percentOf(done(), total)}%)`,
  })).start();
  const counts = await store
    .write(async (q) => {
      // The file was checked before this write transaction (parsing can take seconds, too
      // long to hold the lock); a Yacobot disabled since then fails the import here, so
      // no domain lands on a disabled Yacobot.
      const active = new Set((await q.all('SELECT id FROM yacobot WHERE active = 1')).map((r) => Number(r.id)));
      for (const id of new Set(rows.ids)) {
        if (!active.has(id)) {
          const y = yacobots.find((x) => x.id === id)!;
          throw new DataError('DISABLED', `Yacobot ${label(y)} was disabled while the file was read; nothing imported`, { file: csvFile });
        }
      }
      const c = { added: 0, moved: 0, same: 0 };
      done = () => c.added + c.moved + c.same;
      // Many domains per step: on PostgreSQL a statement per domain would take a round
      // trip each, and update each Yacobot's partner_load row once per domain.
      for (let i = 0; i < rows.domains.length; i += IMPORT_BATCH) {
        const domains = rows.domains.slice(i, i + IMPORT_BATCH);
        const prev = await store.ownersIn(domains);
        const changed: [string, number][] = [];
        domains.forEach((domain, j) => {
          const id = rows.ids[i + j]!;
          const p = prev.get(domain);
          if (p === undefined) c.added++;
          else if (Number(p) === id) {
            c.same++;
            return;
          } else c.moved++;
          changed.push([domain, id]);
        });
        await store.setOwners(changed, now);
        progress.tick();
      }
      if (c.moved > 0) await countMove(q); // a run under way warns of it
      return c;
    })
    .finally(() => progress.stop());
  say(`imported ${rows.domains.length} domain(s) from ${visibleName(csvFile)}: ${counts.added} new, ${counts.moved} moved, ${counts.same} unchanged`);
  let notes = 0;
  let first: string | null = null;
  for (const domain of rows.domains) {
    const note = subdomainNote(domain);
    if (note === null) continue;
    notes++;
    first ??= note;
  }
  if (first !== null) warn(`${notes} row(s) name no registrable domain, e.g. ${first}`);
}
