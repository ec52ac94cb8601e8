// limit-domains' rule written plainly (docs/formats-and-rules.md, "Politeness"): the
// model the stage (limit-domains.test.ts) and caps' play of it (caps.test.ts) are held to.
import { timestampToMs } from '../../src/core/time.js';
import type { Rec } from './model.js';

/** A URL record, as the chain model names its fields. */
export type Url = Rec;
export interface Carried extends Url {
  decided: string;
}

export const urlLine = (r: Url) => [r.id, r.ts, r.tag, r.hits, r.domain, r.url].join('\t') + '\n';
export const carryLine = (r: Carried) => [r.id, r.ts, r.tag, r.hits, r.domain, r.url, r.decided].join('\t') + '\n';

/** The rule, written plainly: what goes out (URL lines, by id) and what is carried (by id), and the counts. */
export function model(filtered: Url[], carry: Carried[], cap: number, now: string, keepMs: number) {
  const byId = new Map<string, { r: Carried; carried: boolean }>();
  let expired = 0;
  const fresh = new Set(filtered.map((r) => r.id));
  for (const c of carry) {
    if (!fresh.has(c.id) && timestampToMs(now) - timestampToMs(c.decided) >= keepMs) expired++;
    else byId.set(c.id, { r: c, carried: true });
  }
  for (const f of filtered) {
    const c = byId.get(f.id);
    byId.set(f.id, { r: { ...f, decided: c ? c.r.decided : now }, carried: c !== undefined });
  }
  const byDomain = new Map<string, { r: Carried; carried: boolean }[]>();
  for (const e of byId.values()) {
    if (!byDomain.has(e.r.domain)) byDomain.set(e.r.domain, []);
    byDomain.get(e.r.domain)!.push(e);
  }
  const sent: Carried[] = [];
  const kept: Carried[] = [];
  for (const list of byDomain.values()) {
    list.sort((a, b) => {
      if (a.carried !== b.carried) return a.carried ? -1 : 1;
      if (a.carried && a.r.decided !== b.r.decided) return a.r.decided < b.r.decided ? -1 : 1;
      if (!a.carried && a.r.hits !== b.r.hits) return BigInt(b.r.hits) > BigInt(a.r.hits) ? 1 : -1;
      return a.r.id < b.r.id ? -1 : 1;
    });
    sent.push(...list.slice(0, cap).map((e) => e.r));
    kept.push(...list.slice(cap).map((e) => e.r));
  }
  const byIdOrder = (a: Url, b: Url) => (a.id < b.id ? -1 : 1);
  const capped = [...byDomain].filter(([, list]) => list.length > cap).map(([d]) => d);
  return { out: sent.sort(byIdOrder).map(urlLine).join(''), carry: kept.sort(byIdOrder).map(carryLine).join(''), expired, capped };
}
