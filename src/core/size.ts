const SIZE_RE = /^(\d+)([KMG]i?B?|B)?$/i;
const UNIT: Record<string, number> = { '': 1, b: 1, k: 1 << 10, m: 1 << 20, g: 1 << 30 };

/** Parses a byte size: `65536`, `64K`, `256M`, `1G` (binary units; `MiB`, `MB` alike); null if malformed. */
export function parseSize(text: string): number | null {
  const m = SIZE_RE.exec(text.trim());
  if (!m) return null;
  const unit = (m[2] ?? '').charAt(0).toLowerCase();
  return Number(m[1]) * UNIT[unit]!;
}
