// STATE/staging/RUN/run.json: a run's attempt, fixed when it is first attempted (its now,
// its queue files' name), reused by reruns after a crash.
import * as fs from 'node:fs';
import { writeFileDurable } from '../../core/durable.js';
import type { RunPaths } from './layout.js';
import type { NowSource } from './run-record.js';

/** STATE/staging/RUN/run.json: fixed when a run is first attempted, reused by reruns after a crash. */
export interface RunJson {
  run_id: string;
  run: string;
  now: string;
  now_source: NowSource;
  created: string;
  attempts: number;
  /** Domains that dead attempts assigned (their upload-domains committed, the run did not). */
  assigned_earlier?: number;
  /** The attempt whose assignments assigned_earlier last took in, so that none is counted twice. */
  assigned_counted?: number;
  /** The name of the run's queue files, fixed at its first attempt (queueNameFor); absent: the run's. */
  queue?: string;
}

/** The run.json of run `p`, or null when there is none or it is not one. */
export function readRunJson(p: Pick<RunPaths, 'runJson'>): RunJson | null {
  try {
    const j = JSON.parse(fs.readFileSync(p.runJson, 'utf8')) as RunJson;
    return typeof j.now === 'string' && typeof j.run_id === 'string' ? j : null;
  } catch {
    return null;
  }
}

/** Writes `rj` as run `p`'s run.json, durably. */
export function writeRunJson(p: Pick<RunPaths, 'runJson'>, rj: RunJson): void {
  writeFileDurable(p.runJson, JSON.stringify(rj) + '\n');
}
