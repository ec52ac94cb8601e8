// The checks a run makes on the state before it runs: settings stored with the state, a missing or changed current_log or carry.
import * as path from 'node:path';
import type { Logger } from 'pino';
import { UsageError, visibleName } from '../core/errors.js';
import { formatDuration } from '../core/time.js';
import { tailRecords } from './state/runs-log.js';
import { PROG, type RunnerOptions } from './options.js';
import { memoryChanged } from './memory.js';
import { missingCurrentLog, settingsRefusal, storedSettings } from './settings.js';

/**
 * Throws a UsageError (exit 2, before any stage runs) when this invocation's settings
 * differ from those stored with the state, unless --accept-settings-change: then says
 * that the run goes on with them (its commit stores them).
 */
export function checkSettings(o: RunnerOptions, log: Logger, past: readonly unknown[]): void {
  const stored = storedSettings(o.state, past);
  const refusal = stored === null ? null : settingsRefusal(o, stored);
  if (refusal === null) return;
  if (!o.acceptSettingsChange) {
    log.error({ keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, 'settings differ from those stored with the state');
    throw new UsageError(refusal);
  }
  log.warn({ keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, 'settings change accepted');
  process.stderr.write(
    `${PROG}: warning: settings change accepted (--accept-settings-change): --keep ${formatDuration(o.keepMs)}, --resend-after ${formatDuration(o.resendAfterMs)} ` +
      `replace --keep ${formatDuration(stored!.settings.keep_ms)}, --resend-after ${formatDuration(stored!.settings.resend_after_ms)} once a run commits\n`,
  );
}

/**
 * The failure of run `run` when STATE/current_log is missing though runs were committed
 * (missingCurrentLog), else null; with --reset-current-log, says that the memory starts over.
 */
export function memoryLost(o: RunnerOptions, log: Logger, run: string): string | null {
  const past = tailRecords(path.join(o.state, 'runs.jsonl'));
  const lost = missingCurrentLog(o.state, past);
  if (lost === null || !o.resetCurrentLog) return lost;
  log.warn({ run, current_log: path.join(o.state, 'current_log') }, 'current_log is missing; starting the memory of sent URLs over (--reset-current-log)');
  process.stderr.write(`${PROG}: warning: ${visibleName(run)}: ${visibleName(path.join(o.state, 'current_log'))} is missing; starting the memory of sent URLs over (--reset-current-log): every URL of this run is sent as new\n`);
  return null;
}

/**
 * The failure of run `run` when STATE/current_log or STATE/carry is not what the last
 * commit left (memoryChanged): the step it fails at (the first such file) and the
 * message naming each; else null. With --reset-current-log, says that the run goes on
 * with them as they are.
 */
export function memoryDiffers(o: RunnerOptions, log: Logger, run: string): { step: string; error: string } | null {
  const faults = memoryChanged(o.state);
  if (faults.length === 0) return null;
  if (!o.resetCurrentLog) return { step: faults[0]!.what, error: faults.map((f) => f.message).join('. Also: ') };
  for (const f of faults) {
    const lost = f.what === 'carry' ? 'the URLs it lost are not sent' : 'the URLs it lost are sent as new';
    log.warn({ run, [f.what]: f.file }, `${f.what} is not what the last commit left; going on with it as it is (--reset-current-log)`);
    process.stderr.write(`${PROG}: warning: ${visibleName(run)}: ${visibleName(f.file)} is not what the last commit left; going on with it as it is (--reset-current-log): ${lost}\n`);
  }
  return null;
}
