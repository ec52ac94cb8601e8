// The metrics file (--metrics-file): the job's state in the Prometheus text format, for
// node_exporter's textfile collector, replaced atomically after every invocation that
// took the lock. prom-client writes the format (HELP, TYPE, label escaping).
import { Gauge, Registry } from 'prom-client';
import { writeFileDurable } from './fsutil.js';
import type { LastInvocation } from './last-invocation.js';
import type { Outside } from './outside.js';
import type { RunRecord } from './plan.js';

/** What one metrics file shows. */
export interface MetricsInput {
  invocation: LastInvocation;
  outside: Outside;
  /** The last committed run, whose counts the run_* metrics show; null: none known. */
  run: RunRecord | null;
}

const seconds = (iso: string) => Date.parse(iso) / 1000;

/** The metrics as Prometheus text. */
export async function metricsText(m: MetricsInput): Promise<string> {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name: `master_server_${name}`, help, labelNames, registers: [registry] });
  const inv = m.invocation;
  const success = inv.last_success;
  gauge('last_success_timestamp_seconds', 'When the last committed run committed (Unix time; 0: never).').set(success ? seconds(success.at) : 0);
  gauge('last_invocation_success', 'Whether the last invocation that took the lock committed its runs or had nothing to do (1) or not (0).').set(inv.success ? 1 : 0);
  gauge('last_invocation_timestamp_seconds', 'When the last invocation that took the lock ended (Unix time).').set(seconds(inv.at));
  gauge('last_invocation_exit_code', 'The exit status of the last invocation that took the lock.').set(inv.exit);
  gauge('inbox_reflogs', 'Reflogs waiting in the inbox.').set(m.outside.inbox.reflogs);
  gauge('inbox_oldest_age_seconds', 'Age of the oldest reflog waiting in the inbox, by its mtime (0: none waiting).').set(m.outside.inbox.oldest_age_seconds ?? 0);
  const backlog = gauge('backlog_urls', 'URLs in queue files a Yacobot has not taken away yet.', ['yacobot']);
  const files = gauge('backlog_files', 'Queue files a Yacobot has not taken away yet.', ['yacobot']);
  for (const [id, b] of Object.entries(m.outside.backlog)) {
    backlog.set({ yacobot: id }, b.urls);
    files.set({ yacobot: id }, b.files);
  }
  if (m.outside.current_log_urls !== null) gauge('current_log_urls', 'URLs current_log remembers (sent recently or seen again).').set(m.outside.current_log_urls);
  const carry = m.outside.carry;
  if (carry !== null) {
    gauge('carry_urls', 'URLs waiting in the carry for a later run (domains over --max-per-domain).').set(carry.urls);
    gauge('carry_oldest_age_seconds', 'How long ago the oldest URL waiting in the carry was decided (0: none waiting).').set(carry.oldest_age_seconds ?? 0);
  }
  if (m.run !== null) runGauges(m.run, gauge);
  return registry.metrics();
}

type GaugeOf = (name: string, help: string, labelNames?: string[]) => Gauge;

/** The run_* gauges: the counts of the last committed run. */
function runGauges(r: RunRecord, gauge: GaugeOf): void {
  const ad = r.stages['analyze-dump'] ?? {};
  const fu = r.stages['filter-url'] ?? {};
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  gauge('run_lines', 'Reflog lines read by the last committed run.').set(num(ad.lines_in));
  const sent = gauge('run_sent_urls', 'URLs the last committed run sent, per Yacobot.', ['yacobot']);
  for (const [id, n] of Object.entries(r.sent_per_yacobot)) sent.set({ yacobot: id }, n);
  gauge('run_held_urls', 'URLs the last committed run held back (sent less than resend-after ago).').set(num(fu.held));
  gauge('run_new_domains', 'Domains the last committed run gave to a Yacobot for the first time.').set(r.new_domains);
  const rejected = gauge('run_rejected_lines', 'Reflog lines the last committed run rejected, per reason.', ['reason']);
  const byReason = ad.rejected_by_reason;
  if (byReason !== null && typeof byReason === 'object') for (const [reason, n] of Object.entries(byReason)) rejected.set({ reason }, num(n));
  const stage = gauge('run_stage_seconds', 'Seconds each stage of the last committed run took.', ['stage']);
  for (const [name, s] of Object.entries(r.stages)) if (typeof s.ms === 'number') stage.set({ stage: name }, s.ms / 1000);
  gauge('run_seconds', 'Seconds the last committed run took, from its start to its commit.').set(r.seconds);
  const by = r.published_by ?? r.master;
  if (by !== undefined) gauge('run_published_by', 'The master that published the hour of the last committed run (1; another than this one: remembered here, not published).', ['master']).set({ master: by }, 1);
  gauge('run_published_by_other', 'Whether another master published the hour of the last committed run (1: remembered here, published nothing).').set(r.published_by === undefined ? 0 : 1);
}

/** Replaces `file` with the metrics (temp file in its directory, then rename). */
export async function writeMetrics(file: string, m: MetricsInput): Promise<void> {
  writeFileDurable(file, await metricsText(m));
}
