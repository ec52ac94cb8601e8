// STATE/last-run.json: the runs.jsonl line of the last committed run, kept by each
// invocation that writes the metrics file, so that the run_* series outlive a rotation
// of runs.jsonl (an invocation with nothing to do after it finds no committed line there).
import * as fs from 'node:fs';
import { writeFileDurable } from '../../core/durable.js';
import type { RunRecord } from './run-record.js';
import { stateLayout } from './layout.js';
import { lastCommitted } from './run-history.js';

/** The record kept in STATE/last-run.json, or null when there is none or it is not one. */
function readKept(state: string): RunRecord | null {
  try {
    const r = JSON.parse(fs.readFileSync(stateLayout(state).lastRun, 'utf8')) as Partial<RunRecord>;
    return r.status === 'ok' && typeof r.run === 'string' && typeof r.run_id === 'string' && typeof r.seconds === 'number' ? (r as RunRecord) : null;
  } catch {
    return null;
  }
}

/**
 * The last committed run: from `records`, the last MiB of runs.jsonl (kept in
 * last-run.json when it is not there yet), else the one last-run.json keeps; null when
 * neither has one.
 */
export function lastRunKept(state: string, records: readonly unknown[]): RunRecord | null {
  const run = lastCommitted(records);
  const kept = readKept(state);
  if (run === null) return kept;
  if (kept?.run_id !== run.run_id || kept.attempt !== run.attempt) {
    try {
      writeFileDurable(stateLayout(state).lastRun, JSON.stringify(run) + '\n');
    } catch {
      /* kept next time; the metrics still have it from runs.jsonl now */
    }
  }
  return run;
}
