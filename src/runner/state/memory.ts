// STATE/memory.json: the identity (size, URL count, SHA-256) of the current_log and the
// carry each commit left, of which it also keeps a real copy (STATE/current_log.last,
// STATE/carry.last), and the committed run that made current_log forget the most (the
// replay warning's reference), so that rotating runs.jsonl cannot silence it.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { exists } from '../../core/durable.js';
import { ioError } from '../../core/errors.js';
import { type RunPaths, stagingLayout, stateLayout } from './layout.js';
import { type CommittedNow, mostForgetful } from './run-history.js';
import type { RunRecord } from './run-record.js';

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
    for (let n: number; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) {
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
    j = JSON.parse(fs.readFileSync(stateLayout(state).memory, 'utf8')) as Partial<MemoryRecord>;
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
  const S = stagingLayout(p.staging);
  const current_log = copyWithIdentity(p.currentNext, S.currentLast, 'current_log');
  const carryNow = stateLayout(state).carry;
  const left = exists(S.carryNext) ? S.carryNext : exists(carryNow) ? carryNow : null;
  const carry = left === null ? null : copyWithIdentity(left, S.carryLast, 'the carry');
  const forgetful = mostForgetful([record], record.keep_ms, storedForgetful(state));
  return { run: record.run, current_log, carry, forgetful };
}

/** Whether identities `a` and `b` are the same. */
export function sameIdentity(a: LogIdentity, b: LogIdentity): boolean {
  return a.size === b.size && a.urls === b.urls && a.sha256 === b.sha256;
}
