// Every check made before the chain, in order: what `check` runs one line each, and
// the ones an invocation adds before its first run's chain (the inbox and the state's
// directories are checked when it opens the state, the settings before its runs, the
// memory before each run).
import { UsageError } from '../../core/errors.js';
import type { RunnerOptions } from '../options/types.js';
import { stateLayout } from '../state/layout.js';
import { lockNow } from '../state/lock.js';
import { readMemory } from '../state/memory.js';
import { storedSettings } from '../state/settings.js';
import { checkDatabase } from './database.js';
import { identityLine } from './identity.js';
import { memoryChanged, missingCurrentLog } from './memory.js';
import { checkQueueDir, yacobotDirs } from './queue-dir.js';
import { settingsRefusal } from './settings.js';
import { checkInbox, checkRunsFile, checkWritable } from './state-dirs.js';

/** What the checks so far found: runs.jsonl's lines, and the active Yacobots (null until the database was read). */
export interface Found {
  past: readonly unknown[];
  active: number[] | null;
}

/** One check: its name, and what runs it, returning its `ok` line or throwing what is wrong. */
export interface Check {
  name: string;
  /** Also made by every invocation that has runs, just before the first chain. */
  beforeChain: boolean;
  run(o: RunnerOptions, found: Found): Promise<string>;
}

/** The checks, in the order `check` prints them. */
export const CHECKS: readonly Check[] = [
  {
    name: 'inbox',
    beforeChain: false,
    async run(o) {
      checkInbox(o.inbox);
      return `${o.inbox}: a directory this user can move reflogs out of`;
    },
  },
  {
    name: 'state',
    beforeChain: false,
    async run(o) {
      checkRunsFile(stateLayout(o.state).runs);
      checkWritable(o);
      const l = lockNow(stateLayout(o.state).lock);
      const lock = l.held
        ? `the lock is held by process ${l.pid ?? '?'}${l.since ? ` since ${l.since}` : ''} (a run under way: an invocation now exits 75)`
        : 'the lock is free';
      return `${o.state}: writable where a commit writes; ${lock}`;
    },
  },
  { name: 'settings', beforeChain: false, run: async (o, f) => settingsLine(o, f.past) },
  { name: 'memory', beforeChain: false, run: async (o, f) => memoryLine(o, f.past) },
  {
    name: 'database',
    beforeChain: true,
    async run(o, f) {
      const found = await checkDatabase(o, f.past);
      f.active = found.active;
      return found.ok;
    },
  },
  // Only `check` asks: an invocation learns it as it moves the identity, before its first claim.
  { name: 'identity', beforeChain: false, run: async (o, f) => (f.active === null ? 'not asked: the partner database did not answer above' : identityLine(o)) },
  // Without the database's answer (check goes on past a failed check): the Yacobots that have a directory there.
  { name: 'queue', beforeChain: true, run: async (o, f) => checkQueueDir(o.queueDir, f.active ?? yacobotDirs(o.queueDir)) },
];

/** Runs the checks an invocation makes just before its first chain (the database, the queue directory); throws the first fault. */
export async function checkBeforeChain(o: RunnerOptions, past: readonly unknown[]): Promise<void> {
  const found: Found = { past, active: null };
  for (const c of CHECKS) if (c.beforeChain) await c.run(o, found);
}

/** The settings check's line: as stored, or to be stored; a UsageError (exit 2 in a run) when they differ. */
function settingsLine(o: RunnerOptions, past: readonly unknown[]): string {
  const stored = storedSettings(o.state, past);
  if (stored === null) return 'none stored yet: the first committed run stores these';
  const refusal = settingsRefusal(o, stored);
  if (refusal === null) return `as stored (${stored.from})`;
  if (o.acceptSettingsChange) return `differ from those stored; --accept-settings-change stores these at the next commit`;
  throw new UsageError(refusal);
}

/** The memory check's line: current_log and the carry are what the last commit left (or --reset-current-log goes on with them). */
function memoryLine(o: RunnerOptions, past: readonly unknown[]): string {
  const lost = missingCurrentLog(o.state, past);
  const faults = memoryChanged(o.state);
  const wrong = lost ?? (faults.length > 0 ? faults.map((f) => f.message).join('. Also: ') : null);
  if (wrong !== null && !o.resetCurrentLog) throw new Error(wrong);
  if (wrong !== null) return 'current_log or the carry is not what the last commit left; --reset-current-log goes on with them as they are';
  const mem = readMemory(o.state);
  return mem === null ? 'no commit recorded yet: current_log starts empty' : `current_log and the carry are what the commit of run ${mem.run} left`;
}
