import * as os from 'node:os';

const SIZE_RE = /^(\d+)([KMG]i?B?|B)?$/i;
const UNIT: Record<string, number> = { '': 1, b: 1, k: 1 << 10, m: 1 << 20, g: 1 << 30 };

/** Parses a byte size: `65536`, `64K`, `256M`, `1G` (binary units; `MiB`, `MB` alike); null if malformed. */
export function parseSize(text: string): number | null {
  const m = SIZE_RE.exec(text);
  if (!m) return null;
  const unit = (m[2] ?? '').charAt(0).toLowerCase();
  return Number(m[1]) * UNIT[unit]!;
}

/**
 * A memory budget (analyze-dump --memory): its bytes, or what is wrong with it. At
 * least 1M, and not beyond the machine's memory (such a budget would never spill,
 * which is no bound at all).
 */
export function parseBudget(text: string): number | { error: string } {
  const n = parseSize(text);
  if (n === null) return { error: `wants a size in bytes, K, M or G (e.g. 64M, 1G), got '${text}'` };
  if (n < 1 << 20) return { error: `wants a size of at least 1M (e.g. 64M, 1G), got '${text}'` };
  if (n > os.totalmem()) return { error: `${text} is more than this machine's memory (${Math.floor(os.totalmem() / 2 ** 20)}M)` };
  return n;
}
