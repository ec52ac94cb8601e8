// limit-domains' rule (docs/formats-and-rules.md "Politeness") over counts per domain,
// for `caps`: what a cap of N would have sent, carried and expired, run after run, if
// every URL counted were decided in its run and none came again while it waited.

/** What one run would have done under the cap. */
export interface CapRun {
  run: string;
  sent: number;
  /** URLs in the carry after the run (carried_out). */
  carried: number;
  /** URLs dropped from the carry at the run (carry_expired). */
  expired: number;
  /** Domains that held back URLs (capped_domains_total). */
  capped_domains: number;
  /** The longest a URL sent in the run had waited, in seconds (0: none had waited). */
  longest_wait_seconds: number;
  /** How long the oldest URL still carried after the run has waited, in seconds; null: none waits. */
  oldest_waiting_seconds: number | null;
}

/** URLs of a domain that wait, decided at `decided` (ms). */
interface Waiting {
  decided: number;
  n: number;
}

/**
 * The carry under cap `cap` and carry-keep `keepMs`, kept as counts per domain and
 * decision time: a run sends a domain's carried URLs first, oldest decision first,
 * then its new ones, at most `cap` in all; the rest wait; a carried URL whose decision
 * is `keepMs` old at a run expires.
 */
export class CapModel {
  private readonly carry = new Map<string, Waiting[]>();

  constructor(
    readonly cap: number,
    readonly keepMs: number,
  ) {}

  /** Run `run` at `nowMs`, deciding `urls` URLs, `counts` of them per domain (a domain not in it: at most `cap`). */
  run(run: string, nowMs: number, urls: number, counts: ReadonlyMap<string, number>): CapRun {
    const r: CapRun = { run, sent: urls, carried: 0, expired: 0, capped_domains: 0, longest_wait_seconds: 0, oldest_waiting_seconds: null };
    const domains = new Set(this.carry.keys());
    for (const [d, n] of counts) if (n > this.cap) domains.add(d);
    let longest = 0;
    let oldest = Number.POSITIVE_INFINITY;
    for (const d of domains) {
      const fresh = counts.get(d) ?? 0;
      const waiting: Waiting[] = [];
      for (const w of this.carry.get(d) ?? []) {
        if (nowMs - w.decided >= this.keepMs) r.expired += w.n;
        else waiting.push(w);
      }
      let room = this.cap;
      while (room > 0 && waiting.length > 0) {
        const w = waiting[0]!;
        const k = Math.min(room, w.n);
        room -= k;
        w.n -= k;
        longest = Math.max(longest, nowMs - w.decided);
        if (w.n === 0) waiting.shift();
      }
      // Sent: what the room took of the carry and of the new ones, in place of the new ones counted in `urls`.
      r.sent += this.cap - room - fresh + Math.min(room, fresh);
      if (fresh > room) waiting.push({ decided: nowMs, n: fresh - room });
      if (waiting.length === 0) {
        this.carry.delete(d);
        continue;
      }
      this.carry.set(d, waiting);
      r.capped_domains++;
      for (const w of waiting) r.carried += w.n;
      oldest = Math.min(oldest, waiting[0]!.decided);
    }
    r.longest_wait_seconds = Math.round(longest / 1000);
    if (oldest !== Number.POSITIVE_INFINITY) r.oldest_waiting_seconds = Math.round((nowMs - oldest) / 1000);
    return r;
  }
}
