// Reading the partner database for the runner's explain and partner-db owner: who owns
// a domain, and which Yacobot least-loaded assignment would pick for a new one now. Read only.
import { LeastLoaded } from './assign.js';
import { openStore } from './open.js';
import type { PartnerStore, Timeouts } from './store.js';
import type { YacobotLoad } from './yacobots.js';

/** A Yacobot as explain and owner name it. */
export interface YacobotRef {
  id: number;
  name: string | null;
}

/** A read-only view of the partner database (a SQLite file or a PostgreSQL URI). */
export class PartnerView {
  private loads: YacobotLoad[] | null = null;

  private constructor(private readonly store: PartnerStore) {}

  /** Opens `db` for reading. */
  static async open(db: string, timeouts?: Timeouts): Promise<PartnerView> {
    return new PartnerView(await openStore(db, { readonly: true, timeouts }));
  }

  /** The Yacobot that owns `domain`, or null (its name is null when the row names no Yacobot). */
  async owner(domain: string): Promise<YacobotRef | null> {
    const { found, error } = await this.store.ownersOf([domain]);
    if (error !== null) throw error;
    const v = found.get(domain);
    if (v === undefined) return null;
    const id = Number(v);
    return { id, name: (await this.all()).find((y) => y.id === id)?.name ?? null };
  }

  /** The Yacobot least-loaded assignment would give a new domain now, or null when none is active. */
  async pickNow(): Promise<YacobotRef | null> {
    const active = (await this.all()).filter((y) => y.active);
    if (active.length === 0) return null;
    const id = new LeastLoaded(active).pick();
    return { id, name: active.find((y) => y.id === id)?.name ?? null };
  }

  close(): Promise<void> {
    return this.store.close();
  }

  /** Every Yacobot with its domain count, read once. */
  private async all(): Promise<YacobotLoad[]> {
    this.loads ??= await this.store.yacobotLoads();
    return this.loads;
  }
}
