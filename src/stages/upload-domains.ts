// upload-domains: route filtered_log to Yacobots by domain, assigning new domains.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathOption, refuseOwnStreams, type StageDef } from '../cli/stage.js';
import { loadRendezvous, missingOwnerError, type RendezvousFn } from '../core/db.js';
import { addDbOptions, noActive, openStore, timeoutsOf, type Chooser, type CommitResult, type Timeouts } from '../core/store.js';
import { mkdirEach } from '../core/dirs.js';
import { DataError, UsageError, ioError, shellQuote } from '../core/errors.js';
import { grown } from '../core/arrays.js';
import { BytesIndex } from '../core/bytesindex.js';
import { LF, TAB, compareBytes, digitsValue, latin1, putBytes, putDecimal, putNumbered, utf8 } from '../core/bytes.js';
import { LineRef, checkDomain, checkUrlRecordAt, isDomainAt, isYacobotIdAt } from '../core/records.js';
import { formatTimestamp, isValidTimestamp } from '../core/time.js';
import { DEFAULT_MAX_LINE, FileLineReader, findTabsAt } from '../core/lines.js';
import { AtomicFileWriter, FileWriter, replaceableTarget } from '../core/writers.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly, removeStaleTemps } from '../core/temps.js';

/** The owner of a domain that waits for the database's answer. */
const PENDING = -1;

/** The prefix of the spool file in --tmp (see ownedTempPrefix). */
export const SPOOL_PREFIX = '.upload-domains-';

export type AssignMode = 'least-loaded' | 'rendezvous';

export interface UploadDomainsOptions {
  db: string;
  timeouts: Timeouts;
  map: string | null;
  assign: AssignMode;
  now: string;
  tmpDir: string;
}

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
          throw new DataError('BAD_MAP', c === 0 ? `domain ${domain} appears twice` : `not sorted: ${domain} after ${domains.key(k - 1)}`, { file, line: r.lineNo });
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

/**
 * The chooser of new domains' Yacobots for `mode`: least-loaded (counts grow as it
 * picks) or weighted rendezvous over the active Yacobots.
 */
export function chooserFor(mode: AssignMode, rendezvous: RendezvousFn | null): Chooser {
  return mode === 'rendezvous' ? (d, active) => rendezvous!(d, active) : (_d, _active, least) => least.pick();
}

/** How many inactive Yacobots the warning names, and gives a command for. */
export const INACTIVE_SHOWN = 5;

/**
 * The warning (log fields, message) about `domains` domains routed to the inactive
 * Yacobots `ids`: it names every one of them, or the first INACTIVE_SHOWN and how
 * many more, with the command that moves each one's domains.
 */
export function inactiveWarning(domains: number, ids: Iterable<number>, db: string): [Record<string, unknown>, string] {
  const all = [...ids].sort((a, b) => a - b);
  const shown = all.slice(0, INACTIVE_SHOWN);
  const more = all.length - shown.length;
  const cmd = (id: number | string) => `partner-db --db ${shellQuote(db)} disable ${id}`;
  const which = more > 0 ? `${shown.join(', ')} and ${more} more (${all.length} in all)` : shown.join(', ');
  // One command per Yacobot: disable moves the domains of the one it is given only.
  const fix = more > 0 ? `${cmd('ID')} for each of them (partner-db --db ${shellQuote(db)} list shows which are inactive)` : shown.map(cmd).join('; ');
  return [
    { domains_of_inactive: domains, inactive_yacobots: all.length, yacobots: shown },
    `${domains} domain(s) belong to inactive Yacobot(s) ${which} and were routed to them; to move them to active ones: ${fix}`,
  ];
}

export const uploadDomains: StageDef<UploadDomainsOptions> = {
  name: 'upload-domains',
  summary: 'Route filtered_log records to Yacobots by domain; assign new domains.',
  usage: `
Reads URL records "id timestamp updatetag hits domain url" (filtered_log) and
writes routed records, in input order:

  yacobot_id  id  timestamp  updatetag  hits  domain  url

A domain's Yacobot comes from the --map file if given (entries that point to a
Yacobot that is no longer active are ignored), else from the database. A domain
the database gives to an inactive Yacobot (made so by hand; partner-db disable
moves its domains) is routed there all the same, with a warning and
domains_of_inactive in the summary. A Yacobot disabled while the run goes on
keeps, for this run, the domains it had when they were looked up (a domain has
one Yacobot per run), with a warning at the end and
domains_of_disabled_during_run in the summary. A database row naming a Yacobot
that does not exist (written with foreign keys off) is an error at start, before
any output. A domain found in neither is new: it is given an active Yacobot by
--assign

  least-loaded  the one with the fewest domains per unit of weight, ties to the
                smallest id; counts grow as it assigns, so a batch spreads out
  rendezvous    weighted rendezvous hashing of the domain: score =
                -weight / ln(hash(domain, id)), highest wins, so two Master
                Servers with the same Yacobot list agree without talking

All new assignments are written in ONE transaction at the end of the input
(INSERT ... ON CONFLICT(domain) DO NOTHING, added_at = --now) and read back: if
another process assigned a domain first, the database's answer wins and is the
one written. On PostgreSQL (--db postgres://...) that transaction first takes
an advisory lock every writer takes: masters sharing the database assign one
at a time, so loads spread as one master's would, and a domain another master
took first counts as lost_race. Last, after every record has been written,
--map is rewritten atomically (temporary file + rename), sorted bytewise, with
every domain learned in this run merged in; a missing --map file is an empty
map and is created.

Rule for "no active Yacobot": checked when the stage starts, before it reads
any input - if no Yacobot is active it fails with no output at all, even if
every domain would be known. (Checked again at commit time.)

--db is a SQLite file or a PostgreSQL URI (PG* variables and ~/.pgpass fill in
what it leaves out; messages show it without its password). Domains missing
from --map are looked up in one batch per input chunk: the chunk's records
from the first such domain on wait in memory for the answers.

Buffers: records stream out as long as their domain is known. From the first
record of a new domain on, every record (known or new) is spooled to a
temporary file in --tmp, because the new domain's Yacobot is final only after
the commit; the spool is written out, in input order, after the commit. Memory
holds --map and the distinct domains seen in this run.`,
  options(cmd) {
    addDbOptions(cmd)
      .option('--map <file>', 'domain_map file (from domains-from-db); updated with new assignments')
      .option('--assign <mode>', 'how new domains are assigned: least-loaded or rendezvous', 'least-loaded')
      .option('--now <YYYYMMDDhhmmss>', 'added_at of new assignments (default: the wall clock, local time)')
      .option('--tmp <dir>', 'directory for the spool file', os.tmpdir());
  },
  normalize(raw) {
    const assign = String(raw.assign);
    if (assign !== 'least-loaded' && assign !== 'rendezvous') {
      throw new UsageError(`--assign wants least-loaded or rendezvous, got '${assign}'`);
    }
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    return {
      db: pathOption('--db', raw.db),
      timeouts: timeoutsOf(raw),
      map: raw.map === undefined ? null : pathOption('--map', raw.map),
      assign,
      now,
      tmpDir: pathOption('--tmp', raw.tmp, 'a directory name'),
    };
  },
  async run(ctx, o) {
    if (o.map) refuseOwnStreams('--map', o.map, ctx.inputPath);
    const store = await openStore(o.db, { timeouts: o.timeouts });
    ctx.onExit(() => void store.close().catch(() => undefined));
    const dbName = store.name;
    const file = ctx.inputName;
    const all = await store.yacobotLoads();
    const active = new Set(all.filter((y) => y.active).map((y) => y.id));
    // Every Yacobot: a domain the database gives to an id not among them is an error.
    const exists = new Set(all.map((y) => y.id));
    // Rows written with foreign keys off: routed there, a domain would go to a queue no Yacobot reads.
    const missing = await store.missingOwners();
    if (missing.length > 0) throw missingOwnerError(dbName, missing);
    if (active.size === 0) throw noActive(dbName, '', shellQuote(dbName));
    // Spools of runs that were SIGKILLed (their own cleanup never ran).
    removeStaleTemps(o.tmpDir, SPOOL_PREFIX);
    if (o.map) replaceableTarget(o.map); // the map is rewritten at the end: refuse /dev/null now, not after the commit
    const rendezvous = o.assign === 'rendezvous' ? await loadRendezvous() : null;
    const map = o.map ? loadDomainMap(o.map) : { domains: new BytesIndex(), owner: new Float64Array(0), existed: false };

    // Every distinct domain of this run, by its bytes: its Yacobot, 0 while it is new, or
    // PENDING until the database has answered; and how many records went out for it.
    const domains = new BytesIndex();
    let owner: Float64Array = new Float64Array(1024);
    let emitted: Float64Array = new Float64Array(1024);
    // Domains the database told us that --map did not (or told wrongly): merged into --map.
    const learned = new Map<string, number>();
    let fromMap = 0;
    let fromDb = 0;
    // Domains the database gives to a Yacobot that is not active (set so by hand: partner-db
    // disable moves them): still routed there, as the database says, but an operator must know.
    let ofInactive = 0;
    const inactiveOwners = new Set<number>();
    // Domains routed to a Yacobot that was active when they were looked up and is not at
    // the end (partner-db disable during the run): they stay with it for this run.
    let ofDisabledDuringRun = 0;
    let recordsIn = 0;
    let recordsOut = 0;
    const out = ctx.out;
    let spool: FileWriter | null = null;
    let spooled = 0;
    // Counted as they are answered: a run that stops before the commit still reports them as new.
    let newDomains = 0;

    /** Writes "yacobot_id TAB record LF" for domain `k`, the record being `b[start, end)`. */
    const emit = (k: number, b: Uint8Array, start: number, end: number) => {
      putNumbered(out, owner[k]!, b, start, end);
      emitted[k]!++;
      recordsOut++;
    };

    /** Spools record `b[start, end)` of domain `k` as "domain number TAB record": its Yacobot is final after the commit. */
    const toSpool = (k: number, b: Uint8Array, start: number, end: number) => {
      if (spool === null) {
        const name = path.join(o.tmpDir, `${ownedTempPrefix(SPOOL_PREFIX)}${Date.now()}.spool`);
        try {
          mkdirEach(o.tmpDir);
        } catch (err) {
          throw ioError(err, o.tmpDir, 'create directory');
        }
        // A --tmp that is a file fails here, as ENOTDIR (mkdir -p said EEXIST).
        spool = new FileWriter(name, 'wx');
        liveTempFiles.add(name);
        const s = spool;
        ctx.onExit(() => {
          s.abandon();
          removeQuietly(s.file);
          liveTempFiles.delete(s.file);
        });
      }
      putNumbered(spool, k, b, start, end);
      spooled++;
    };

    /**
     * Sends a record whose domain's Yacobot is known (or new) on: out while nothing is
     * spooled, else to the spool. Counted once emitted or spooled: a line that fails (a
     * database lookup, a --tmp that cannot take the spool) is in none of the counts, so
     * records_in = records_out + spooled until the commit, in a failed run too.
     */
    const route = (k: number, b: Uint8Array, start: number, end: number) => {
      if (owner[k] !== 0 && spool === null) emit(k, b, start, end);
      else toSpool(k, b, start, end);
      recordsIn++;
    };

    /** The database's answer `v` for `domain` (k), checked: its Yacobot, or the error to fail with at its first record. */
    const answer = async (k: number, domain: string, v: unknown): Promise<DataError | null> => {
      if (v === undefined) {
        owner[k] = 0;
        newDomains++;
        return null;
      }
      // A row written with foreign keys off since the check at the start (a Yacobot added since is fine).
      if (!(typeof v === 'bigint' && exists.has(Number(v)))) {
        if (typeof v === 'bigint' && v <= BigInt(Number.MAX_SAFE_INTEGER) && (await store.yacobotExists(v))) exists.add(Number(v));
        else return missingOwnerError(dbName, [{ id: typeof v === 'bigint' ? String(v) : `'${String(v)}'`, domains: 1, first: domain }]);
      }
      const d = Number(v);
      owner[k] = d;
      fromDb++;
      if (!active.has(d)) {
        ofInactive++;
        inactiveOwners.add(d);
      }
      learned.set(domain, d);
      return null;
    };

    // The records of a chunk from its first domain that waits for the database on, held
    // (the splitter never overwrites a line) until the chunk's domains are looked up in
    // one batch: output keeps input order.
    const held: { b: Uint8Array; start: number; end: number; k: number; line: number }[] = [];
    const waiting: number[] = [];
    const failedAt = new Map<number, unknown>();

    /** Looks the chunk's waiting domains up in one batch, then sends the held records on, in order. */
    const settle = async () => {
      if (waiting.length === 0 && held.length === 0) return;
      const names = waiting.map((k) => domains.key(k));
      const { found, error } = await store.ownersOf(names);
      let stop: unknown = null;
      for (let i = 0; i < waiting.length; i++) {
        const k = waiting[i]!;
        if (stop === null && !found.has(names[i]!) && error !== null) stop = error;
        if (stop !== null) {
          failedAt.set(k, stop);
          continue;
        }
        const bad = await answer(k, names[i]!, found.get(names[i]!));
        if (bad) failedAt.set(k, (stop = bad));
      }
      waiting.length = 0;
      // Taken off first: a record that fails here is not sent again by the settle after a failure.
      for (const h of held.splice(0)) {
        const err = failedAt.get(h.k);
        if (err !== undefined) throw err instanceof DataError && !err.place ? new DataError(err.code, err.message, { file, line: h.line }) : err;
        route(h.k, h.b, h.start, h.end);
      }
    };

    // Domains new in this run (owner 0 at the end of input), and what the commit decided.
    const fresh: number[] = [];
    let result: CommitResult = { owners: new Map(), assignedByUs: 0, lostRace: 0 };
    ctx.reportCounts(() => {
      const perYacobot: Record<string, number> = {};
      for (let k = 0; k < domains.size; k++) {
        if (emitted[k]! > 0) perYacobot[owner[k]!] = (perYacobot[owner[k]!] ?? 0) + emitted[k]!;
      }
      return {
        assign: o.assign,
        now: o.now,
        records_in: recordsIn,
        records_out: recordsOut,
        // Not domains.size - domains_new: a domain whose lookup failed is neither.
        domains_known: fromMap + fromDb,
        domains_from_map: fromMap,
        domains_from_db: fromDb,
        domains_new: newDomains,
        domains_of_inactive: ofInactive,
        domains_of_disabled_during_run: ofDisabledDuringRun,
        assigned_by_us: result.assignedByUs,
        lost_race: result.lostRace,
        spooled,
        per_yacobot: perYacobot,
      };
    });

    const l = new LineRef(5);
    const lines = ctx.eachLine((buf, start, end, lineNo) => {
      const bad = checkUrlRecordAt(l.set(buf, start, end));
      if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
      const k = domains.add(buf, l.tabs[3]! + 1, l.tabs[4]!);
      if (domains.added) {
        if (k === owner.length) {
          owner = grown(owner);
          emitted = grown(emitted);
        }
        const m = map.domains.find(buf, l.tabs[3]! + 1, l.tabs[4]!);
        if (m >= 0 && active.has(map.owner[m]!)) {
          fromMap++;
          owner[k] = map.owner[m]!;
        } else {
          owner[k] = PENDING;
          waiting.push(k);
        }
      }
      // Once records are spooled, all are, whatever their owner: nothing needs to wait.
      if (spool === null && (held.length > 0 || owner[k] === PENDING)) held.push({ b: buf, start, end, k, line: lineNo });
      else route(k, buf, start, end);
    }, settle);
    try {
      await lines;
    } catch (err) {
      // The lines before a bad one go out (and count) as they would have without the batch.
      await settle().catch(() => undefined);
      throw err;
    }

    if (ofInactive > 0) ctx.log.warn(...inactiveWarning(ofInactive, inactiveOwners, dbName));
    // The spool's last writes first: a full --tmp fails the run before anything is assigned.
    if (spool !== null) (spool as FileWriter).close();
    for (let k = 0; k < domains.size; k++) if (owner[k] === 0) fresh.push(k);
    if (fresh.length > 0) {
      const names = fresh.map((k) => domains.key(k));
      // Logged inside the transaction, just before its COMMIT, and again at once after it: a
      // run that dies in between leaves the first line only, and its witness (a domain this
      // transaction inserts, with added_at = --now) tells the runner whether COMMIT happened.
      result = await store.assignNew(names, chooserFor(o.assign, rendezvous), o.now, (inserted, witness) =>
        ctx.log.info({ committing: inserted, witness, added_at: o.now }, 'committing new domains'),
      );
      // Logged at once: if the run dies before its summary, the runner still learns what it assigned.
      ctx.log.info({ domains_new: fresh.length, assigned_by_us: result.assignedByUs, lost_race: result.lostRace }, 'new domains committed');
      fresh.forEach((k, n) => {
        const id = result.owners.get(names[n]!)!;
        owner[k] = id;
        learned.set(names[n]!, id);
      });
    }

    if (spool !== null) {
      const s: FileWriter = spool;
      // A spooled line is an input line (up to DEFAULT_MAX_LINE) with "domain number TAB" before it.
      const r = new FileLineReader(s.file, 1 << 20, s.file, DEFAULT_MAX_LINE + 32);
      const line = { buf: new Uint8Array(0), start: 0, end: 0 };
      try {
        let n = 0;
        while (r.next(line)) {
          const tab = line.buf.indexOf(TAB, line.start);
          emit(digitsValue(line.buf, line.start, tab), line.buf, tab + 1, line.end);
          if (++n % 4096 === 0) await out.flushIfFull();
        }
      } finally {
        r.close();
      }
    }

    // A Yacobot disabled (or removed) while the run went on was the database's answer
    // when its domains were looked up, and got their records: a domain is not split
    // between two Yacobots within a run. Not in silence: the operator who disabled it
    // expects nothing more to go there.
    {
      const activeNow = await store.activeIds();
      const gone = new Set<number>();
      let records = 0;
      for (let k = 0; k < domains.size; k++) {
        const y = owner[k]!;
        if (emitted[k]! > 0 && !activeNow.has(y) && !inactiveOwners.has(y)) {
          ofDisabledDuringRun++;
          records += emitted[k]!;
          gone.add(y);
        }
      }
      if (gone.size > 0) {
        const ids = [...gone].sort((a, b) => a - b);
        ctx.log.warn(
          { domains_of_disabled_during_run: ofDisabledDuringRun, records_to_disabled: records, yacobots: ids.slice(0, INACTIVE_SHOWN) },
          `Yacobot(s) ${ids.slice(0, INACTIVE_SHOWN).join(', ')}${ids.length > INACTIVE_SHOWN ? ` and ${ids.length - INACTIVE_SHOWN} more` : ''} stopped being active during the run (partner-db disable?): ` +
            `the ${ofDisabledDuringRun} domain(s) they owned when looked up were routed to them all the same (${records} record(s)); ` +
            'from the next run on these domains go to the Yacobots the database gives them now',
        );
      }
    }

    // After the records: the map (a copy of the database, which already holds every
    // assignment) is written, with its fsync, while logsaver works on them, not before.
    if (o.map && (learned.size > 0 || !map.existed)) {
      await out.end(); // every record, to its last byte (a flush holds the last LF back)
      writeDomainMap(o.map, map, learned);
    }
  },
};
