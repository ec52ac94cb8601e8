// What a run's runs.jsonl line says of the per-domain cap.
import type { RunnerOptions } from '../options/types.js';
import type { RunRecord } from '../state/run-record.js';

/** What the runs.jsonl line says of the cap: its settings (with a cap), and limit-domains' counts (when it ran). */
export function carryRecord(o: RunnerOptions, stages: Record<string, Record<string, unknown>>): Partial<RunRecord> {
  const out: Partial<RunRecord> = o.maxPerDomain === null ? {} : { max_per_domain: o.maxPerDomain, carry_keep_ms: o.carryKeepMs };
  const ld = stages['limit-domains'];
  if (ld === undefined) return out;
  const num = (k: string) => (typeof ld[k] === 'number' ? (ld[k] as number) : 0);
  out.carried_in = num('carried_in');
  out.carried_out = num('carried_out');
  out.carry_expired = num('carry_expired');
  out.capped_domains = (ld.capped_domains as Record<string, number> | undefined) ?? {};
  if (typeof ld.carry_oldest_decided === 'string') out.carry_oldest_decided = ld.carry_oldest_decided;
  return out;
}
