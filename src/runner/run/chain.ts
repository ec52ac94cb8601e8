// The chain of one run: its stages' command lines (limit-domains' with a cap or a
// carry), and the bash pipeline that runs them.
import * as path from 'node:path';
import { shellQuote } from '../../core/errors.js';
import type { RunnerOptions } from '../options/types.js';
import { carryWaits } from '../state/carry.js';
import { type RunPaths, stageLog, stagingLayout } from '../state/layout.js';

/** One stage command: its name and arguments (the binary is bin/<name>). */
export interface StageCmd {
  name: string;
  args: string[];
}

/**
 * The chain of one run (SPEC "Stages", staged outputs). upload-domains gets no --map:
 * the database's index answers the hour's distinct domains, so a run's cost follows
 * the hour, not the partner table.
 */
export function chainOf(o: RunnerOptions, p: RunPaths, now: string): StageCmd[] {
  // The reflog comes on stdin (pipeline.ts); its messages name it.
  const ad = ['--input-name', p.reflog, '--rejects', p.rejects, '--tmp', p.tmp];
  if (o.maxRejectRatio !== null) ad.push('--max-reject-ratio', o.maxRejectRatio);
  if (o.memory !== null) ad.push('--memory', o.memory);
  const fu = ['--current-out', p.currentNext, '--now', now];
  if (o.resendAfter !== null) fu.push('--resend-after', o.resendAfter);
  if (o.keep !== null) fu.push('--keep', o.keep);
  const limit = limitStage(o, p, now);
  return [
    { name: 'analyze-dump', args: ad },
    { name: 'group-sum', args: [] },
    { name: 'join-current', args: ['--current', p.currentIn] },
    { name: 'filter-url', args: fu },
    ...(limit === null ? [] : [limit]),
    { name: 'upload-domains', args: [...o.dbArgs, '--now', now, '--tmp', p.tmp] },
    { name: 'logsaver', args: ['--queue-dir', p.queue, '--name', p.queueName] },
  ];
}

/**
 * A bash script running `chain` as one pipeline: stdin of the script feeds the first
 * stage, each stage's stderr goes through tee to its own log file (stageLog, numbered
 * from 1) and to descriptor teeFd + its index, the last stage's stdout is discarded,
 * and the script prints the exit statuses (PIPESTATUS) on stdout.
 */
export function pipelineScript(chain: readonly StageCmd[], binDir: string, p: RunPaths, teeFd: number): string {
  const parts = chain.map((s, i) => {
    const cmd = [path.join(binDir, s.name), ...s.args].map(shellQuote).join(' ');
    const file = shellQuote(stageLog(p, i + 1, s.name));
    // The copies' descriptors are the tees' alone (closed after the redirection that hands one over).
    return `${cmd} 2> >(${teeCommand(file, teeFd + i)})${chain.map((_, j) => ` ${teeFd + j}>&-`).join('')}`;
  });
  return `${parts.join(' \\\n  | ')} >/dev/null\necho "\${PIPESTATUS[*]}"\n`;
}

/**
 * The shell command that copies its input (a stage's stderr) to the log file `file`
 * (quoted) and to descriptor `fd`, which the runner reads. Signals that stop the stages
 * are ignored (the stage's last lines still reach both); an output that fails (a full
 * disk, a runner gone) is left and the other kept (tee -p: GNU coreutils).
 */
export function teeCommand(file: string, fd: number): string {
  return `trap '' INT TERM HUP; exec tee -p ${file} >&${fd} 2>/dev/null`;
}

/** The cap of a run without --max-per-domain whose state still holds a carry: no domain holds anything back, and the carry drains. */
const NO_CAP = 2 ** 31;

/**
 * limit-domains' command for a run, between filter-url and upload-domains (reading the
 * carry at p.carryIn); null when there is no cap and nothing waits: then the chain is the
 * one without the stage.
 */
export function limitStage(o: RunnerOptions, p: RunPaths, now: string): StageCmd | null {
  if (o.maxPerDomain === null && !carryWaits(o.state)) return null;
  const args = ['--max-per-domain', String(o.maxPerDomain ?? NO_CAP), '--carry', p.carryIn, '--carry-out', stagingLayout(p.staging).carryNext];
  args.push('--now', now, '--carry-keep', String(o.carryKeepMs / 1000), '--tmp', p.tmp);
  if (o.memory !== null) args.push('--memory', o.memory);
  return { name: 'limit-domains', args };
}
