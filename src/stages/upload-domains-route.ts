// upload-domains' routing: each record's domain looked up (in --map, then in the
// partner database, a chunk of domains at a time), new domains assigned once the input
// is read, records written in input order (those of new domains through a spool in
// --tmp). Its command line and run are in upload-domains.ts.
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { Count, StageContext } from '../cli/stage.js';
import type { RendezvousFn, Chooser, NewDomains } from '../core/store/assign.js';
import { movedSince, movesSoFar, type Routed } from '../core/store/moves.js';
import type { PartnerStore, Timeouts } from '../core/store/store.js';
import { missingOwnerError } from '../core/store/yacobots.js';
import { mkdirEach } from '../core/dirs.js';
import { DataError, clipText, ioError } from '../core/errors.js';
import { domainTooLong } from '../core/host.js';
import { grown } from '../core/arrays.js';
import { BytesIndex } from '../core/bytesindex.js';
import { digitsValue, findTab, putNumbered } from '../core/bytes.js';
import { LineRef, U_DOMAIN } from '../core/records.js';
import { RecordScanner, checkUrlRecordAt } from '../core/record-checks.js';
import type { DomainMap } from '../core/domain-map.js';
import { DEFAULT_MAX_LINE, FileLineReader } from '../core/lines.js';
import { FileWriter } from '../core/writers.js';
import { liveTempFiles, ownedTempPrefix, removeQuietly } from '../core/temps.js';

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

/**
 * The chooser of new domains' Yacobots for `mode`: least-loaded (counts grow as it
 * picks) or weighted rendezvous over the active Yacobots.
 */
export function chooserFor(mode: AssignMode, rendezvous: RendezvousFn | null): Chooser {
  return mode === 'rendezvous' ? (d, active) => rendezvous!(d, active) : (_d, _active, least) => least.pick();
}

/** How many inactive Yacobots the warning names, and gives a command for. */
export const INACTIVE_SHOWN = 5;

/** What is wrong with a checked record's domain as one to route and store (analyze-dump's rule on its length), or null. */
function longDomain(l: LineRef): string | null {
  const long = domainTooLong(l.fieldEnd(U_DOMAIN) - l.fieldStart(U_DOMAIN));
  return long === null ? null : `domain too long (${long}): '${clipText(l.text().split('\t')[U_DOMAIN]!)}'`;
}

/** The partner database as one run of upload-domains sees it at its start. */
export interface Partners {
  store: PartnerStore;
  /** The active Yacobots' ids. */
  active: Set<number>;
  /** Every Yacobot's id: a domain the database gives to an id not among them is an error. */
  exists: Set<number>;
  rendezvous: RendezvousFn | null;
}

/**
 * The spool in --tmp: records whose Yacobot is final only after the commit, as
 * "domain number TAB record", created at the first one and removed on every exit.
 */
class Spool {
  private w: FileWriter | null = null;
  count = 0;

  constructor(
    private readonly ctx: StageContext,
    private readonly dir: string,
  ) {}

  get started(): boolean {
    return this.w !== null;
  }

  /** Appends record `b[start, end)` of domain `k`. */
  put(k: number, b: Uint8Array, start: number, end: number): void {
    putNumbered(this.w ?? this.create(), k, b, start, end);
    this.count++;
  }

  private create(): FileWriter {
    const name = path.join(this.dir, `${ownedTempPrefix(SPOOL_PREFIX)}${Date.now()}.spool`);
    try {
      mkdirEach(this.dir);
    } catch (err) {
      throw ioError(err, this.dir, 'create directory');
    }
    // A --tmp that is a file fails here, as ENOTDIR (mkdir -p said EEXIST).
    const w = (this.w = new FileWriter(name, 'wx'));
    liveTempFiles.add(name);
    this.ctx.onExit(() => {
      w.abandon();
      removeQuietly(w.file);
      liveTempFiles.delete(w.file);
    });
    return w;
  }

  /** Writes the last records out: a full --tmp fails the run here, before anything is assigned. */
  close(): void {
    this.w?.close();
  }

  /** Gives every spooled record, in order, to `fn(k, b, start, end)`, awaiting `pause` every 4096. */
  async replay(fn: (k: number, b: Uint8Array, start: number, end: number) => void, pause: () => Promise<void> | undefined): Promise<void> {
    if (this.w === null) return;
    // A spooled line is an input line (up to DEFAULT_MAX_LINE) with "domain number TAB" before it.
    const r = new FileLineReader(this.w.file, 1 << 20, this.w.file, DEFAULT_MAX_LINE + 32);
    const line = { buf: new Uint8Array(0), start: 0, end: 0 };
    try {
      let n = 0;
      while (r.next(line)) {
        const tab = findTab(line.buf, line.start, line.end);
        fn(digitsValue(line.buf, line.start, tab), line.buf, tab + 1, line.end);
        if (++n % 4096 === 0) await pause();
      }
    } finally {
      r.close();
    }
  }
}

/**
 * The records of a chunk held until its domains are looked up, in input order: each
 * one's bytes (`bufs[i]` from `starts[i]` to `ends[i]`), domain `ks[i]` and line number;
 * arrays, not an object a record.
 */
class HeldRecords {
  count = 0;
  private bufs: Uint8Array[] = [];
  private starts = new Int32Array(1024);
  private ends = new Int32Array(1024);
  private ks = new Int32Array(1024);
  private lines = new Float64Array(1024);

  push(b: Uint8Array, start: number, end: number, k: number, line: number): void {
    const i = this.count++;
    if (i === this.starts.length) {
      this.starts = grown(this.starts);
      this.ends = grown(this.ends);
      this.ks = grown(this.ks);
      this.lines = grown(this.lines);
    }
    this.bufs[i] = b;
    this.starts[i] = start;
    this.ends[i] = end;
    this.ks[i] = k;
    this.lines[i] = line;
  }

  /** Gives every held record to `fn`, in order, having let go of them first: one that fails is not given again. */
  drain(fn: (k: number, b: Uint8Array, start: number, end: number, line: number) => void): void {
    const n = this.count;
    this.count = 0;
    for (let i = 0; i < n; i++) fn(this.ks[i]!, this.bufs[i]!, this.starts[i]!, this.ends[i]!, this.lines[i]!);
  }
}

/**
 * One run's routing: every distinct domain of the input, by its bytes, with its
 * Yacobot (0 while it is new, PENDING until the database has answered) and how many
 * records went out for it. Memory follows the input's distinct domains (and --map).
 */
export class Router {
  readonly domains = new BytesIndex();
  owner: Float64Array = new Float64Array(1024);
  emitted: Float64Array = new Float64Array(1024);
  /** Domains the database told us that --map did not (or told wrongly): merged into --map. */
  readonly learned: Map<string, number> | null;
  readonly spool: Spool;
  fromMap = 0;
  fromDb = 0;
  /** Counted as they are answered: a run that stops before the commit still reports them as new. */
  newDomains = 0;
  // Domains the database gives to a Yacobot that is not active (set so by hand: partner-db
  // disable moves them): still routed there, as the database says, but an operator must know.
  ofInactive = 0;
  readonly inactiveOwners = new Set<number>();
  ofDisabledDuringRun = 0;
  recordsIn = 0;
  recordsOut = 0;
  assignedByUs = 0;
  lostRace = 0;
  // The records of a chunk from its first domain that waits for the database on, held
  // (the splitter never overwrites a line) until the chunk's domains are looked up in
  // one batch: output keeps input order.
  private readonly held = new HeldRecords();
  private readonly waiting: number[] = [];
  private readonly failedAt = new Map<number, unknown>();

  constructor(
    private readonly ctx: StageContext,
    private readonly o: UploadDomainsOptions,
    private readonly db: Partners,
    private readonly map: DomainMap,
  ) {
    this.learned = o.map ? new Map() : null;
    this.spool = new Spool(ctx, o.tmpDir);
  }

  /** Reads the input to its end, sending each record out, or holding or spooling it. */
  async readInput(): Promise<void> {
    const l = new LineRef(5);
    const file = this.ctx.inputName;
    const lines = this.ctx.eachLine(
      (buf, start, end, lineNo, checked) => {
        l.set(buf, start, end);
        const bad = (checked ? null : checkUrlRecordAt(l)) ?? longDomain(l);
        if (bad) throw new DataError('BAD_RECORD', bad, { file, line: lineNo });
        const k = this.domainOf(buf, l.fieldStart(U_DOMAIN), l.fieldEnd(U_DOMAIN));
        // Held even once records are spooled: a lookup that fails must fail the run at its
        // record, not let the record go to the spool with no Yacobot.
        if (this.held.count > 0 || this.owner[k] === PENDING) this.held.push(buf, start, end, k, lineNo);
        else this.route(k, buf, start, end);
      },
      () => this.settle(),
      new RecordScanner('url', l.tabs).scan,
    );
    try {
      await lines;
    } catch (err) {
      // The lines before a bad one go out (and count) as they would have without the batch.
      await this.settle().catch(() => undefined);
      throw err;
    }
  }

  /** The index of domain `b[start, end)`, looked up in --map when first seen (else left to the database). */
  private domainOf(b: Uint8Array, start: number, end: number): number {
    const k = this.domains.add(b, start, end);
    if (!this.domains.added) return k;
    if (k === this.owner.length) {
      this.owner = grown(this.owner);
      this.emitted = grown(this.emitted);
    }
    const m = this.map.domains.find(b, start, end);
    if (m >= 0 && this.db.active.has(this.map.owner[m]!)) {
      this.fromMap++;
      this.owner[k] = this.map.owner[m]!;
    } else {
      this.owner[k] = PENDING;
      this.waiting.push(k);
    }
    return k;
  }

  /** Writes "yacobot_id TAB record LF" for domain `k`, the record being `b[start, end)`. */
  private emit(k: number, b: Uint8Array, start: number, end: number): void {
    putNumbered(this.ctx.out, this.owner[k]!, b, start, end);
    this.emitted[k]!++;
    this.recordsOut++;
  }

  /**
   * Sends a record whose domain's Yacobot is known (or new) on: out while nothing is
   * spooled, else to the spool. Counted once emitted or spooled: a line that fails (a
   * database lookup, a --tmp that cannot take the spool) is in none of the counts, so
   * records_in = records_out + spooled until the commit, in a failed run too.
   */
  private route(k: number, b: Uint8Array, start: number, end: number): void {
    if (this.owner[k] !== 0 && !this.spool.started) this.emit(k, b, start, end);
    else this.spool.put(k, b, start, end);
    this.recordsIn++;
  }

  /** Looks the chunk's waiting domains up in one batch, then sends the held records on, in order. */
  private async settle(): Promise<void> {
    if (this.waiting.length === 0 && this.held.count === 0) return;
    const names = this.waiting.map((k) => this.domains.key(k));
    const { found, error } = await this.db.store.ownersOf(names);
    let stop: unknown = null;
    for (let i = 0; i < this.waiting.length; i++) {
      const k = this.waiting[i]!;
      if (stop === null && !found.has(names[i]!) && error !== null) stop = error;
      if (stop !== null) {
        this.failedAt.set(k, stop);
        continue;
      }
      const bad = await this.answer(k, names[i]!, found.get(names[i]!));
      if (bad) this.failedAt.set(k, (stop = bad));
    }
    this.waiting.length = 0;
    const failed = this.failedAt;
    this.held.drain((k, b, start, end, line) => {
      const err = failed.size === 0 ? undefined : failed.get(k);
      if (err !== undefined) throw err instanceof DataError && !err.place ? new DataError(err.code, err.message, { file: this.ctx.inputName, line }) : err;
      this.route(k, b, start, end);
    });
  }

  /** The database's answer `v` for `domain` (k), checked: its Yacobot, or the error to fail with at its first record. */
  private async answer(k: number, domain: string, v: unknown): Promise<DataError | null> {
    if (v === undefined) {
      this.owner[k] = 0;
      this.newDomains++;
      return null;
    }
    const { store, exists, active } = this.db;
    // A row written with foreign keys off since the check at the start (a Yacobot added since is fine).
    if (!(typeof v === 'bigint' && exists.has(Number(v)))) {
      if (typeof v === 'bigint' && v <= BigInt(Number.MAX_SAFE_INTEGER) && (await store.yacobotExists(v))) exists.add(Number(v));
      else return missingOwnerError(store.name, [{ id: typeof v === 'bigint' ? String(v) : `'${String(v)}'`, domains: 1, first: domain }]);
    }
    const d = Number(v);
    this.owner[k] = d;
    this.fromDb++;
    if (!active.has(d)) {
      this.ofInactive++;
      this.inactiveOwners.add(d);
    }
    this.learned?.set(domain, d);
    return null;
  }

  /** Gives the new domains (owner 0 at the end of input) their Yacobots, in one transaction. */
  async assignFresh(): Promise<void> {
    const { owner, domains } = this;
    let n = 0;
    for (let k = 0; k < domains.size; k++) if (owner[k] === 0) n++;
    if (n === 0) return;
    const fresh = new Int32Array(n);
    for (let k = 0, i = 0; k < domains.size; k++) if (owner[k] === 0) fresh[i++] = k;
    const now = this.o.now;
    const news: NewDomains = {
      count: n,
      name: (i) => domains.key(fresh[i]!),
      owner: (i, id) => {
        owner[fresh[i]!] = id;
        this.learned?.set(domains.key(fresh[i]!), id);
      },
    };
    // Logged inside the transaction, just before its COMMIT, and again at once after it: a
    // run that dies in between leaves the first line only, and its token (recorded in
    // domain_commit by this transaction alone) tells the runner whether COMMIT happened.
    const token = randomBytes(16).toString('hex');
    const r = await this.db.store.assignNew(
      news,
      chooserFor(this.o.assign, this.db.rendezvous),
      now,
      (inserted, witness) => this.ctx.log.info({ committing: inserted, token, witness, added_at: now }, 'committing new domains'),
      token,
    );
    this.assignedByUs = r.assignedByUs;
    this.lostRace = r.lostRace;
    await this.checkOwners(fresh);
    // Logged at once: if the run dies before its summary, the runner still learns what it assigned.
    this.ctx.log.info({ domains_new: n, assigned_by_us: r.assignedByUs, lost_race: r.lostRace }, 'new domains committed');
  }

  /**
   * Fails the run when a domain the commit found taken (another writer's row, read
   * back) names a Yacobot that does not exist (a row written with foreign keys off).
   */
  private async checkOwners(fresh: Int32Array): Promise<void> {
    const { store, exists } = this.db;
    for (const k of fresh) {
      const id = this.owner[k]!;
      if (exists.has(id)) continue;
      if (Number.isSafeInteger(id) && id > 0 && (await store.yacobotExists(BigInt(id)))) exists.add(id);
      else throw missingOwnerError(store.name, [{ id: String(id), domains: 1, first: this.domains.key(k) }]);
    }
  }

  /** Writes the spooled records out, in input order, now that every Yacobot is final. */
  async replaySpool(): Promise<void> {
    await this.spool.replay(
      (k, b, start, end) => this.emit(k, b, start, end),
      () => this.ctx.out.flushIfFull(),
    );
  }

  /**
   * Warns when a Yacobot routed to stopped being active during the run. It was the
   * database's answer when its domains were looked up, and got their records: a domain
   * is not split between two Yacobots within a run. Not in silence: the operator who
   * disabled it expects nothing more to go there.
   */
  async warnDisabledDuringRun(): Promise<void> {
    const activeNow = await this.db.store.activeIds();
    const gone = new Set<number>();
    let records = 0;
    for (let k = 0; k < this.domains.size; k++) {
      const y = this.owner[k]!;
      if (this.emitted[k]! > 0 && !activeNow.has(y) && !this.inactiveOwners.has(y)) {
        this.ofDisabledDuringRun++;
        records += this.emitted[k]!;
        gone.add(y);
      }
    }
    if (gone.size === 0) return;
    const ids = [...gone].sort((a, b) => a - b);
    const shown = ids.slice(0, INACTIVE_SHOWN).join(', ') + (ids.length > INACTIVE_SHOWN ? ` and ${ids.length - INACTIVE_SHOWN} more` : '');
    this.ctx.log.warn(
      { domains_of_disabled_during_run: this.ofDisabledDuringRun, records_to_disabled: records, yacobots: ids.slice(0, INACTIVE_SHOWN) },
      `Yacobot(s) ${shown} stopped being active during the run (partner-db disable?): ` +
        `the ${this.ofDisabledDuringRun} domain(s) they owned when looked up were routed to them all the same (${records} record(s)); ` +
        'from the next run on these domains go to the Yacobots the database gives them now',
    );
  }

  /**
   * Warns when domains this run routed were moved to another Yacobot meanwhile
   * (partner-db assign or import, which count their moves: `before` is the count when
   * the run began): their records went to the owner they had when looked up.
   */
  async warnMovedDuringRun(before: string): Promise<void> {
    if ((await movesSoFar(this.db.store)) === before) return;
    const routed: Routed[] = [];
    for (let k = 0; k < this.domains.size; k++)
      if (this.emitted[k]! > 0) routed.push({ name: this.domains.key(k), owner: this.owner[k]!, records: this.emitted[k]! });
    const moved = await movedSince(this.db.store, routed);
    if (moved.domains === 0) return;
    this.ctx.log.warn(
      { domains_moved_during_run: moved.domains, records_to_former_owner: moved.records },
      `${moved.domains} domain(s) were given to another Yacobot during the run (partner-db assign or import?): ` +
        `their ${moved.records} record(s) of this run went to the Yacobot that owned them when looked up; ` +
        'from the next run on they go to the Yacobot the database gives them now',
    );
  }

  /** The summary line's counts. */
  counts(): Record<string, Count> {
    const perYacobot: Record<string, number> = {};
    for (let k = 0; k < this.domains.size; k++) {
      const y = this.owner[k]!;
      if (this.emitted[k]! > 0) perYacobot[y] = (perYacobot[y] ?? 0) + this.emitted[k]!;
    }
    return {
      assign: this.o.assign,
      now: this.o.now,
      records_in: this.recordsIn,
      records_out: this.recordsOut,
      // Not domains.size - domains_new: a domain whose lookup failed is neither.
      domains_known: this.fromMap + this.fromDb,
      domains_from_map: this.fromMap,
      domains_from_db: this.fromDb,
      domains_new: this.newDomains,
      domains_of_inactive: this.ofInactive,
      domains_of_disabled_during_run: this.ofDisabledDuringRun,
      assigned_by_us: this.assignedByUs,
      lost_race: this.lostRace,
      spooled: this.spool.count,
      per_yacobot: perYacobot,
    };
  }
}
