// The shape of a runs.jsonl line (docs/formats-and-rules.md "runs.jsonl"), the re-key's report included.

/** Where a run's "now" came from. */
export type NowSource = 'flag' | 'name' | 'clock' | 'stored';

/** The runs.jsonl line of one run. */
export interface RunRecord {
  run: string;
  run_id: string;
  status: 'ok' | 'failed';
  start: string;
  now: string;
  now_source: NowSource;
  attempt: number;
  recovered?: 'rerun' | 'roll-forward';
  seconds: number;
  reflog: string;
  stages: Record<string, Record<string, unknown>>;
  sent: number;
  sent_per_yacobot: Record<string, number>;
  new_domains: number;
  /**
   * Domains the failed attempts of this run's name (since its last commit) assigned: each
   * failed line counts its own in new_domains, and this line names them too.
   */
  new_domains_failed_attempts?: number;
  /** filter-url's --keep and --resend-after in this run, in ms. */
  keep_ms: number;
  resend_after_ms: number;
  /** With --max-per-domain: the cap and limit-domains' --carry-keep (ms), stored with the state. */
  max_per_domain?: number;
  carry_keep_ms?: number;
  /** limit-domains' counts, when it ran (see carry.ts). */
  carried_in?: number;
  carried_out?: number;
  carry_expired?: number;
  capped_domains?: Record<string, number>;
  /** The oldest `decided` among the URLs carried out. */
  carry_oldest_decided?: string;
  rejects_file?: string;
  failed_stage?: string;
  error?: string;
  backlog?: Record<string, { files: number; urls: number }>;
  backlog_warn?: string[];
  /** The name of the queue files when it is not the run's: a replay beside untaken files of the run's name. */
  queue_name?: string;
  /** current_log re-keyed before the hour for another URL parser (rekey.ts). */
  rekeyed?: RekeyReport;
  /** The master that ran it (--master-name). */
  master?: string;
  /** The identity of the state that ran it (STATE/identity.json), which its claim of the hour names. */
  state_id?: string;
  /** Another master published this hour: this one remembered it (current_log) and published nothing. */
  published_by?: string;
  /** With published_by: the identity of that master's state (absent for a claim made before state identities). */
  published_by_state?: string;
  /** With published_by: the URLs this master's queue files held, not published. */
  not_published?: number;
}

/** What the re-key of one file counts. */
export interface RekeyCounts {
  /** Entries read. */
  urls: number;
  /** Entries whose canonical URL changed. */
  changed: number;
  /** Entries merged into another that now has their id. */
  merged: number;
  /** Entries whose URL this parser refuses (no reflog line can give it again): dropped. */
  dropped: number;
  /** current_log: copies made under the new form of an hour's URL whose host had a character the old parser lost; the carry: entries moved to it. */
  aliased: number;
  /** Distinct domains spelled otherwise than before: new to the partner database. */
  domains_changed: number;
  entries_out: number;
}

/** The `rekeyed` member of a run's record: current_log's counts (all 0 when only the carry was re-keyed), and the carry's. */
export interface RekeyReport extends RekeyCounts {
  /** Only copies were made (a later run while KeyedBy.legacy lasts): `from` and `to` are the same parser. */
  aliases_only?: true;
  /** The carry's counts, when it was re-keyed (`aliased`: entries moved to the hour's spelling). */
  carry?: RekeyCounts;
  from: { ada: string; icu: string | null; unicode: string | null; node: string };
  to: { ada: string; icu: string | null; unicode: string | null; node: string };
  seconds: number;
}
