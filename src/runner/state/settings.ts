// STATE/settings.json: the settings of the last committed run, which decide what
// current_log holds (and what keyed its URLs, state/keying.ts), written by each commit;
// and whether a run was ever committed (so that a missing current_log is a loss, not a
// first run).
import * as fs from 'node:fs';
import { formatDuration } from '../../core/time.js';
import { stateLayout } from './layout.js';

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
  const L = stateLayout(state);
  const file = L.settings;
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
    if (s !== null) return { settings: s, from: L.runs };
  }
  return null;
}

/**
 * Whether a run was ever committed in `state`: settings.json is there (each commit
 * writes it), or a committed line in `past` (runs.jsonl of a state made before it).
 */
export function everCommitted(state: string, past: readonly unknown[]): boolean {
  if (fs.existsSync(stateLayout(state).settings)) return true;
  return past.some((r) => (r as { status?: unknown } | null)?.status === 'ok');
}
