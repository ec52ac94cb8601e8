// The checks a run makes on the state before it runs: settings stored with the state, a missing or changed current_log.
import * as path from 'node:path';
import type { Logger } from 'pino';
import { UsageError, visibleName } from '../core/errors.js';
import { formatDuration } from '../core/time.js';
import { tailRecords } from './fsutil.js';
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
  process.stderr.write(
    `${PROG}: warning: ${visibleName(run)}: ${visibleName(path.join(o.state, 'current_log'))} is missing; starting the memory of sent URLs over (--reset-current-log): every URL of this run is sent as new\n`,
  );
  return null;
}

/**
 * The failure of run `run` when STATE/current_log is not what the last commit left
 * (memoryChanged), else null; with --reset-current-log, says that the run goes on with it as it is.
 */
export function memoryDiffers(o: RunnerOptions, log: Logger, run: string): string | null {
  const changed = memoryChanged(o.state);
  if (changed === null || !o.resetCurrentLog) return changed;
  log.warn(
    { run, current_log: path.join(o.state, 'current_log') },
    'current_log is not what the last commit left; going on with it as it is (--reset-current-log)',
  );
  process.stderr.write(
    `${PROG}: warning: ${visibleName(run)}: ${visibleName(path.join(o.state, 'current_log'))} is not what the last commit left; going on with it as it is (--reset-current-log): the URLs it lost are sent as new\n`,
  );
  return null;
}
