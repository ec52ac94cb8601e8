// The memory of what was sent, checked, not trusted: each commit records current_log's
// identity (size, URL count, SHA-256) in STATE/memory.json and keeps a real copy of it,
// STATE/current_log.last; a run checks current_log against that record before the chain
// reads it. memory.json also keeps the committed run that made current_log forget the
// most (the replay warning's reference), so that rotating runs.jsonl cannot silence it.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from '../core/errors.js';
import { exists } from '../core/durable.js';
import { mostForgetful, type CommittedNow, type RunRecord } from './plan.js';
import { currentLogLink } from './settings.js';

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
  const id = j.current_log;
  const ok = typeof j.run === 'string' && id !== undefined && Number.isSafeInteger(id.size) && Number.isSafeInteger(id.urls) && typeof id.sha256 === 'string';
  return ok ? ({ ...j, forgetful: j.forgetful ?? null } as MemoryRecord) : null;
}

/** The replay warning's reference kept in the state (null when none is). */
export function storedForgetful(state: string): CommittedNow | null {
  return readMemory(state)?.forgetful ?? null;
}

/**
 * Before a run's commit: copies its new current_log (`next`) to the staged backup and
 * returns the memory record its commit writes (the copy's identity, and the replay
 * reference moved on by `record`). A DataError when the copy cannot be made.
 */
export function stageMemory(state: string, staging: string, next: string, record: RunRecord): MemoryRecord {
  const backup = stagedBackup(staging);
  try {
    fs.copyFileSync(next, backup);
  } catch (err) {
    fs.rmSync(backup, { force: true });
    throw ioError(err, backup, 'copy current_log');
  }
  const forgetful = mostForgetful([record], record.keep_ms, storedForgetful(state));
  return { run: record.run, current_log: identityOf(backup), forgetful };
}

/** Whether identities `a` and `b` are the same. */
function sameIdentity(a: LogIdentity, b: LogIdentity): boolean {
  return a.size === b.size && a.urls === b.urls && a.sha256 === b.sha256;
}

/** How `found` differs from `want`, in words. */
function howDiffers(found: LogIdentity, want: LogIdentity): string {
  if (found.size === 0) return 'emptied';
  if (found.size < want.size) return 'cut or an older copy';
  return found.size === want.size ? 'edited, or an older copy' : 'edited, or another copy';
}

/** One identity in words. */
function describe(id: LogIdentity): string {
  return `${id.size} bytes, ${id.urls} URLs, sha256 ${id.sha256.slice(0, 12)}`;
}

/**
 * The failure of a run when STATE/current_log is not what the last commit left there
 * (memory.json), naming the backup that matches and the command that restores it; null
 * when it matches, is missing (missingCurrentLog's case) or nothing recorded it yet.
 */
export function memoryChanged(state: string): string | null {
  const mem = readMemory(state);
  const file = path.join(state, 'current_log');
  if (mem === null || !exists(file)) return null;
  const found = identityOf(file);
  if (sameIdentity(found, mem.current_log)) return null;
  const backup = currentLogLink(state);
  const restore = backupMatches(backup, mem.current_log)
    ? `${backup} matches it: restore it with 'cp -p ${backup} ${file}', then run again`
    : `no copy here matches it (${backup} neither): restore current_log from a backup of that run, then run again`;
  return (
    `${file}: not what the commit of run ${mem.run} left (${describe(mem.current_log)}; found ${describe(found)}: ${howDiffers(found, mem.current_log)}): ` +
    `it is the memory of the URLs sent, and what it lost would be sent again as new. ${restore}; ` +
    `or, to go on with current_log as it is, run once with --reset-current-log (config key reset-current-log = yes)`
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
