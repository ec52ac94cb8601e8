// Reading the partner database for explain and partner-db owner: who owns a domain,
// and which Yacobot least-loaded assignment would pick for a new one now. Read only.
import { LeastLoaded, dbError, openDb, yacobotLoads, type Db, type YacobotLoad } from '../core/db.js';

/** A Yacobot as explain and owner name it. */
export interface YacobotRef {
  id: number;
  name: string | null;
}

/** A read-only view of the partner database. */
export class PartnerView {
  private readonly db: Db;
  private loads: YacobotLoad[] | null = null;

  constructor(readonly file: string) {
    this.db = openDb(file, { readonly: true });
  }

  /** The Yacobot that owns `domain`, or null (its name is null when the row names no Yacobot). */
  owner(domain: string): YacobotRef | null {
    const id = this.query(() => this.db.prepare('SELECT yacobot_id FROM partner_domain WHERE domain = ?').pluck().get(domain)) as number | undefined;
    if (id === undefined) return null;
    return { id: Number(id), name: this.all().find((y) => y.id === Number(id))?.name ?? null };
  }

  /** The Yacobot least-loaded assignment would give a new domain now, or null when none is active. */
  pickNow(): YacobotRef | null {
    const active = this.all().filter((y) => y.active);
    if (active.length === 0) return null;
    const id = new LeastLoaded(active).pick();
    return { id, name: active.find((y) => y.id === id)!.name };
  }

  close(): void {
    this.db.close();
  }

  /** Every Yacobot with its domain count, read once. */
  private all(): YacobotLoad[] {
    this.loads ??= this.query(() => yacobotLoads(this.db));
    return this.loads;
  }

  private query<T>(f: () => T): T {
    try {
      return f();
    } catch (err) {
      throw dbError(err, this.file);
    }
  }
}
