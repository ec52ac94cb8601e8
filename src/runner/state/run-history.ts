// Questions over the lines of STATE/runs.jsonl (as the tail read gives them, oldest
// first): pure, no file read here.
import type { RunRecord } from '../plan.js';

/** The newest committed run among `records`, or null. */
export function lastCommitted(records: readonly unknown[]): RunRecord | null {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i] as Partial<RunRecord>;
    if (r.status === 'ok' && typeof r.run === 'string' && typeof r.start === 'string' && typeof r.seconds === 'number') return r as RunRecord;
  }
  return null;
}
