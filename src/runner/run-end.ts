// How one run ends after its chain: failed (nothing published) or committed and published.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../core/dirs.js';
import { DataError, formatPlace, ioError, visibleName } from '../core/errors.js';
import { type RunJson, assignedByAttempt } from './attempt.js';
import { claimForCommit, settleClaim } from './claims.js';
import { type CommitPlan, prepareQueues, publish, stagedQueueFile, writeCommit } from './commit.js';
import { appendRecordOnce, countLines, exists, mkdirDurable, tailRecords } from './fsutil.js';
import { stageMemory } from './memory.js';
import { PROG } from './options.js';
import {
  REFLOG_EXT,
  REFLOG_HEAD_BYTES,
  type RunPaths,
  type RunRecord,
  type StageOutcome,
  failedAttemptsAssigned,
  failureMessage,
  firstHeaderLine,
  foreignKind,
  foreignReflog,
  notAReflog,
  repeatedWarnings,
  unterminatedReflog,
} from './plan.js';
import { keyingToStore } from './rekey.js';
import type { ChainResult, RunContext } from './run-one.js';

/** Records the run as failed at `step`, keeps its rejects, drops its staging area: nothing is published. */
export async function failRun(
  { o, log, p, hooks }: RunContext,
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
  record.new_domains = (await assignedByAttempt(p, o, log)) + (rj.assigned_earlier ?? 0);
  keepFailedRejects(p, record);
  log.error({ run: p.name, stage: step, error }, 'run failed; nothing published');
  try {
    appendRecordOnce(path.join(o.state, 'runs.jsonl'), record);
  } catch (err) {
    // The record that keeps the stage's message is what failed: say it here. The run
    // is redone next time, as after a crash (its staging area stays).
    process.stderr.write(`${PROG}: run ${p.name} failed: ${visibleName(error)}\n`);
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

/** The step and message a run fails with after its chain (a stage failed, no reflog, a cut last line), or null. */
export function chainFailure(
  { o, p }: RunContext,
  chain: ChainResult,
  stages: Record<string, Record<string, unknown>>,
): { step: string; error: string } | null {
  const { head } = chain;
  const bad = chain.outcomes.find((s) => s.exit !== 0);
  const firstLine = () => head && firstHeaderLine(head, head.length >= REFLOG_HEAD_BYTES);
  // A gzip file never is a reflog (with a high --max-reject-ratio it would commit as rejects);
  // an HTML page with TABs fails on its rejects, which is no ratio to raise.
  const kind = head === null ? null : foreignKind(head);
  if (kind === 'gzip' || (kind === 'html' && bad?.name === 'analyze-dump')) return { step: 'reflog', error: foreignReflog(p.reflog, kind, firstLine()) };
  if (bad) return { step: bad.name, error: failureMessage(bad) };
  // Lines without a TAB and nothing else (an HTML page saved as the hour) are no reflog:
  // failed at step 'reflog', as a file that cannot be read is; the stages did their part.
  // Before the cut-last-line warning, which its message takes in.
  const archived = path.join(o.state, 'done', p.name + REFLOG_EXT);
  const notReflog = notAReflog(stages['analyze-dump'], p.reflog, firstLine(), exists(archived) ? archived : undefined);
  if (notReflog !== null) return { step: 'reflog', error: notReflog };
  if (stages['analyze-dump']?.last_line_unterminated === true && !o.allowUnterminated) {
    return { step: 'reflog', error: unterminatedReflog(p.reflog, stages['analyze-dump']?.lines_in) };
  }
  return null;
}

/** Warns of a cut last line let through (--allow-unterminated) and repeats the stages' own warnings. */
export function warnStages({ log, p }: RunContext, outcomes: StageOutcome[], stages: Record<string, Record<string, unknown>>): void {
  if (stages['analyze-dump']?.last_line_unterminated === true) {
    log.warn({ run: p.name, reflog: p.reflog }, "the reflog's last line has no newline; was it cut off?");
    process.stderr.write(`${PROG}: warning: ${p.name}: the reflog's last line has no newline; committed as it is (--allow-unterminated)\n`);
  }
  // The stages' own warnings (a Yacobot disabled during the run that still got its
  // domains' URLs, domains of an inactive Yacobot) would
  // otherwise stay in their logs, which the cleanup removes. analyze-dump's cut last
  // line is said just above in the runner's words.
  for (const { stage, warning } of repeatedWarnings(outcomes)) {
    log.warn({ run: p.name, stage, warning }, 'stage warning');
    process.stderr.write(`${PROG}: warning: ${p.name}: ${stage}: ${visibleName(warning)}\n`);
  }
}

/**
 * Gathers what a run publishes, claims its hour, commits it and publishes it (or, when
 * another master published the hour, commits it publishing nothing); a claim that
 * cannot be had or a queue file that cannot be prepared fails the run. Null: a signal
 * came during the claim, before COMMIT.
 */
export async function commitRun(
  { o, p, hooks, log, signalled }: RunContext,
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
  const byFailed = failedAttemptsAssigned(tailRecords(path.join(o.state, 'runs.jsonl')), p.name, rj.run_id);
  if (byFailed > 0) record.new_domains_failed_attempts = byFailed;
  // An empty rejects file stays staged (the cleanup removes it): the commit publishes none.
  if (fs.existsSync(p.rejects) && fs.statSync(p.rejects).size > 0) record.rejects_file = p.rejectsKept;
  record.master = o.masterName;
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
    keyedBy: keyingToStore(o.state, rj.now, o.keepMs, record.rekeyed !== undefined && record.rekeyed.aliases_only === undefined),
  };
  const unclaimed = await claimForCommit(o, log, hooks, plan, rj.run_id, chain.digest);
  if (unclaimed !== null) return failed('claim', unclaimed);
  if (signalled()) return null;
  record.seconds = seconds();
  try {
    plan.memory = stageMemory(o.state, p.staging, p.currentNext, record);
    prepareQueues(plan);
  } catch (err) {
    if (!(err instanceof DataError)) throw err;
    return failed('publish', formatPlace(err.place, err.message));
  }
  hooks.beforeStep?.(p.name, 'commit');
  writeCommit(plan, hooks);
  await settleClaim(o, log, plan, hooks);
  publish(plan, hooks);
  log.info(
    { run: p.name, sent: record.sent, sent_per_yacobot: record.sent_per_yacobot, new_domains: record.new_domains, seconds: record.seconds },
    'run committed',
  );
  return record;
}

/** The staged queue files of a run, by Yacobot id, with their URLs counted into its record. */
function stagedQueue(p: RunPaths, record: RunRecord): CommitPlan['queue'] {
  const queue: CommitPlan['queue'] = [];
  for (const id of fs.readdirSync(p.queue).sort((a, b) => Number(a) - Number(b))) {
    const f = stagedQueueFile({ staging: p.staging, run: p.name, queueName: p.queueName }, id);
    if (!fs.existsSync(f)) continue;
    const urls = countLines(f);
    queue.push({ yacobot: id, urls });
    record.sent_per_yacobot[id] = urls;
    record.sent += urls;
  }
  return queue;
}
