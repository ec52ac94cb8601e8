// The metrics file (--metrics-file): the job's state in the Prometheus text format, for
// node_exporter's textfile collector, replaced atomically after every invocation that
// took the lock or found it held (exit 75). prom-client writes the format (HELP, TYPE,
// label escaping).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Gauge, Registry } from 'prom-client';
import { fsyncPath } from '../../core/dirs.js';
import { ioError } from '../../core/errors.js';
import type { LastInvocation } from '../state/last-invocation.js';
import type { Outside } from './outside.js';
import type { RunRecord } from '../state/run-record.js';

/** What one metrics file shows. */
export interface MetricsInput {
  invocation: LastInvocation;
  outside: Outside;
  /** The last committed run, whose counts the run_* metrics show; null: none known. */
  run: RunRecord | null;
  /** status's verdict, seen at the end of the invocation. */
  health?: Health;
}

/** What the health gauges show: status's verdict and what it is made of. */
export interface Health {
  healthy: boolean;
  stuck: boolean;
  /** How long another process has held the lock (0: free). */
  lockAgeSeconds: number;
  /** Runs a killed invocation left in STATE/staging/. */
  interrupted: number;
  /** The state is a copy that another copy of it outran: it publishes nothing. */
  fenced: boolean;
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
  gauge('last_invocation_success', 'Whether the last invocation that took the lock committed its runs or had nothing to do (1) or not (0).').set(
    inv.success ? 1 : 0,
  );
  gauge('last_invocation_timestamp_seconds', 'When the last invocation that took the lock ended (Unix time).').set(seconds(inv.at));
  gauge('last_invocation_exit_code', 'The exit status of the last invocation that took the lock.').set(inv.exit);
  gauge('inbox_reflogs', 'Reflogs waiting in the inbox.').set(m.outside.inbox.reflogs);
  gauge('inbox_oldest_age_seconds', 'Age of the oldest reflog waiting in the inbox, by its mtime (0: none waiting).').set(
    m.outside.inbox.oldest_age_seconds ?? 0,
  );
  const backlog = gauge('backlog_urls', 'URLs in queue files a Yacobot has not taken away yet.', ['yacobot']);
  const files = gauge('backlog_files', 'Queue files a Yacobot has not taken away yet.', ['yacobot']);
  for (const [id, b] of Object.entries(m.outside.backlog)) {
    backlog.set({ yacobot: id }, b.urls);
    files.set({ yacobot: id }, b.files);
  }
  if (m.outside.current_log_urls !== null)
    gauge('current_log_urls', 'URLs current_log remembers (sent recently or seen again).').set(m.outside.current_log_urls);
  const carry = m.outside.carry;
  if (carry !== null) {
    gauge('carry_urls', 'URLs waiting in the carry for a later run (domains over --max-per-domain).').set(carry.urls);
    gauge('carry_oldest_age_seconds', "How long before the last committed run's now the oldest URL waiting in the carry was decided (0: none waiting).").set(
      carry.oldest_age_seconds ?? 0,
    );
    gauge('run_carry_expired_urls', 'URLs the last committed run dropped from the carry after waiting --carry-keep, never sent.').set(carry.expired);
    if (carry.keep_seconds !== null)
      gauge('carry_keep_seconds', 'The --carry-keep of the last committed run: a URL that waits this long is dropped.').set(carry.keep_seconds);
  }
  if (m.health !== undefined) healthGauges(m.health, gauge);
  if (m.run !== null) runGauges(m.run, gauge);
  return registry.metrics();
}

type GaugeOf = (name: string, help: string, labelNames?: string[]) => Gauge;

/** The health gauges: the verdict status gives, and what it is made of. */
function healthGauges(h: Health, gauge: GaugeOf): void {
  gauge('healthy', 'Whether the job is healthy as reflog-to-yacobot-queue status says (1) or not (0).').set(h.healthy ? 1 : 0);
  gauge('lock_stuck', 'Whether another process has held the lock for longer than --max-run-time (1) or not (0).').set(h.stuck ? 1 : 0);
  gauge('lock_held_seconds', 'How long another process has held the lock (0: free).').set(h.lockAgeSeconds);
  gauge('interrupted_runs', 'Runs a killed invocation left unfinished in STATE/staging/ (the next invocation finishes or reruns them).').set(h.interrupted);
  gauge('state_fenced', 'Whether this state is a copy that another copy of it outran (1: it publishes nothing until given a new identity) or not (0).').set(
    h.fenced ? 1 : 0,
  );
}

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
  const stage = gauge(
    'run_stage_seconds',
    'Wall-clock seconds from the start of each stage of the last committed run to its end (the stages run together: the chain up to that stage, not its own work).',
    ['stage'],
  );
  for (const [name, s] of Object.entries(r.stages)) if (typeof s.ms === 'number') stage.set({ stage: name }, s.ms / 1000);
  gauge('run_seconds', 'Seconds the last committed run took, from its start to its commit.').set(r.seconds);
  const by = r.published_by ?? r.master;
  if (by !== undefined)
    gauge('run_published_by', 'The master that published the hour of the last committed run (1; another than this one: remembered here, not published).', [
      'master',
    ]).set({ master: by }, 1);
  gauge('run_published_by_other', 'Whether another master published the hour of the last committed run (1: remembered here, published nothing).').set(
    r.published_by === undefined ? 0 : 1,
  );
}

/**
 * Replaces `file` with the metrics: a temp file of this process in its directory
 * (`.NAME.PID.tmp`: an exit 75 may write beside the holder), fsync, rename. A DataError
 * naming `file` when it cannot.
 */
export async function writeMetrics(file: string, m: MetricsInput): Promise<void> {
  const text = await metricsText(m);
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, text, { mode: 0o644 });
    const fd = fs.openSync(tmp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (err) {
    try {
      fs.rmSync(tmp, { force: true });
    } catch {
      /* never made */
    }
    throw ioError(err, file, 'write');
  }
  fsyncPath(path.dirname(file));
}
