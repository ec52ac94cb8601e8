// The per-domain cap in the runner: limit-domains in the chain (with --max-per-domain, or
// while URLs still wait), STATE/carry (committed with current_log, checked and backed up
// as it is: memory.ts), and what a run's record says of it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunnerOptions } from './options.js';
import type { RunPaths, RunRecord, StageCmd } from './plan.js';

/** The cap of a run without --max-per-domain whose state still holds a carry: no domain holds anything back, and the carry drains. */
const NO_CAP = 2 ** 31;

/** Where the state keeps the URLs that wait for a later run (carry records). */
export function carryFile(state: string): string {
  return path.join(state, 'carry');
}

/** Where the commit keeps a copy of the carry it left. */
export function carryBackup(state: string): string {
  return path.join(state, 'carry.last');
}

/** Where a run stages its next carry (renamed over STATE/carry by the commit). */
export function stagedCarry(p: Pick<RunPaths, 'work'>): string {
  return path.join(p.work, 'carry');
}

/** Whether URLs wait in STATE/carry: it is there and not empty. */
export function carryWaits(state: string): boolean {
  try {
    return fs.statSync(carryFile(state)).size > 0;
  } catch {
    return false;
  }
}

/**
 * limit-domains' command for a run, between filter-url and upload-domains (reading the
 * carry at p.carryIn); null when there is no cap and nothing waits: then the chain is the
 * one without the stage.
 */
export function limitStage(o: RunnerOptions, p: RunPaths, now: string): StageCmd | null {
  if (o.maxPerDomain === null && !carryWaits(o.state)) return null;
  const args = ['--max-per-domain', String(o.maxPerDomain ?? NO_CAP), '--carry', p.carryIn, '--carry-out', stagedCarry(p)];
  args.push('--now', now, '--carry-keep', String(o.carryKeepMs / 1000), '--tmp', p.tmp);
  if (o.memory !== null) args.push('--memory', o.memory);
  return { name: 'limit-domains', args };
}

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
