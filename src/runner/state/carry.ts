// STATE/carry: the URLs decided and not sent yet (their domain over --max-per-domain),
// which limit-domains reads and writes; the commit replaces it with current_log.
import * as fs from 'node:fs';
import { stateLayout } from './layout.js';

/** Whether URLs wait in STATE/carry: it is there and not empty. */
export function carryWaits(state: string): boolean {
  try {
    return fs.statSync(stateLayout(state).carry).size > 0;
  } catch {
    return false;
  }
}
