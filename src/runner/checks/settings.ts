// Before an invocation's runs: its settings against those stored with the state
// (state/settings.ts); other ones stop it with exit 2, unless --accept-settings-change.
import { UsageError } from '../../core/errors.js';
import { formatDuration } from '../../core/time.js';
import type { SettingsOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { type StoredSettings, storedSettings } from '../state/settings.js';

/**
 * The refusal when this invocation's --keep or --resend-after differs from the stored
 * settings (naming both values and the way on), or null when they agree.
 */
export function settingsRefusal(o: Omit<SettingsOptions, 'state' | 'acceptSettingsChange'>, stored: { settings: StoredSettings; from: string }): string | null {
  const diffs: string[] = [];
  const differ = (flag: string, here: number, there: number) => {
    if (here !== there) diffs.push(`${flag} ${formatDuration(here)} here, ${formatDuration(there)} stored`);
  };
  differ('--keep', o.keepMs, stored.settings.keep_ms);
  differ('--resend-after', o.resendAfterMs, stored.settings.resend_after_ms);
  const cap = (n: number | null | undefined) => (n === null || n === undefined ? 'none' : String(n));
  const storedCap = stored.settings.max_per_domain;
  if (cap(o.maxPerDomain) !== cap(storedCap)) diffs.push(`--max-per-domain ${cap(o.maxPerDomain)} here, ${cap(storedCap)} stored`);
  else if (storedCap !== undefined) differ('--carry-keep', o.carryKeepMs, stored.settings.carry_keep_ms!);
  if (diffs.length === 0) return null;
  const by = stored.settings.run === undefined ? '' : `, by run ${stored.settings.run}`;
  return (
    `settings differ from those stored with the state (${stored.from}${by}): ${diffs.join('; ')}. ` +
    `They decide what current_log remembers (a run by hand without the cron's --config?). ` +
    `Run with the stored settings, or, to change them, once with --accept-settings-change ` +
    `(config key accept-settings-change = yes): the run goes on and its settings are stored; nothing was run`
  );
}

/**
 * Throws a UsageError (exit 2, before any stage runs) when this invocation's settings
 * differ from those stored with the state, unless --accept-settings-change: then says
 * that the run goes on with them (its commit stores them).
 */
export function checkSettings(o: SettingsOptions, say: Say, past: readonly unknown[]): void {
  const stored = storedSettings(o.state, past);
  const refusal = stored === null ? null : settingsRefusal(o, stored);
  if (refusal === null) return;
  if (!o.acceptSettingsChange) {
    say.log?.error({ keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, 'settings differ from those stored with the state');
    throw new UsageError(refusal);
  }
  say.warn(
    `settings change accepted (--accept-settings-change): --keep ${formatDuration(o.keepMs)}, --resend-after ${formatDuration(o.resendAfterMs)} ` +
      `replace --keep ${formatDuration(stored!.settings.keep_ms)}, --resend-after ${formatDuration(stored!.settings.resend_after_ms)} once a run commits`,
    { fields: { keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, msg: 'settings change accepted' },
  );
}
