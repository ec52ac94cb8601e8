// How one run ends after its chain: failed (nothing published) or committed and published.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { mkdirDurable } from '../../core/durable.js';
import { DataError, formatPlace, ioError, visibleName } from '../../core/errors.js';
import { countLines } from '../../core/lines.js';
import { claimForCommit, settleClaim } from '../commit/claims.js';
import type { RunJson } from '../state/attempt.js';
import { assignedByAttempt } from './attempt.js';
import { type CommitPlan, writeCommit } from '../commit/marker.js';
import { publish } from '../commit/protocol.js';
import { prepareQueues } from '../commit/queue.js';
import { keyingToStore } from '../state/keying.js';
import { type RunPaths, stagingLayout } from '../state/layout.js';
import { stageMemory } from '../state/memory.js';
import { failedAttemptsAssigned } from '../state/run-history.js';
import type { RunRecord } from '../state/run-record.js';
import { runsLog } from '../state/runs-log.js';
import type { ChainResult, RunContext } from './context.js';
import { type StageOutcome, repeatedWarnings } from './stage-log.js';

/** Records the run as failed at `step`, keeps its rejects, drops its staging area: nothing is published. */
export async function failRun(
  { o, say, p, hooks }: RunContext,
  rj: RunJson,
  record: RunRecord,
  seconds: () => number,
  step: string,
  error: string,
): Promise<RunRecord> {
  record.status = 'failed';
  record.failed_stage = step;
  // Counted for the commit; a failed run published nothing.
  record.sent = 0;
  record.sent_per_yacobot = {};
  record.error = error;
  record.seconds = seconds();
  // Assignments are not undone with the run: a stage killed mid-run still lets
  // upload-domains commit, and its retry finds those domains already assigned.
  record.new_domains = (await assignedByAttempt(p, o, say)) + (rj.assigned_earlier ?? 0);
  keepFailedRejects(p, record);
  say.log?.error({ run: p.name, stage: step, error }, 'run failed; nothing published');
  try {
    runsLog(o.state).append(record);
  } catch (err) {
    // The record that keeps the stage's message is what failed: say it here. The run
    // is redone next time, as after a crash (its staging area stays).
    say.tell(`run ${p.name} failed: ${visibleName(error)}`);
    throw err;
  }
  hooks.beforeStep?.(p.name, 'failed:cleanup');
  fs.rmSync(p.staging, { recursive: true, force: true });
  fsyncPath(path.dirname(p.staging));
  return record;
}

/** Moves a failed run's non-empty rejects beside the done ones (naming them in its record), or drops an earlier attempt's. */
function keepFailedRejects(p: RunPaths, record: RunRecord): void {
  // The rejects explain a failed reject ratio: keep them, apart from a committed run's
  // (a failed replay of a committed hour replaced or removed that run's); the next
  // attempt replaces or removes them, and a commit of the name removes them.
  if (fs.existsSync(p.rejects) && fs.statSync(p.rejects).size > 0) {
    mkdirDurable(path.dirname(p.rejectsFailed));
    try {
      fs.renameSync(p.rejects, p.rejectsFailed);
    } catch (err) {
      throw ioError(err, p.rejectsFailed, 'rename into place');
    }
    record.rejects_file = p.rejectsFailed;
  } else if (fs.existsSync(p.rejects)) {
    // analyze-dump ran and rejected nothing: what an earlier attempt rejected would pass for this one's.
    fs.rmSync(p.rejectsFailed, { force: true });
  }
}

/** Warns of a cut last line let through (--allow-unterminated) and repeats the stages' own warnings. */
export function warnStages({ say, p }: RunContext, outcomes: StageOutcome[], stages: Record<string, Record<string, unknown>>): void {
  if (stages['analyze-dump']?.last_line_unterminated === true) {
    say.warn(`${p.name}: the reflog's last line has no newline; committed as it is (--allow-unterminated)`, {
      fields: { run: p.name, reflog: p.reflog },
      msg: "the reflog's last line has no newline; was it cut off?",
    });
  }
  // The stages' own warnings (a Yacobot disabled during the run that still got its
  // domains' URLs, domains of an inactive Yacobot) would
  // otherwise stay in their logs, which the cleanup removes. analyze-dump's cut last
  // line is said just above in the runner's words.
  for (const { stage, warning } of repeatedWarnings(outcomes)) {
    say.warn(`${p.name}: ${stage}: ${visibleName(warning)}`, { fields: { run: p.name, stage, warning }, msg: 'stage warning' });
  }
}

/**
 * Gathers what a run publishes, claims its hour, commits it and publishes it (or, when
 * another master published the hour, commits it publishing nothing); a claim that
 * cannot be had or a queue file that cannot be prepared fails the run. Null: a signal
 * came during the claim, before COMMIT.
 */
export async function commitRun(
  { o, p, hooks, say, signalled }: RunContext,
  rj: RunJson,
  record: RunRecord,
  chain: ChainResult,
  stages: Record<string, Record<string, unknown>>,
  seconds: () => number,
  failed: (step: string, error: string) => Promise<RunRecord>,
): Promise<RunRecord | null> {
  const queue = stagedQueue(p, record);
  const ud = stages['upload-domains'] ?? {};
  record.new_domains =
    (typeof ud.assigned_by_us === 'number' ? ud.assigned_by_us : typeof ud.domains_new === 'number' ? ud.domains_new : 0) + (rj.assigned_earlier ?? 0);
  const byFailed = failedAttemptsAssigned(runsLog(o.state).tail(), p.name, rj.run_id);
  if (byFailed > 0) record.new_domains_failed_attempts = byFailed;
  // An empty rejects file stays staged (the cleanup removes it): the commit publishes none.
  if (fs.existsSync(p.rejects) && fs.statSync(p.rejects).size > 0) record.rejects_file = p.rejectsKept;
  const plan: CommitPlan = {
    version: 1,
    run: p.name,
    staging: p.staging,
    state: o.state,
    reflog: p.reflog,
    ...(chain.reflogFile !== null && { reflogFile: chain.reflogFile }),
    ...(chain.reflogLink !== undefined && { reflogLink: chain.reflogLink }),
    queueDir: o.queueDir,
    ...(p.queueName !== p.name && { queueName: p.queueName }),
    backlogWarn: o.backlogWarn,
    queue,
    record,
    // The old spellings last as long as current_log or the carry may hold one.
    keyedBy: keyingToStore(
      o.state,
      rj.now,
      Math.max(o.keepMs, o.maxPerDomain === null ? 0 : o.carryKeepMs),
      record.rekeyed !== undefined && record.rekeyed.aliases_only === undefined,
    ),
  };
  const unclaimed = await claimForCommit(o, say, hooks, plan, rj.run_id, chain.digest);
  if (unclaimed !== null) return failed('claim', unclaimed);
  if (signalled()) return null;
  record.seconds = seconds();
  try {
    hooks.beforeStep?.(p.name, 'staging:memory');
    plan.memory = stageMemory(o.state, p, record);
    hooks.beforeStep?.(p.name, 'staging:queues');
    prepareQueues(plan);
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return failed('publish', formatPlace(err.place, err.message));
  }
  hooks.beforeStep?.(p.name, 'commit');
  writeCommit(plan, hooks);
  await settleClaim(o, say, plan, hooks);
  publish(plan, hooks);
  say.log?.info(
    { run: p.name, sent: record.sent, sent_per_yacobot: record.sent_per_yacobot, new_domains: record.new_domains, seconds: record.seconds },
    'run committed',
  );
  return record;
}

/** The staged queue files of a run, by Yacobot id, with their URLs counted into its record. */
function stagedQueue(p: RunPaths, record: RunRecord): CommitPlan['queue'] {
  const queue: CommitPlan['queue'] = [];
  for (const id of fs.readdirSync(p.queue).sort((a, b) => Number(a) - Number(b))) {
    const f = stagingLayout(p.staging).queueFile(id, p.queueName);
    if (!fs.existsSync(f)) continue;
    const urls = countLines(f);
    queue.push({ yacobot: id, urls });
    record.sent_per_yacobot[id] = urls;
    record.sent += urls;
  }
  return queue;
}
