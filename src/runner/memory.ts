// The memory of what was sent, checked, not trusted: each commit records the identity
// (size, URL count, SHA-256) of current_log and of the carry in STATE/memory.json and
// keeps a real copy of each, STATE/current_log.last and STATE/carry.last; a run checks
// both against that record before the chain reads them. memory.json also keeps the
// committed run that made current_log forget the most (the replay warning's
// reference), so that rotating runs.jsonl cannot silence it.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from '../core/errors.js';
import { exists } from '../core/durable.js';
import { mostForgetful, type CommittedNow, type RunPaths, type RunRecord } from './plan.js';
import { currentLogLink, settingsFile } from './settings.js';
import { carryBackup, carryFile, stagedCarry } from './carry.js';

/** What identifies one version of current_log. */
export interface LogIdentity {
  size: number;
  /** Its lines: one URL each. */
  urls: number;
  sha256: string;
}

/** STATE/memory.json: what the last commit left as current_log, and the replay warning's reference. */
export interface MemoryRecord {
  /** The run whose commit wrote it. */
  run: string;
  current_log: LogIdentity;
  /** What it left as STATE/carry: null when none; absent in the records of runners before the carry was checked. */
  carry?: LogIdentity | null;
  /** The committed run whose now less its --keep reaches latest (mostForgetful), of all committed so far. */
  forgetful: CommittedNow | null;
}

/** Where a state directory keeps its memory record. */
export function memoryFile(state: string): string {
  return path.join(state, 'memory.json');
}

/** The staged copy of a run's new current_log that its commit renames to STATE/current_log.last. */
export function stagedBackup(staging: string): string {
  return path.join(staging, 'work', 'current_log.last');
}

/** The staged copy of a run's new carry that its commit renames to STATE/carry.last. */
export function stagedCarryBackup(staging: string): string {
  return path.join(staging, 'work', 'carry.last');
}

/** The identity of `file` (size, lines, SHA-256), read in one pass; a DataError naming it when it cannot be read. */
export function identityOf(file: string): LogIdentity {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  let size = 0;
  let urls = 0;
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (err) {
    throw ioError(err, file, 'read');
  }
  try {
    for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) {
      const chunk = buf.subarray(0, n);
      hash.update(chunk);
      size += n;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) urls++;
    }
  } catch (err) {
    throw ioError(err, file, 'read');
  } finally {
    fs.closeSync(fd);
  }
  return { size, urls, sha256: hash.digest('hex') };
}

/** STATE/memory.json as recorded, or null when there is none (nothing committed by a runner that writes it) or it cannot be read. */
export function readMemory(state: string): MemoryRecord | null {
  let j: Partial<MemoryRecord>;
  try {
    j = JSON.parse(fs.readFileSync(memoryFile(state), 'utf8')) as Partial<MemoryRecord>;
  } catch {
    return null;
  }
  const ok = typeof j.run === 'string' && isIdentity(j.current_log) && (j.carry === undefined || j.carry === null || isIdentity(j.carry));
  return ok ? ({ ...j, forgetful: j.forgetful ?? null } as MemoryRecord) : null;
}

/** Whether `id` has the shape of a LogIdentity. */
function isIdentity(id: LogIdentity | undefined): boolean {
  return id !== undefined && id !== null && Number.isSafeInteger(id.size) && Number.isSafeInteger(id.urls) && typeof id.sha256 === 'string';
}

/** The replay warning's reference kept in the state (null when none is). */
export function storedForgetful(state: string): CommittedNow | null {
  return readMemory(state)?.forgetful ?? null;
}

/** Copies `from` to `to` and returns the copy's identity; a DataError naming `to` (`what`: what is copied) when it cannot. */
function copyWithIdentity(from: string, to: string, what: string): LogIdentity {
  try {
    fs.copyFileSync(from, to);
  } catch (err) {
    fs.rmSync(to, { force: true });
    throw ioError(err, to, `copy ${what}`);
  }
  return identityOf(to);
}

/**
 * Before run `p`'s commit: copies its new current_log and the carry it leaves (the
 * staged one, else STATE/carry as it is, if any) to their staged backups and returns
 * the memory record its commit writes (the copies' identities, and the replay
 * reference moved on by `record`). A DataError when a copy cannot be made.
 */
export function stageMemory(state: string, p: Pick<RunPaths, 'staging' | 'work' | 'currentNext'>, record: RunRecord): MemoryRecord {
  const current_log = copyWithIdentity(p.currentNext, stagedBackup(p.staging), 'current_log');
  const left = exists(stagedCarry(p)) ? stagedCarry(p) : exists(carryFile(state)) ? carryFile(state) : null;
  const carry = left === null ? null : copyWithIdentity(left, stagedCarryBackup(p.staging), 'the carry');
  const forgetful = mostForgetful([record], record.keep_ms, storedForgetful(state));
  return { run: record.run, current_log, carry, forgetful };
}

/** Whether identities `a` and `b` are the same. */
function sameIdentity(a: LogIdentity, b: LogIdentity): boolean {
  return a.size === b.size && a.urls === b.urls && a.sha256 === b.sha256;
}

/** How `found` differs from `want`, in words. */
function howDiffers(found: LogIdentity | null, want: LogIdentity): string {
  if (found === null) return 'deleted';
  if (found.size === 0) return 'emptied';
  if (found.size < want.size) return 'cut or an older copy';
  return found.size === want.size ? 'edited, or an older copy' : 'edited, or another copy';
}

/** One identity in words. */
function describe(id: LogIdentity | null): string {
  return id === null ? 'no file' : `${id.size} bytes, ${id.urls} URLs, sha256 ${id.sha256.slice(0, 12)}`;
}

/** A file of the memory that is not what the last commit left, and the failure that says so. */
export interface MemoryFault {
  /** What it is: `current_log` or `carry`. */
  what: 'current_log' | 'carry';
  file: string;
  message: string;
}

/** What a fault of each file costs, in words. */
const STAKES = {
  current_log: 'it is the memory of the URLs sent, and what it lost would be sent again as new',
  carry: 'it holds the URLs decided and not sent yet (over their domain\'s cap), which current_log has as sent, and what it lost would not be sent',
};

/**
 * The faults of STATE/current_log and STATE/carry: each that is not what the last commit
 * left (memory.json), with a message naming the backup that matches and the command that
 * restores it. current_log missing is missingCurrentLog's case; the carry missing is a
 * fault when the commit left one with URLs (or, recorded by a runner before the carry was
 * checked, when the stored settings have a cap).
 */
export function memoryChanged(state: string): MemoryFault[] {
  const mem = readMemory(state);
  const faults: MemoryFault[] = [];
  const current = path.join(state, 'current_log');
  if (mem !== null && exists(current)) {
    const found = identityOf(current);
    if (!sameIdentity(found, mem.current_log)) faults.push(fault('current_log', current, currentLogLink(state), mem.run, found, mem.current_log));
  }
  const carry = carryChanged(state, mem);
  if (carry !== null) faults.push(carry);
  return faults;
}

/** The fault of STATE/carry (see memoryChanged), or null. */
function carryChanged(state: string, mem: MemoryRecord | null): MemoryFault | null {
  const file = carryFile(state);
  const there = exists(file);
  if (mem?.carry === undefined) return there || !cappedBefore(state) ? null : { what: 'carry', file, message: carryLost(file) };
  const found = there ? identityOf(file) : null;
  const want = mem.carry;
  if (want === null) {
    if (found === null || found.size === 0) return null;
    const message =
      `${file}: not what the commit of run ${mem.run} left (no carry; found ${describe(found)}): put here from elsewhere, it may hold URLs sent already. ` +
      `Take it out of the state directory, then run again; or, to send what it holds, run once with --reset-current-log (config key reset-current-log = yes)`;
    return { what: 'carry', file, message };
  }
  if (found === null ? want.size === 0 : sameIdentity(found, want)) return null;
  return fault('carry', file, carryBackup(state), mem.run, found, want);
}

/** The fault of `file` (`what`), found as `found` where the commit of `run` left `want`; `backup` is its copy. */
function fault(what: MemoryFault['what'], file: string, backup: string, run: string, found: LogIdentity | null, want: LogIdentity): MemoryFault {
  const name = what === 'carry' ? 'the carry' : what;
  const restore = backupMatches(backup, want)
    ? `${backup} matches it: restore it with 'cp -p ${backup} ${file}', then run again`
    : `no copy here matches it (${backup} neither): restore ${name} from a backup of that run, then run again`;
  const message =
    `${file}: not what the commit of run ${run} left (${describe(want)}; found ${describe(found)}: ${howDiffers(found, want)}): ${STAKES[what]}. ${restore}; ` +
    `or, to go on with ${name} as it is, run once with --reset-current-log (config key reset-current-log = yes)`;
  return { what, file, message };
}

/** Whether the settings stored with `state` have a cap (a run with --max-per-domain was committed). */
function cappedBefore(state: string): boolean {
  try {
    return (JSON.parse(fs.readFileSync(settingsFile(state), 'utf8')) as { max_per_domain?: unknown }).max_per_domain !== undefined;
  } catch {
    return false;
  }
}

/** The failure for a carry missing from a state whose record of it predates the carry's check. */
function carryLost(file: string): string {
  return (
    `${file}: missing, though a run with --max-per-domain was committed here: ${STAKES.carry}. ` +
    `Restore it from a backup, then run again; or, to go on without it, run once with --reset-current-log (config key reset-current-log = yes)`
  );
}

/** Whether `backup` exists and has identity `want`. */
function backupMatches(backup: string, want: LogIdentity): boolean {
  try {
    return fs.statSync(backup).size === want.size && sameIdentity(identityOf(backup), want);
  } catch {
    return false;
  }
}
