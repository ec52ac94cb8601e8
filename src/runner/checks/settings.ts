// Before an invocation's runs: its settings against those stored with the state
// (state/settings.ts); other ones stop it with exit 2, unless --accept-settings-change.
import { UsageError } from '../../core/errors.js';
import { formatDuration } from '../../core/time.js';
import type { SettingsOptions } from '../options/types.js';
import type { Say } from '../say.js';
import { type StoredSettings, storedSettings } from '../state/settings.js';

/** One setting that differs: its flag, and its value here and as stored, in words. */
interface SettingDiff {
  flag: string;
  here: string;
  there: string;
}

/** The settings of this invocation that differ from the stored ones (the cap's carry-keep only when both have a cap). */
function settingsDiffs(o: Omit<SettingsOptions, 'state' | 'acceptSettingsChange'>, stored: StoredSettings): SettingDiff[] {
  const diffs: SettingDiff[] = [];
  const differ = (flag: string, here: number, there: number) => {
    if (here !== there) diffs.push({ flag, here: formatDuration(here), there: formatDuration(there) });
  };
  differ('--keep', o.keepMs, stored.keep_ms);
  differ('--resend-after', o.resendAfterMs, stored.resend_after_ms);
  const cap = (n: number | null | undefined) => (n === null || n === undefined ? 'none' : String(n));
  if (cap(o.maxPerDomain) !== cap(stored.max_per_domain))
    diffs.push({ flag: '--max-per-domain', here: cap(o.maxPerDomain), there: cap(stored.max_per_domain) });
  else if (stored.max_per_domain !== undefined) differ('--carry-keep', o.carryKeepMs, stored.carry_keep_ms!);
  return diffs;
}

/**
 * The refusal when this invocation's settings (--keep, --resend-after, the cap's) differ
 * from the stored settings (naming both values and the way on), or null when they agree.
 */
export function settingsRefusal(o: Omit<SettingsOptions, 'state' | 'acceptSettingsChange'>, stored: { settings: StoredSettings; from: string }): string | null {
  const diffs = settingsDiffs(o, stored.settings);
  if (diffs.length === 0) return null;
  const by = stored.settings.run === undefined ? '' : `, by run ${stored.settings.run}`;
  return (
    `settings differ from those stored with the state (${stored.from}${by}): ${diffs.map((d) => `${d.flag} ${d.here} here, ${d.there} stored`).join('; ')}. ` +
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
  const diffs = settingsDiffs(o, stored!.settings);
  say.warn(
    `settings change accepted (--accept-settings-change): ${diffs.map((d) => `${d.flag} ${d.here}`).join(', ')} ` +
      `replace${diffs.length === 1 ? 's' : ''} ${diffs.map((d) => `${d.flag} ${d.there}`).join(', ')} once a run commits`,
    { fields: { keep_ms: o.keepMs, resend_after_ms: o.resendAfterMs, stored: stored!.settings }, msg: 'settings change accepted' },
  );
}
