// The assignment rules: which Yacobot a new domain goes to (least-loaded by weight,
// or weighted rendezvous), and the body of assignNew that both backends run inside
// their write transaction.
import type { YacobotLoad } from './yacobots.js';

/**
 * A weight as the exact decimal it was typed as: `m / 10^k`, from the shortest
 * decimal that reads back as the same double (0.3 is 3/10, not 0.2999...).
 */
function decimalOf(w: number): { m: bigint; k: number } {
  const [mant, exp] = String(w).split('e') as [string, string | undefined];
  const [int, frac = ''] = mant.split('.') as [string, string | undefined];
  let k = frac.length - Number(exp ?? 0);
  let m = BigInt(int + frac);
  for (; k < 0; k++) m *= 10n;
  return { m, k };
}

/**
 * Least-loaded choice over a fixed set of Yacobots: load = domains / weight, ties to
 * the smallest id; every pick counts, so a batch of picks spreads by weight. Loads
 * are compared exactly, with weights as the decimals the operator typed: in binary,
 * 3 x 0.1 is not 1 x 0.3, and the tie of 3 domains at 0.3 and 1 at 0.1 went to the
 * wrong Yacobot.
 */
export class LeastLoaded {
  /** Each weight as an integer: the weight times 10^k, one k for all (the most decimals any has). */
  private readonly ys: { id: number; domains: number; w: bigint }[];

  constructor(yacobots: readonly { id: number; weight: number; domains: number }[]) {
    const ds = yacobots.map((y) => decimalOf(y.weight));
    const k = Math.max(0, ...ds.map((d) => d.k));
    this.ys = yacobots.map((y, i) => ({ id: y.id, domains: y.domains, w: ds[i]!.m * 10n ** BigInt(k - ds[i]!.k) })).sort((a, b) => a.id - b.id);
  }

  get size(): number {
    return this.ys.length;
  }

  /** The id of the least-loaded Yacobot, whose count then grows by one. Throws if there is none. */
  pick(): number {
    let best = this.ys[0];
    if (!best) throw new Error('LeastLoaded.pick with no Yacobots');
    for (let i = 1; i < this.ys.length; i++) {
      const y = this.ys[i]!;
      // y.domains / y.w < best.domains / best.w, cross-multiplied in integers; strict <
      // keeps the smaller id on ties.
      if (BigInt(y.domains) * best.w < BigInt(best.domains) * y.w) best = y;
    }
    best.domains++;
    return best.id;
  }
}

/** Weighted rendezvous choice: the same domain and Yacobot list give the same answer everywhere. */
export type RendezvousFn = (domain: string, yacobots: readonly { id: number; weight: number }[]) => number;

const TWO_53 = 2 ** 53;

/**
 * Loads the hash and returns the weighted rendezvous chooser: for each Yacobot,
 * score = -weight / ln(h), h = the top 53 bits of XXH64("domain TAB id") mapped into
 * (0,1); the highest score wins, ties to the smallest id.
 */
export async function loadRendezvous(): Promise<RendezvousFn> {
  // Loaded here: only --assign rendezvous hashes domains.
  const { h64 } = await (await import('xxhash-wasm')).default();
  return (domain, yacobots) => {
    let bestId = -1;
    let bestScore = -Infinity;
    for (const y of yacobots) {
      const h = (Number(h64(`${domain}\t${y.id}`) >> 11n) + 0.5) / TWO_53;
      const score = -y.weight / Math.log(h);
      if (score > bestScore || (score === bestScore && y.id < bestId)) {
        bestScore = score;
        bestId = y.id;
      }
    }
    if (bestId < 0) throw new Error('rendezvous with no Yacobots');
    return bestId;
  };
}

/** A run's new domains, numbered 0 to count - 1: read by name, each told its owner once the database has it. */
export interface NewDomains {
  count: number;
  name(i: number): string;
  owner(i: number, id: number): void;
}

/** Chooses the Yacobot of a new domain among the active ones (least-loaded picks count as they go). */
export type Chooser = (domain: string, active: readonly YacobotLoad[], least: LeastLoaded) => number;

/**
 * The body of assignNew on any backend, inside its write transaction: loads read
 * there, each domain re-read, chosen, inserted with ON CONFLICT DO NOTHING and read
 * back, `batch` domains at a time, so the database's answer is always the one given
 * to fresh.owner. `lookup` reads owners of a batch; `insert` inserts (domain, id)
 * pairs if absent.
 */
export async function assignInTx(
  loads: YacobotLoad[],
  fresh: NewDomains,
  choose: Chooser,
  io: { lookup(ds: readonly string[]): Promise<Map<string, number>>; insert(rows: [string, number][]): Promise<void> },
  batch: number,
): Promise<{ assignedByUs: number; lostRace: number; witness: string | null; noActive: boolean }> {
  const active = loads.filter((y) => y.active);
  const out = { assignedByUs: 0, lostRace: 0, witness: null as string | null, noActive: active.length === 0 };
  if (out.noActive) return out;
  const least = new LeastLoaded(active);
  for (let i = 0; i < fresh.count; i += batch) {
    const part = Array.from({ length: Math.min(batch, fresh.count - i) }, (_, j) => fresh.name(i + j));
    const before = await io.lookup(part);
    const mine = new Map<string, number>();
    for (const d of part) if (!before.has(d)) mine.set(d, choose(d, active, least));
    if (mine.size > 0) await io.insert([...mine]);
    const after = mine.size > 0 ? await io.lookup([...mine.keys()]) : new Map<string, number>();
    part.forEach((d, j) => {
      const owner = before.get(d) ?? after.get(d)!;
      if (mine.get(d) === owner) {
        out.assignedByUs++;
        out.witness ??= d;
      } else out.lostRace++;
      fresh.owner(i + j, owner);
    });
  }
  return out;
}
