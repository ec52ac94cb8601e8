// What the state directory remembers besides current_log: the settings that decide what
// current_log holds (STATE/settings.json, written by each commit), and whether a run was
// ever committed (so that a missing current_log is a loss, not a first run).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { formatDuration } from '../core/time.js';
import { exists } from './fsutil.js';
import type { RunnerOptions } from './options.js';

/** The settings of the last committed run, as STATE/settings.json holds them. */
export interface StoredSettings {
  keep_ms: number;
  resend_after_ms: number;
  /** With a cap: limit-domains' --max-per-domain and --carry-keep (ms); absent: no cap. */
  max_per_domain?: number;
  carry_keep_ms?: number;
  /** The run that stored them. */
  run?: string;
}

/** Where a state directory keeps its settings. */
export function settingsFile(state: string): string {
  return path.join(state, 'settings.json');
}

/** Where the commit keeps a copy of the last committed current_log. */
export function currentLogLink(state: string): string {
  return path.join(state, 'current_log.last');
}

/**
 * The text of settings.json (one JSON line) for the settings a committed run used (the
 * cap's only with one), and what keyed its URLs (rekey.ts's KeyedBy; absent from a marker
 * of a runner before it).
 */
export function settingsText(record: {
  run: string;
  keep_ms: number;
  resend_after_ms: number;
  max_per_domain?: number | undefined;
  carry_keep_ms?: number | undefined;
  keyed_by?: unknown;
}): string {
  const { run, keep_ms, resend_after_ms, max_per_domain, carry_keep_ms, keyed_by } = record;
  const cap = max_per_domain === undefined ? {} : { max_per_domain, carry_keep_ms, carry_keep: formatDuration(carry_keep_ms ?? 0) };
  return (
    JSON.stringify({ keep_ms, resend_after_ms, keep: formatDuration(keep_ms), resend_after: formatDuration(resend_after_ms), ...cap, run, keyed_by }) + '\n'
  );
}

/** `x` as StoredSettings when it carries both durations as whole non-negative ms, else null. */
function asSettings(x: unknown): StoredSettings | null {
  const { keep_ms, resend_after_ms, run } = (x ?? {}) as { keep_ms?: unknown; resend_after_ms?: unknown; run?: unknown };
  const ok = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
  if (!ok(keep_ms) || !ok(resend_after_ms)) return null;
  const { max_per_domain, carry_keep_ms } = x as { max_per_domain?: unknown; carry_keep_ms?: unknown };
  const cap = ok(max_per_domain) && ok(carry_keep_ms) ? { max_per_domain, carry_keep_ms } : {};
  return { keep_ms, resend_after_ms, ...cap, ...(typeof run === 'string' && { run }) };
}

/**
 * The settings stored with the state: STATE/settings.json, else those of the last
 * committed line of `past` (runs.jsonl, oldest first) that carries them (a state made
 * before settings.json), else null (nothing committed yet: this invocation's are adopted).
 */
export function storedSettings(state: string, past: readonly unknown[]): { settings: StoredSettings; from: string } | null {
  const file = settingsFile(state);
  let text: string | null = null;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    /* none yet */
  }
  if (text !== null) {
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* damaged: the runs.jsonl lines below still say */
    }
    const s = asSettings(parsed);
    if (s !== null) return { settings: s, from: file };
  }
  for (let i = past.length - 1; i >= 0; i--) {
    if ((past[i] as { status?: unknown } | null)?.status !== 'ok') continue;
    const s = asSettings(past[i]);
    if (s !== null) return { settings: s, from: path.join(state, 'runs.jsonl') };
  }
  return null;
}

/**
 * The refusal when this invocation's --keep or --resend-after differs from the stored
 * settings (naming both values and the way on), or null when they agree.
 */
export function settingsRefusal(
  o: Pick<RunnerOptions, 'keepMs' | 'resendAfterMs' | 'maxPerDomain' | 'carryKeepMs'>,
  stored: { settings: StoredSettings; from: string },
): string | null {
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
 * Whether a run was ever committed in `state`: settings.json is there (each commit
 * writes it), or a committed line in `past` (runs.jsonl of a state made before it).
 */
export function everCommitted(state: string, past: readonly unknown[]): boolean {
  if (fs.existsSync(settingsFile(state))) return true;
  return past.some((r) => (r as { status?: unknown } | null)?.status === 'ok');
}

/**
 * The failure when current_log is missing from a state where runs were committed (null
 * when it is there, or nothing was committed yet).
 */
export function missingCurrentLog(state: string, past: readonly unknown[]): string | null {
  const file = path.join(state, 'current_log');
  if (exists(file) || !everCommitted(state, past)) return null;
  const link = currentLogLink(state);
  const restore = exists(link)
    ? `restore it from the copy the runner keeps of the last committed one (cp -p ${link} ${file}), then run again; or `
    : `restore it from a backup, then run again; or `;
  return (
    `${file}: missing, though runs were committed here: it is the memory of the URLs sent, and without it ` +
    `every URL would be sent again as new. ${restore[0]!.toUpperCase()}${restore.slice(1)}` +
    `to start the memory over, run with --reset-current-log (config key reset-current-log = yes)`
  );
}
