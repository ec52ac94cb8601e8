// What status and explain say of a state directory that holds no trace of this job:
// the likely cause is a wrong --state or a missing --config, not a job never run.
import * as fs from 'node:fs';
import { stateLayout } from '../state/layout.js';

/** When `o.state` holds no trace of a run (no such directory, or no runs.jsonl, settings.json nor last-invocation.json), the likely cause in words; else null. */
export function noStateHint(o: { state: string; config: string | null }): string | null {
  const L = stateLayout(o.state);
  if ([L.runs, L.settings, L.lastInvocation].some((f) => fs.existsSync(f))) return null;
  const what = fs.existsSync(o.state) ? 'no runs.jsonl, settings.json or last-invocation.json' : 'no such directory';
  const config = o.config === null ? ", or the cron's --config not given here" : '';
  return `${o.state} holds no trace of this job (${what}): a wrong --state${config}?`;
}
