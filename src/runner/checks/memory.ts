// Before a run's chain: current_log and the carry are what the last commit left
// (state/memory.ts), or the run fails naming the file, how it differs and the copy
// that restores it; with --reset-current-log, it goes on with them as they are.
import * as fs from 'node:fs';
import { exists } from '../../core/durable.js';
import { visibleName } from '../../core/errors.js';
import type { RunnerOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { stateLayout } from '../state/layout.js';
import { type LogIdentity, type MemoryRecord, identityOf, readMemory, sameIdentity } from '../state/memory.js';
import { runsLog } from '../state/runs-log.js';
import { everCommitted } from '../state/settings.js';

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

/** Where the documentation says how to back up the state (what "restore from a backup" means). */
export const BACKUPS = 'docs/operations.md, "Backing up the state"';

/** What a fault of each file costs, in words. */
const STAKES = {
  current_log: 'it is the memory of the URLs sent, and what it lost would be sent again as new',
  carry: "it holds the URLs decided and not sent yet (over their domain's cap), which current_log has as sent, and what it lost would not be sent",
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
  const L = stateLayout(state);
  const current = L.currentLog;
  if (mem !== null && exists(current)) {
    const found = identityOf(current);
    if (!sameIdentity(found, mem.current_log)) faults.push(fault('current_log', current, L.currentLogLast, mem.run, found, mem.current_log));
  }
  const carry = carryChanged(state, mem);
  if (carry !== null) faults.push(carry);
  return faults;
}

/** The fault of STATE/carry (see memoryChanged), or null. */
function carryChanged(state: string, mem: MemoryRecord | null): MemoryFault | null {
  const file = stateLayout(state).carry;
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
  return fault('carry', file, stateLayout(state).carryLast, mem.run, found, want);
}

/** The fault of `file` (`what`), found as `found` where the commit of `run` left `want`; `backup` is its copy. */
function fault(what: MemoryFault['what'], file: string, backup: string, run: string, found: LogIdentity | null, want: LogIdentity): MemoryFault {
  const name = what === 'carry' ? 'the carry' : what;
  const restore = backupMatches(backup, want)
    ? `${backup} matches it: restore it with 'cp -p ${backup} ${file}', then run again`
    : `no copy here matches it (${backup} neither): restore ${name} from a backup of that run (${BACKUPS}), then run again`;
  const message =
    `${file}: not what the commit of run ${run} left (${describe(want)}; found ${describe(found)}: ${howDiffers(found, want)}): ${STAKES[what]}. ${restore}; ` +
    `or, to go on with ${name} as it is, run once with --reset-current-log (config key reset-current-log = yes)`;
  return { what, file, message };
}

/** Whether the settings stored with `state` have a cap (a run with --max-per-domain was committed). */
function cappedBefore(state: string): boolean {
  try {
    return (JSON.parse(fs.readFileSync(stateLayout(state).settings, 'utf8')) as { max_per_domain?: unknown }).max_per_domain !== undefined;
  } catch {
    return false;
  }
}

/** The failure for a carry missing from a state whose record of it predates the carry's check. */
function carryLost(file: string): string {
  return (
    `${file}: missing, though a run with --max-per-domain was committed here: ${STAKES.carry}. ` +
    `Restore it from a backup, then run again; or, to go on without it, run once with --reset-current-log (config key reset-current-log = yes); backups: ${BACKUPS}`
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

/**
 * The failure when current_log is missing from a state where runs were committed (null
 * when it is there, or nothing was committed yet).
 */
export function missingCurrentLog(state: string, past: readonly unknown[]): string | null {
  const L = stateLayout(state);
  const file = L.currentLog;
  if (exists(file) || !everCommitted(state, past)) return null;
  const link = L.currentLogLast;
  const restore = exists(link)
    ? `restore it from the copy the runner keeps of the last committed one (cp -p ${link} ${file}), then run again; or `
    : `restore it from a backup, then run again; or `;
  return (
    `${file}: missing, though runs were committed here: it is the memory of the URLs sent, and without it ` +
    `every URL would be sent again as new. ${restore[0]!.toUpperCase()}${restore.slice(1)}` +
    `to start the memory over, run with --reset-current-log (config key reset-current-log = yes)` +
    (exists(link) ? '' : `; backups: ${BACKUPS}`)
  );
}

/**
 * The failure of run `run` when STATE/current_log is missing though runs were committed
 * (missingCurrentLog), else null; with --reset-current-log, says that the memory starts over.
 */
export function memoryLost(o: Pick<RunnerOptions, 'state' | 'resetCurrentLog'>, say: Say, run: string): string | null {
  const L = stateLayout(o.state);
  const past = runsLog(o.state).tail();
  const lost = missingCurrentLog(o.state, past);
  if (lost === null || !o.resetCurrentLog) return lost;
  say.warn(
    `${visibleName(run)}: ${visibleName(L.currentLog)} is missing; starting the memory of sent URLs over (--reset-current-log): every URL of this run is sent as new`,
    {
      fields: { run, current_log: L.currentLog },
      msg: 'current_log is missing; starting the memory of sent URLs over (--reset-current-log)',
    },
  );
  return null;
}

/**
 * The failure of run `run` when STATE/current_log or STATE/carry is not what the last
 * commit left (memoryChanged): the step it fails at (the first such file) and the
 * message naming each; else null. With --reset-current-log, says that the run goes on
 * with them as they are.
 */
export function memoryDiffers(o: Pick<RunnerOptions, 'state' | 'resetCurrentLog'>, say: Say, run: string): { step: string; error: string } | null {
  const faults = memoryChanged(o.state);
  if (faults.length === 0) return null;
  if (!o.resetCurrentLog) return { step: faults[0]!.what, error: faults.map((f) => f.message).join('. Also: ') };
  for (const f of faults) {
    const lost = f.what === 'carry' ? 'the URLs it lost are not sent' : 'the URLs it lost are sent as new';
    say.warn(`${visibleName(run)}: ${visibleName(f.file)} is not what the last commit left; going on with it as it is (--reset-current-log): ${lost}`, {
      fields: { run, [f.what]: f.file },
      msg: `${f.what} is not what the last commit left; going on with it as it is (--reset-current-log)`,
    });
  }
  return null;
}
