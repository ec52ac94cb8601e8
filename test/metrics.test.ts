// --metrics-file: the Prometheus textfile written after every invocation that takes the
// lock, checked by promtool and against runs.jsonl and the files; the alert rules example
// checked by promtool.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT, runRunner } from './lib/run.js';
import { deliver, deliverBad, newJob, runJob } from './lib/job.js';
import { promtool } from './lib/promtool.js';
import { runsJsonl } from './lib/runner-state.js';
import { countLines } from '../src/core/lines.js';
import { metricsText } from '../src/runner/views/metrics.js';
import type { RunRecord } from '../src/runner/state/run-record.js';
import type { LastInvocation } from '../src/runner/state/last-invocation.js';

const REQUIRED = [
  'master_server_last_success_timestamp_seconds',
  'master_server_last_invocation_success',
  'master_server_last_invocation_timestamp_seconds',
  'master_server_inbox_reflogs',
  'master_server_inbox_oldest_age_seconds',
  'master_server_backlog_urls',
  'master_server_current_log_urls',
  'master_server_run_lines',
  'master_server_run_sent_urls',
  'master_server_run_held_urls',
  'master_server_run_new_domains',
  'master_server_run_rejected_lines',
  'master_server_run_stage_seconds',
];

/** The samples of a metrics text: 'name{labels}' -> value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of text.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(l);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

function checkMetrics(t: import('node:test').TestContext, text: string): void {
  const r = promtool(t, ['check', 'metrics'], text);
  if (r !== null) assert.equal(r.status, 0, `promtool check metrics: ${r.out}`);
}

test('metrics file: after a committed, a nothing-to-do, a failed and a lock-busy invocation', async (t) => {
  const dir = newJob('ms-metrics-');
  fs.mkdirSync(path.join(dir, 'var/textfile'));
  const file = path.join(dir, 'var/textfile/master_server.prom');
  const args = ['--metrics-file', 'var/textfile/master_server.prom'];
  deliver(dir, '2011072806');
  assert.equal(runJob(dir, args).status, 0);

  const text = fs.readFileSync(file, 'utf8');
  checkMetrics(t, text);
  for (const name of REQUIRED) {
    assert.match(text, new RegExp(`^# HELP ${name} \\S`, 'm'), `${name}: HELP`);
    assert.match(text, new RegExp(`^# TYPE ${name} gauge$`, 'm'), `${name}: TYPE`);
  }
  const m = samples(text);
  const rec = runsJsonl(dir).at(-1) as unknown as RunRecord;
  const ad = rec.stages['analyze-dump']!;
  assert.equal(m.get('master_server_last_invocation_success'), 1);
  assert.equal(m.get('master_server_last_success_timestamp_seconds'), (Date.parse(rec.start) + rec.seconds * 1000) / 1000);
  assert.equal(m.get('master_server_run_lines'), ad.lines_in);
  assert.equal(m.get('master_server_run_held_urls'), rec.stages['filter-url']!.held);
  assert.equal(m.get('master_server_run_new_domains'), rec.new_domains);
  assert.equal(m.get('master_server_run_published_by_other'), 0, 'this master published its hour');
  assert.equal(m.get(`master_server_run_published_by{master="${os.hostname()}"}`), 1);
  for (const [y, n] of Object.entries(rec.sent_per_yacobot)) {
    assert.equal(m.get(`master_server_run_sent_urls{yacobot="${y}"}`), n);
    const queued = fs.readdirSync(path.join(dir, 'var/queue', y)).reduce((s, f) => s + countLines(path.join(dir, 'var/queue', y, f)), 0);
    assert.equal(m.get(`master_server_backlog_urls{yacobot="${y}"}`), queued);
  }
  const reasons = ad.rejected_by_reason as Record<string, number>;
  assert.ok(Object.keys(reasons).length > 0, 'the fixture has rejects');
  for (const [reason, n] of Object.entries(reasons)) assert.equal(m.get(`master_server_run_rejected_lines{reason="${reason}"}`), n);
  for (const stage of Object.keys(rec.stages)) assert.ok(m.has(`master_server_run_stage_seconds{stage="${stage}"}`), stage);
  assert.equal(m.get('master_server_current_log_urls'), countLines(path.join(dir, 'var/state/current_log')));
  assert.equal(m.get('master_server_inbox_reflogs'), 0);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), ['master_server.prom'], 'no temp file left beside it');

  assert.equal(runJob(dir, args).status, 0);
  const idle = samples(fs.readFileSync(file, 'utf8'));
  assert.equal(idle.get('master_server_last_invocation_success'), 1);
  assert.ok(idle.get('master_server_last_invocation_timestamp_seconds')! > m.get('master_server_last_invocation_timestamp_seconds')!);
  assert.equal(idle.get('master_server_last_success_timestamp_seconds'), m.get('master_server_last_success_timestamp_seconds'));

  deliverBad(dir, '2011072807');
  assert.equal(runJob(dir, args).status, 1);
  const failedText = fs.readFileSync(file, 'utf8');
  checkMetrics(t, failedText);
  const failed = samples(failedText);
  assert.equal(failed.get('master_server_last_invocation_success'), 0);
  assert.equal(failed.get('master_server_last_invocation_exit_code'), 1);
  assert.equal(
    failed.get('master_server_last_success_timestamp_seconds'),
    m.get('master_server_last_success_timestamp_seconds'),
    'a failed run leaves the last success alone',
  );
  assert.equal(failed.get('master_server_inbox_reflogs'), 1);
  assert.equal(failed.get('master_server_run_lines'), ad.lines_in, 'run_* stay those of the last committed run');

  const holder = spawn('flock', [path.join(dir, 'var/state/lock'), 'sleep', '30'], { stdio: 'ignore', detached: true });
  try {
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(runJob(dir, args).status, 75);
    // Written beside the holder: status's verdict (an exit 75 beside a run that is not stuck is healthy; the
    // failed run before it is not), the lock's age, and the run_* series as they were.
    const busy = samples(fs.readFileSync(file, 'utf8'));
    assert.equal(busy.get('master_server_last_invocation_exit_code'), 75);
    assert.equal(busy.get('master_server_healthy'), 1);
    assert.equal(busy.get('master_server_lock_stuck'), 0);
    assert.ok(busy.get('master_server_lock_held_seconds')! >= 0);
    assert.equal(busy.get('master_server_run_lines'), ad.lines_in);
    assert.ok(!fs.readdirSync(path.dirname(file)).some((f) => f.endsWith('.tmp')), 'no temp file left');
  } finally {
    process.kill(-holder.pid!, 'SIGKILL');
  }
});

test('metrics file: set in the config file (relative to it); an unwritable place is a warning, not a failure', (t) => {
  const dir = newJob('ms-metrics-conf-');
  fs.mkdirSync(path.join(dir, 'etc'));
  fs.writeFileSync(path.join(dir, 'etc/job.conf'), 'metrics-file = ../var/job.prom\n');
  const r = runJob(dir, ['--config', 'etc/job.conf']);
  assert.equal(r.status, 0, r.stderr);
  checkMetrics(t, fs.readFileSync(path.join(dir, 'var/job.prom'), 'utf8'));

  const gone = runJob(dir, ['--metrics-file', 'no/such/dir/job.prom']);
  assert.equal(gone.status, 0, 'the invocation had nothing to do, and says so');
  const where = path.join(dir, 'no/such/dir/job.prom');
  assert.ok(gone.stderr.includes(`warning: cannot write the metrics file: ${where}: cannot write: ENOENT`), gone.stderr);
  assert.doesNotMatch(gone.stderr, /\n\s+at /, 'no stack trace');
  // status is not healthy, and names the file.
  const s = runRunner(dir, ['status', '--metrics-file', 'no/such/dir/job.prom']);
  assert.equal(s.status, 1, s.stdout);
  assert.ok(s.stdout.startsWith(`NOT healthy: the metrics file cannot be written: ${where}: cannot write: ENOENT`), s.stdout);
  // Written again, healthy again.
  assert.equal(runJob(dir, ['--config', 'etc/job.conf']).status, 0);
  assert.equal(runRunner(dir, ['status']).status, 0);
});

test('metrics text: label values are escaped (promtool accepts them)', async (t) => {
  const reason = 'bad "quoted" \\ reason\nsecond line';
  const run = {
    run: 'r',
    run_id: 'r@x#1',
    status: 'ok',
    start: '2011-07-28T06:00:00.000Z',
    now: '20110728070000',
    now_source: 'name',
    attempt: 1,
    seconds: 2,
    reflog: 'r.reflog',
    stages: { 'analyze-dump': { lines_in: 3, rejected_by_reason: { [reason]: 1 }, ms: 5 } },
    sent: 2,
    sent_per_yacobot: { '1': 2 },
    new_domains: 1,
    keep_ms: 1,
    resend_after_ms: 1,
  } as RunRecord;
  const invocation = {
    result: 'committed',
    success: true,
    exit: 0,
    at: '2011-07-28T06:00:02.000Z',
    started: '',
    seconds: 2,
    pid: 1,
    runs: ['r'],
    error: null,
    last_success: { run: 'r', at: '2011-07-28T06:00:02.000Z', seconds: 2 },
  } as LastInvocation;
  const text = await metricsText({
    invocation,
    outside: {
      inbox: { reflogs: 0, oldest_age_seconds: null },
      backlog: {},
      lock: { held: false, pid: null, host: null, since: null },
      current_log_urls: null,
      carry: {
        urls: 7,
        oldest_decided: '20110728050000',
        oldest_age_seconds: 7200,
        as_of: '20110728070000',
        expired: 697501,
        keep_seconds: 7200,
        capped_domains: { 'a.com': 7 },
      },
    },
    run,
  });
  assert.ok(text.includes('master_server_run_rejected_lines{reason="bad \\"quoted\\" \\\\ reason\\nsecond line"} 1'), text);
  assert.equal(samples(text).get('master_server_last_success_timestamp_seconds'), Date.parse('2011-07-28T06:00:02Z') / 1000);
  assert.deepEqual([samples(text).get('master_server_carry_urls'), samples(text).get('master_server_carry_oldest_age_seconds')], [7, 7200]);
  assert.deepEqual([samples(text).get('master_server_run_carry_expired_urls'), samples(text).get('master_server_carry_keep_seconds')], [697501, 7200]);
  checkMetrics(t, text);
});

test('alert rules example: promtool check rules accepts it', (t) => {
  const r = promtool(t, ['check', 'rules', path.join(ROOT, 'docs', 'prometheus-alerts.yml')]);
  if (r === null) return;
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /SUCCESS: 12 rules found/);
  const rules = fs.readFileSync(path.join(ROOT, 'docs', 'prometheus-alerts.yml'), 'utf8');
  for (const name of [
    'master_server_last_success_timestamp_seconds',
    'master_server_last_invocation_success == 0',
    'master_server_backlog_urls >',
    'master_server_run_carry_expired_urls > 0',
  ])
    assert.ok(rules.includes(name), name);
});

test('alert rules: promtool test rules (one stop by a signal is no outage; stuck, interrupted, fenced, failed, stale and absent metrics; URLs expired from the carry)', (t) => {
  const r = promtool(t, ['test', 'rules', path.join(ROOT, 'test', 'alerts', 'prometheus-alerts.test.yml')]);
  if (r === null) return;
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /SUCCESS/);
});

test('runner --help names --metrics-file, status and explain', () => {
  const r = runRunner(ROOT, ['--help']);
  assert.equal(r.status, 0);
  for (const s of ['--metrics-file FILE', 'status [--json] [--max-age DURATION]', 'explain [--json] [options] URL...']) assert.ok(r.stdout.includes(s), s);
});
