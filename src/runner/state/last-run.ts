// STATE/last-run.json: the runs.jsonl line of the last committed run, kept by each
// invocation that writes the metrics file, so that the run_* series outlive a rotation
// of runs.jsonl (an invocation with nothing to do after it finds no committed line there).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeFileDurable } from '../core/durable.js';
import { lastCommittedRun } from './last-invocation.js';
import type { RunRecord } from './plan.js';

/** Where a state directory keeps the last committed run's record. */
export function lastRunFile(state: string): string {
  return path.join(state, 'last-run.json');
}

/** The record kept in STATE/last-run.json, or null when there is none or it is not one. */
function readKept(state: string): RunRecord | null {
  try {
    const r = JSON.parse(fs.readFileSync(lastRunFile(state), 'utf8')) as Partial<RunRecord>;
    return r.status === 'ok' && typeof r.run === 'string' && typeof r.run_id === 'string' && typeof r.seconds === 'number' ? (r as RunRecord) : null;
  } catch {
    return null;
  }
}

/**
 * The last committed run: from the last MiB of runs.jsonl (kept in last-run.json when it
 * is not there yet), else the one last-run.json keeps; null when neither has one.
 */
export function lastRunKept(state: string): RunRecord | null {
  const run = lastCommittedRun(state);
  const kept = readKept(state);
  if (run === null) return kept;
  if (kept?.run_id !== run.run_id || kept.attempt !== run.attempt) {
    try {
      writeFileDurable(lastRunFile(state), JSON.stringify(run) + '\n');
    } catch {
      /* kept next time; the metrics still have it from runs.jsonl now */
    }
  }
  return run;
}
