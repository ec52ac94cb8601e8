// The commit of one run. Once STATE/staging/RUN/COMMIT exists (written durably after
// everything staged was fsynced), the run is decided: its publish steps are run in
// order, each idempotent, and the next invocation re-runs all of them after a crash
// ("roll forward"). Without COMMIT, nothing outside the staging area (and the
// database) was touched, and the run is redone from scratch.
//
// Order, and why:
//   0. (before COMMIT) prepareQueues copies each staged queue file to
//                 QUEUE/<id>/.<RUN>.tsv.publish and fsyncs it: a queue side that
//                 cannot take them all (full, read-only, a path that is a file)
//                 fails the run before anything is published.
//   1. queue      rename QUEUE/<id>/.<RUN>.tsv.publish to QUEUE/<id>/<RUN>.tsv
//                 (copied again from staging when a crash left no prepared copy, or
//                 on a roll forward one that differs: cut by a crash while copied again),
//                 then remove the staged file: a roll forward skips a Yacobot whose
//                 staged file is gone, so an error that persists in a later step
//                 does not hand the file out again at every invocation (a crash
//                 between the rename and the removal publishes it once more).
//                 First, so that URLs are handed out before the state that says
//                 they were sent (at-least-once even if the staging area were lost).
//   2. current_log rename the staged file over STATE/current_log, then the staged
//                 copy of it (made before COMMIT) over STATE/current_log.last, the
//                 backup (each skipped when the staged file is gone: renamed before a
//                 crash; a marker of a runner before the copy makes the backup a hard link).
//   2b. settings  write the run's --keep and --resend-after to STATE/settings.json,
//                 with what keyed its URLs (the parser and keying options, rekey.ts).
//   2c. memory    write current_log's identity (size, URL count, SHA-256) and the
//                 replay warning's reference to STATE/memory.json (memory.ts): the next
//                 run checks current_log against it before reading it.
//   3. rejects    rename staged rejects to STATE/rejects/RUN.tsv; with none, remove
//                 a STATE/rejects/RUN.tsv an earlier commit of the name left (that
//                 file is the last committed run's). Then remove the rejects of a
//                 failed attempt, STATE/rejects/failed/RUN.tsv: this run explains
//                 that reflog now. Each part is skipped when done before a crash.
//   4. record     count the backlog, append the runs.jsonl line unless the last
//                 line already is this run's (run_id); a torn last line is cut.
//   5. reflog     move INBOX/RUN.reflog to STATE/done/, only while it is still the
//                 file the run read (reflogFile: device, inode, size, mtime). The
//                 inbox is the to-do list: the reflog leaves it only after all of
//                 the above are durable, and another file renamed over its name
//                 meanwhile (a re-sent hour) stays there, for the next invocation.
//                 It is parked under a dot name (parkedPath) by one rename, checked
//                 there, where nothing else renames over it, and moved on from there
//                 (renamed, copied across file systems, or a relative link made anew);
//                 a newcomer parked in its place is put back (putBack). A symlink
//                 whose target went after the run read it is moved too when it is the
//                 link the run read through (reflogLink: its own identity).
//   6. uncommit   the run's summary line is printed (hooks.finished), then COMMIT is
//                 removed: from here a crash leaves a directory that start-up removes
//                 (its reflog has left the inbox), and nothing would print that line.
//   7. cleanup    remove the staging directory (staged files, run.json).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../core/dirs.js';
import { DataError, ioError } from '../core/errors.js';
import {
  appendRecordOnce,
  countLines,
  fsyncTree,
  mkdirDurable,
  moveDurable,
  parkedPath,
  prepareCopy,
  preparedPath,
  publishCopy,
  relinkDurable,
  renameIntoPlace,
  sameBytes,
  symlinkTarget,
  writeFileDurable,
} from './fsutil.js';
import { REFLOG_EXT, failedRejects, keptRejects, type RunRecord } from './plan.js';
import { reflogIdentity, sameFile, type ReflogIdentity } from './pipeline.js';
import { memoryFile, stagedBackup, type MemoryRecord } from './memory.js';
import { currentLogLink, settingsFile, settingsText } from './settings.js';
import type { KeyedBy } from './rekey.js';
import { carryFile, stagedCarry } from './carry.js';
import type { HourClaimRef } from '../core/store/claims.js';

/** Everything the publish needs, recorded in the COMMIT marker (absolute paths). */
export interface CommitPlan {
  version: 1;
  run: string;
  staging: string;
  state: string;
  reflog: string;
  /** The file the run read at `reflog`; absent in markers of runners before it was recorded. */
  reflogFile?: ReflogIdentity;
  /**
   * The inbox entry the run read it through: the symlink's own identity (lstat), or null
   * when `reflog` was the file itself; absent when that could not be told, and in markers
   * of runners before it was recorded.
   */
  reflogLink?: ReflogIdentity | null;
  queueDir: string;
  /** The name of the run's queue files when it is not the run's (a replay beside untaken files of the name); absent: the run's. */
  queueName?: string;
  backlogWarn: number;
  /** Staged queue files: QUEUE/<yacobot>/<RUN>.tsv comes from <staging>/work/queue/<yacobot>/<RUN>.tsv. */
  queue: { yacobot: string; urls: number }[];
  record: RunRecord;
  /** What keyed the run's URLs (rekey.ts), stored with its settings; absent in markers of runners before it. */
  keyedBy?: KeyedBy;
  /** The run's claim of its hour, confirmed before the queue files are published (runner/claims.ts); absent: nothing to confirm. */
  claim?: HourClaimRef;
  /** What STATE/memory.json records after the commit; absent in markers of runners before it was recorded. */
  memory?: MemoryRecord;
}

/** A named, idempotent publish step. */
export interface Step {
  name: string;
  run(): void;
}

/** Per-Yacobot backlog: queue files and URLs still waiting in QUEUE/<id>/. */
export type Backlog = Record<string, { files: number; urls: number }>;

/** Things the steps report on the way (logging stays with the caller). */
export interface CommitHooks {
  /** Called before each step; a test failpoint may kill the process here. */
  beforeStep?(run: string, step: string): void;
  backlogWarn?(yacobot: string, b: { files: number; urls: number }, limit: number): void;
  /** The run's record, and whether it was appended (false: runs.jsonl already ended with it, a roll forward's). */
  recorded?(record: RunRecord, appended: boolean): void;
  /** The file now at `reflog` is not the one the run read: it stays in the inbox. */
  reflogReplaced?(run: string, reflog: string): void;
  /** An earlier run's reflog at done/RUN.reflog, other bytes than this run's, was kept as `kept`. */
  archiveKept?(run: string, archived: string, kept: string): void;
  /**
   * The run is over but for the removal of its COMMIT, which comes right after: the last
   * moment at which a crash still leaves it to a roll forward (what is said here is said
   * again only if the process dies before that removal, never lost).
   */
  finished?(run: string): void;
}

/** The staged queue file of a Yacobot. */
export function stagedQueueFile(plan: Pick<CommitPlan, 'staging' | 'run' | 'queueName'>, yacobot: string): string {
  return path.join(plan.staging, 'work', 'queue', yacobot, `${plan.queueName ?? plan.run}.tsv`);
}

/**
 * Makes the staged outputs durable and writes the COMMIT marker: from here on the
 * run will be published, by this process or by the next one.
 */
export function writeCommit(plan: CommitPlan, hooks: CommitHooks = {}): void {
  const work = path.join(plan.staging, 'work');
  // The spill directory is not published; the rest must be on disk first. The stage
  // logs stay until cleanup: until COMMIT is durable, a crash recovery reads what
  // upload-domains assigned from them.
  fs.rmSync(path.join(work, 'tmp'), { recursive: true, force: true });
  fsyncTree(work);
  hooks.beforeStep?.(plan.run, 'commit:marker');
  writeFileDurable(path.join(plan.staging, 'COMMIT'), JSON.stringify(plan, null, 1) + '\n');
}

/** Reads a COMMIT marker; null when there is none. */
export function readCommit(staging: string): CommitPlan | null {
  const f = path.join(staging, 'COMMIT');
  let text: string;
  try {
    text = fs.readFileSync(f, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw ioError(err, f, 'read');
  }
  try {
    const plan = JSON.parse(text) as CommitPlan;
    if (plan.version !== 1) throw new Error('unknown version');
    return plan;
  } catch (err) {
    // Written by rename after fsync, so it is whole; anything else is not ours to guess at.
    throw ioError(
      new Error(`damaged COMMIT marker (${(err as Error).message}); see "A COMMIT marker the runner cannot read" in docs/operations.md`),
      f,
      'read',
    );
  }
}

/** Counts the queue files (*.tsv) and URLs waiting in each QUEUE/<id>/. */
export function countBacklog(queueDir: string): Backlog {
  const out: Backlog = {};
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return out;
  }
  for (const id of ids.filter((d) => /^[1-9]\d*$/.test(d)).sort((a, b) => Number(a) - Number(b))) {
    const dir = path.join(queueDir, id);
    let files: string[];
    try {
      if (!fs.statSync(dir).isDirectory()) continue;
      files = fs.readdirSync(dir).filter((f) => f.endsWith('.tsv') && !f.startsWith('.'));
    } catch {
      continue;
    }
    let urls = 0;
    let n = 0;
    for (const f of files) {
      try {
        urls += countLines(path.join(dir, f));
        n++;
      } catch {
        /* taken away by the consumer while we counted */
      }
    }
    out[id] = { files: n, urls };
  }
  return out;
}

/** Where a run's queue file for one Yacobot is published. */
function publishedQueueFile(plan: Pick<CommitPlan, 'queueDir' | 'run' | 'queueName'>, yacobot: string): string {
  return path.join(plan.queueDir, yacobot, `${plan.queueName ?? plan.run}.tsv`);
}

/**
 * Step 0: copies every staged queue file beside its destination, fsynced, before
 * the COMMIT. On failure the copies made are removed and the error is thrown: the
 * run fails with no queue file published. A queue file of the same name already
 * there with other bytes is such a failure: replacing it would lose URLs that
 * current_log records as sent (queueNameFor gives a replay beside untaken files a name
 * of its own, so only a file that came under that name since can do it).
 */
export function prepareQueues(plan: CommitPlan): void {
  // Every such file is named at once: each attempt that finds one more is a whole run.
  const untaken: CommitPlan['queue'] = [];
  for (const q of plan.queue) {
    const dst = publishedQueueFile(plan, q.yacobot);
    try {
      if (fs.statSync(dst).isFile() && !sameBytes(stagedQueueFile(plan, q.yacobot), dst)) untaken.push(q);
    } catch (err) {
      // Not there (ENOTDIR: a file in the way of its directory, which mkdir reports below).
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw ioError(err, dst, 'read');
    }
  }
  if (untaken.length > 0) {
    const [first, ...more] = untaken;
    const also = more.map((q) => `${publishedQueueFile(plan, q.yacobot)} (Yacobot ${q.yacobot})`).join(', ');
    const them = more.length > 0 ? 'them' : 'it';
    throw new DataError(
      'QUEUE_NOT_TAKEN',
      `is still there with other URLs (not yet taken by Yacobot ${first!.yacobot}?)` +
        (more.length > 0 ? `, and so ${more.length > 1 ? 'are' : 'is'} ${also}` : '') +
        `; publishing this run would replace them, and current_log has them as sent. Let the Yacobot${more.length > 0 ? 's' : ''} take ${them}, ` +
        `or move ${them} aside under another *.tsv name in the same directory (which the Yacobot still takes), then run again`,
      { file: publishedQueueFile(plan, first!.yacobot) },
    );
  }
  const made: string[] = [];
  try {
    for (const q of plan.queue) {
      const dst = publishedQueueFile(plan, q.yacobot);
      const staged = stagedQueueFile(plan, q.yacobot);
      mkdirDurable(path.dirname(dst));
      made.push(prepareCopy(staged, dst));
    }
  } catch (err) {
    for (const f of made) fs.rmSync(f, { force: true }); // each was written, so its directory is one
    throw err;
  }
}

/**
 * Whether some Yacobot directory of `queueDir` holds `name`.tsv, or the copy prepareQueues
 * makes of it: a Yacobot has not taken that file yet, or a commit is publishing it.
 */
export function queueNameTaken(queueDir: string, name: string): boolean {
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return false;
  }
  return ids.some((id) => {
    const f = path.join(queueDir, id, `${name}.tsv`);
    return /^[1-9]\d*$/.test(id) && (statQuiet(f, fs.lstatSync) !== undefined || statQuiet(preparedPath(f), fs.lstatSync) !== undefined);
  });
}

/**
 * Removes the copies prepareQueues made for run `run` (QUEUE/<id>/.<RUN>.tsv.publish)
 * that no COMMIT will publish: those of an attempt killed between its copies and its
 * COMMIT, found by start-up. A retry that made the same files replaced them; one that
 * failed, made no file for that Yacobot, or never came (its reflog taken out of the
 * inbox) left them there for good.
 */
export function removePrepared(queueDir: string, run: string, queueName?: string): void {
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return; // no queue side yet, so no copy there
  }
  for (const id of ids.filter((d) => /^[1-9]\d*$/.test(d))) {
    const f = preparedPath(publishedQueueFile({ queueDir, run, ...(queueName !== undefined && { queueName }) }, id));
    try {
      fs.unlinkSync(f);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw ioError(err, f, 'remove');
    }
    // Durable before the staging area goes: back after a power loss, nothing would remove it.
    fsyncPath(path.dirname(f));
  }
}

/**
 * When `file` is a symlink with a relative target (`../incoming/x.reflog`), which
 * would dangle once moved to done/ (and again when moved back for a replay): the
 * real path of the file it leads to, `st`; else null (moved as it is).
 */
function relativeLinkTarget(file: string, st: fs.BigIntStats): string | null {
  try {
    if (!fs.lstatSync(file).isSymbolicLink() || path.isAbsolute(fs.readlinkSync(file))) return null;
    const real = fs.realpathSync(file);
    const rst = fs.statSync(real, { bigint: true });
    // Changed between the two looks (a link in the chain replaced): move the link as it is.
    return rst.dev === st.dev && rst.ino === st.ino ? real : null;
  } catch (err) {
    throw ioError(err, file, 'resolve symlink');
  }
}

/** Whether `copy` holds the bytes of `staged` (a DataError naming the copy if either cannot be read). */
function sameCopy(staged: string, copy: string): boolean {
  try {
    return sameBytes(staged, copy);
  } catch (err) {
    throw ioError(err, copy, 'compare with its staged file');
  }
}

/**
 * The target for done/ of the symlink `file` whose target is gone: the same absolute
 * path, or a relative one resolved from the link's directory (kept relative, it would
 * lead elsewhere from done/).
 */
function danglingTarget(file: string): string {
  try {
    const target = fs.readlinkSync(file);
    return path.isAbsolute(target) ? target : path.resolve(fs.realpathSync(path.dirname(file)), target);
  } catch (err) {
    throw ioError(err, file, 'read symlink');
  }
}

/**
 * Moves the reflog parked at `from` (parkedPath) to done/ as `to`: a link with a relative
 * target as a link to the real path of its file, a link whose target is gone as a link to
 * where it led (a copy would find nothing to copy), anything else as it is; `from` goes last.
 */
function moveOut(from: string, to: string): void {
  const target = doneLinkTarget(from);
  if (target === undefined) return; // moved before a crash (relinkDurable removes `from` last)
  if (target !== null) relinkDurable(from, to, target);
  else moveDurable(from, to);
}

/**
 * What moveOut makes of `from` in done/: the target of a new link (a link with a relative
 * target, or a dangling one), null when it moves `from` as it is, undefined when nothing is there.
 */
function doneLinkTarget(from: string): string | null | undefined {
  const st = statQuiet(from, fs.statSync);
  if (st === undefined) return statQuiet(from, fs.lstatSync)?.isSymbolicLink() ? danglingTarget(from) : undefined;
  return relativeLinkTarget(from, st);
}

/**
 * Renames `archived` (done/RUN.reflog, an earlier run's reflog) to `archived.~N~`, N one
 * more than the highest there, and returns that name; null, touching nothing, when it has the same bytes
 * as `incoming` (a replay copied out of done/), or is the link moveOut makes of it. A
 * dangling link there, other than that one, or anything but a regular file, counts as
 * other bytes.
 */
function keepArchived(incoming: string, archived: string): string | null {
  // The link moveOut made there before a crash, its `incoming` not yet removed (a
  // dangling one has no bytes to compare), or the same link re-sent.
  const link = symlinkTarget(archived);
  if (link !== null && link === (doneLinkTarget(incoming) ?? symlinkTarget(incoming))) return null;
  let same: boolean;
  try {
    // Not opened unless a regular file: open(2) of a FIFO waits for a writer, for ever
    // (and deaf to SIGTERM), at every roll forward.
    same = fs.statSync(archived).isFile() && sameBytes(incoming, archived);
  } catch {
    same = false; // one of them cannot be read (a dangling link): keep it, as it is
  }
  if (same) return null;
  // As GNU's numbered backups: one more than the highest there, so a higher number is
  // always a later one, whichever were removed.
  const prefix = `${path.basename(archived)}.~`;
  let last = 0;
  for (const f of fs.readdirSync(path.dirname(archived))) {
    const m = f.startsWith(prefix) ? /^(\d{1,9})~$/.exec(f.slice(prefix.length)) : null;
    if (m) last = Math.max(last, Number(m[1]));
  }
  for (let n = last + 1; ; n++) {
    const kept = `${archived}.~${n}~`;
    if (statQuiet(kept, fs.lstatSync) !== undefined) continue; // made meanwhile, not by this runner
    try {
      fs.renameSync(archived, kept);
    } catch (err) {
      throw ioError(err, kept, `move ${archived} here`);
    }
    fsyncPath(path.dirname(kept));
    return kept;
  }
}

/** `stat(file)` (bigint), or undefined when nothing is there (ENOENT, or ENOTDIR: a file in the way of a directory). */
function statQuiet(file: string, stat: typeof fs.statSync | typeof fs.lstatSync): fs.BigIntStats | undefined {
  try {
    return stat(file, { bigint: true, throwIfNoEntry: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw ioError(err, file, 'stat');
    return undefined;
  }
}

/**
 * Whether the entry at `file` (the inbox name, or its parkedPath) is the reflog the run
 * read: 'ours' (anything, for a marker without reflogFile), 'other', 'gone', or 'unknown'
 * (a symlink whose target is gone, which a marker without reflogLink cannot tell).
 */
function reflogAt(plan: CommitPlan, file: string): 'ours' | 'other' | 'gone' | 'unknown' {
  const st = statQuiet(file, fs.statSync);
  if (st !== undefined) return plan.reflogFile === undefined || sameFile(reflogIdentity(st), plan.reflogFile) ? 'ours' : 'other';
  const link = statQuiet(file, fs.lstatSync);
  if (link === undefined) return 'gone';
  // A symlink whose target is gone: the run's own link is recognised by its own identity.
  if (!link.isSymbolicLink() || plan.reflogLink === undefined) return 'unknown';
  return plan.reflogLink !== null && sameFile(reflogIdentity(link), plan.reflogLink) ? 'ours' : 'other';
}

/**
 * Puts a parked reflog that is not the run's back at the inbox name `file`, without
 * replacing one renamed there since (link(2) fails rather than replace); that one,
 * newer, stays, and the parked one goes, as the sender's rename over it would have made
 * it go. Where link(2) is refused (fs.protected_hardlinks and a file of another user, a
 * file system without hard links), it is renamed back if the name is still free.
 */
function putBack(parked: string, file: string): void {
  const dir = path.dirname(file);
  try {
    fs.linkSync(parked, file);
    fsyncPath(dir);
  } catch (err) {
    // EEXIST: a newer file, or this one linked back before a crash.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST' && statQuiet(file, fs.lstatSync) === undefined) {
      try {
        fs.renameSync(parked, file);
      } catch (e) {
        throw ioError(e, parked, `rename back to ${path.basename(file)}`);
      }
      fsyncPath(dir);
      return;
    }
  }
  try {
    fs.unlinkSync(parked);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(err, parked, 'remove');
  }
  fsyncPath(dir);
}

/** Puts the run's parked reflog back at `file` if nothing is there (else it stays parked); never throws. */
function unpark(parked: string, file: string): void {
  try {
    fs.linkSync(parked, file);
  } catch {
    return; // a newcomer at the name (EEXIST), or no hard links here: the roll forward moves it from where it is
  }
  try {
    fs.unlinkSync(parked);
    fsyncPath(path.dirname(file));
  } catch {
    /* both names lead to it: the roll forward moves the dot name's first, then finds this one done/'s */
  }
}

/** Removes `file` if it is there, durably (a DataError naming it when it cannot). */
function removeDurable(file: string): void {
  if (!fs.existsSync(file)) return;
  try {
    fs.rmSync(file, { force: true });
  } catch (err) {
    throw ioError(err, file, 'remove');
  }
  fsyncPath(path.dirname(file));
}

/** Renames the reflog `file` to its parkedPath `parked`, durably. */
function park(file: string, parked: string): void {
  try {
    fs.renameSync(file, parked);
  } catch (err) {
    throw ioError(err, file, `rename to ${path.basename(parked)}`);
  }
  fsyncPath(path.dirname(parked));
}

/**
 * Makes `link` a hard link of `file` (unless it already is one), so that removing
 * `file` by hand loses nothing; where hard links cannot be made, leaves it as it is.
 */
function keepLink(file: string, link: string): void {
  const a = statQuiet(file, fs.lstatSync);
  const b = statQuiet(link, fs.lstatSync);
  if (a === undefined || (b !== undefined && a.dev === b.dev && a.ino === b.ino)) return;
  const tmp = path.join(path.dirname(link), `.${path.basename(link)}.tmp`);
  try {
    fs.rmSync(tmp, { force: true });
    fs.linkSync(file, tmp);
    fs.renameSync(tmp, link);
  } catch {
    fs.rmSync(tmp, { force: true });
    return; // no copy kept: the message for a missing current_log then says so
  }
  fsyncPath(path.dirname(link));
}

/** The publish steps of a committed run, in the order above. */
export function publishSteps(plan: CommitPlan, hooks: CommitHooks = {}, recovered = false): Step[] {
  const work = path.join(plan.staging, 'work');
  const steps: Step[] = plan.queue.map((q) => queueStep(plan, q.yacobot, recovered));
  steps.push(currentLogStep(plan, work), carryStep(plan, work), settingsStep(plan), memoryStep(plan));
  steps.push(rejectsStep(plan, work), recordStep(plan, hooks, recovered), reflogStep(plan, hooks));
  steps.push(uncommitStep(plan, hooks), cleanupStep(plan));
  return steps;
}

/** Step queue:ID: publishes Yacobot `yacobot`'s queue file from its copy beside its place (or its staged file), then removes the staged file. */
function queueStep(plan: CommitPlan, yacobot: string, recovered: boolean): Step {
  return {
    name: `queue:${yacobot}`,
    run() {
      const dst = publishedQueueFile(plan, yacobot);
      const prepared = preparedPath(dst);
      const staged = stagedQueueFile(plan, yacobot);
      const hasStaged = fs.existsSync(staged);
      // The copy made before COMMIT is whole; a roll forward may also find the copy
      // made below by an earlier roll forward, cut off where a crash stopped it.
      if (fs.existsSync(prepared) && !(recovered && hasStaged && !sameCopy(staged, prepared))) renameIntoPlace(prepared, dst);
      else if (hasStaged) {
        // Renamed before a crash (copying again writes the same bytes), or a COMMIT of an older version.
        mkdirDurable(path.dirname(dst));
        publishCopy(staged, dst);
      } else return; // published: its staged file goes only after that (runners before the uncommit step removed them before COMMIT)
      try {
        fs.rmSync(staged, { force: true });
      } catch (err) {
        throw ioError(err, staged, 'remove');
      }
      fsyncPath(path.dirname(staged));
    },
  };
}

/** Renames `from` to `to` durably, making `to`'s directory if needed; nothing when `from` is gone (renamed before a crash). */
function moveIntoPlace(from: string, to: string): void {
  if (!fs.existsSync(from)) return; // renamed before a crash
  mkdirDurable(path.dirname(to));
  try {
    fs.renameSync(from, to);
  } catch (err) {
    throw ioError(err, to, 'rename into place');
  }
  fsyncPath(path.dirname(to));
}

/** Step current_log: replaces STATE/current_log with the staged one, then the backup with its staged copy. */
function currentLogStep(plan: CommitPlan, work: string): Step {
  return {
    name: 'current_log',
    run() {
      const current = path.join(plan.state, 'current_log');
      moveIntoPlace(path.join(work, 'current_log'), current);
      if (plan.memory !== undefined) moveIntoPlace(stagedBackup(plan.staging), currentLogLink(plan.state));
      else keepLink(current, currentLogLink(plan.state));
    },
  };
}

/** Step memory: records the new current_log's identity and the replay reference in STATE/memory.json. */
function memoryStep(plan: CommitPlan): Step {
  return {
    name: 'memory',
    run() {
      if (plan.memory !== undefined) writeFileDurable(memoryFile(plan.state), JSON.stringify(plan.memory) + '\n');
    },
  };
}

/**
 * Step carry: replaces STATE/carry with the staged one (a run with limit-domains in its
 * chain; none without). After current_log's: both are the state this run leaves, and a
 * crash between the two is rolled forward.
 */
function carryStep(plan: CommitPlan, work: string): Step {
  return {
    name: 'carry',
    run() {
      moveIntoPlace(stagedCarry({ work }), carryFile(plan.state));
    },
  };
}

/** Step settings: stores the run's --keep, --resend-after and cap with the state. */
function settingsStep(plan: CommitPlan): Step {
  return {
    name: 'settings',
    run() {
      const { run, keep_ms, resend_after_ms, max_per_domain, carry_keep_ms } = plan.record;
      // A marker of a runner before keep_ms was recorded: the settings stay as they were.
      if (Number.isSafeInteger(keep_ms) && Number.isSafeInteger(resend_after_ms)) {
        writeFileDurable(settingsFile(plan.state), settingsText({ run, keep_ms, resend_after_ms, max_per_domain, carry_keep_ms, keyed_by: plan.keyedBy }));
      }
    },
  };
}

/** Step rejects: keeps the run's rejects file in STATE/rejects/ (or removes one an earlier run left) and removes its failed attempts'. */
function rejectsStep(plan: CommitPlan, work: string): Step {
  const rejects = keptRejects(plan.state, plan.run);
  return {
    name: 'rejects',
    run() {
      // No rejects this time: a file an earlier run of the same name left (or a failed
      // attempt, by a runner before failed/) would pass for this run's.
      if (plan.record.rejects_file !== undefined) moveIntoPlace(path.join(work, 'rejects.tsv'), rejects);
      else removeDurable(rejects);
      removeDurable(failedRejects(plan.state, plan.run));
    },
  };
}

/** Step record: appends the run's line, with each Yacobot's backlog, to runs.jsonl (once). */
function recordStep(plan: CommitPlan, hooks: CommitHooks, recovered: boolean): Step {
  return {
    name: 'record',
    run() {
      const backlog = countBacklog(plan.queueDir);
      const warn = Object.entries(backlog).filter(([, b]) => b.urls > plan.backlogWarn);
      for (const [id, b] of warn) hooks.backlogWarn?.(id, b, plan.backlogWarn);
      const record: RunRecord = { ...plan.record, backlog };
      if (warn.length > 0) record.backlog_warn = warn.map(([id]) => id);
      if (recovered) record.recovered = 'roll-forward';
      const appended = appendRecordOnce(path.join(plan.state, 'runs.jsonl'), record);
      hooks.recorded?.(record, appended);
    },
  };
}

/** Step reflog: moves the run's reflog from the inbox to done/, leaving a file renamed over it in the inbox. */
function reflogStep(plan: CommitPlan, hooks: CommitHooks): Step {
  return {
    name: 'reflog',
    run() {
      const parked = parkedPath(plan.reflog);
      let warned = false;
      const replaced = () => {
        if (!warned) hooks.reflogReplaced?.(plan.run, plan.reflog);
        warned = true;
      };
      /** settleParked(); on an error that may persist (a directory in the way in done/, done/ full), the reflog waits for the fix under its inbox name, if that is still free. */
      const settleOrUnpark = () => {
        try {
          settleParked(plan, hooks, replaced);
        } catch (err) {
          unpark(parked, plan.reflog);
          throw err;
        }
      };
      // Parked before a crash: the run's reflog, or one that came in its place just before.
      if (statQuiet(parked, fs.lstatSync) !== undefined) settleOrUnpark();
      const whose = reflogAt(plan, plan.reflog);
      if (whose === 'gone' || whose === 'unknown') return; // moved before a crash; a dangling link an old marker cannot tell
      if (whose === 'other') {
        // Renamed over the name while the run read the old one (or, on a roll forward,
        // after the old one had left): unprocessed, it must stay on the to-do list.
        replaced();
        return;
      }
      // Parked first (one rename), then checked again and moved from the dot name, which no
      // sender writes: a check of the inbox name followed by a move of that name moved a
      // file renamed over it in between to done/ unprocessed; and a copy to another file
      // system, or a link made anew, removed by the inbox name a file renamed over it during
      // the copy. The run's own link whose target went after it was read goes too (left,
      // every later invocation failed on it, 'cannot read: ENOENT', and no later hour ran).
      park(plan.reflog, parked);
      settleOrUnpark();
    },
  };
}

/** Moves what is parked to done/ if it is the run's reflog (calling `replaced` otherwise, after putting it back). */
function settleParked(plan: CommitPlan, hooks: CommitHooks, replaced: () => void): void {
  const done = path.join(plan.state, 'done');
  const to = path.join(done, plan.run + REFLOG_EXT);
  const parked = parkedPath(plan.reflog);
  const whose = reflogAt(plan, parked);
  if (whose === 'gone') return; // moved before a crash
  if (whose === 'other') {
    // Renamed over the inbox name just before it was parked: the run's own reflog had
    // already left, replaced; this one is unprocessed.
    putBack(parked, plan.reflog);
    replaced();
    return;
  }
  mkdirDurable(done);
  const there = statQuiet(to, fs.lstatSync);
  if (sameFileAt(parked, to)) {
    // done/RUN.reflog already is, or leads to, the file the run read. A hard link of
    // it (a replay made with ln, not mv): rename(2) of one link over another of the
    // same file does nothing, and the reflog stayed in the inbox, run again at every
    // invocation. A symlink to it (ln -s): moved there, it replaced the only copy of
    // the hour with a link to itself.
    try {
      fs.unlinkSync(parked);
    } catch (err) {
      throw ioError(err, parked, 'remove (done/ holds the same file)');
    }
    fsyncPath(path.dirname(parked));
    return;
  }
  // What an earlier run of this name archived (this one is a re-send, or a replay
  // copied out of done/) is the record of what that run read: kept, not replaced.
  // A directory in the way stays an error (see moveOut).
  if (there !== undefined && !there.isDirectory()) {
    const kept = keepArchived(parked, to);
    if (kept !== null) hooks.archiveKept?.(plan.run, to, kept);
  }
  moveOut(parked, to);
}

/** Whether names `a` and `b` are, or (as symlinks) lead to, the same file; a dangling link leads nowhere. */
function sameFileAt(a: string, b: string): boolean {
  const here = statQuiet(a, fs.lstatSync);
  const there = statQuiet(b, fs.lstatSync);
  const hereFile = here?.isSymbolicLink() ? statQuiet(a, fs.statSync) : here;
  const thereFile = there?.isSymbolicLink() ? statQuiet(b, fs.statSync) : there;
  const same = (x?: fs.BigIntStats, y?: fs.BigIntStats) => x !== undefined && y !== undefined && x.dev === y.dev && x.ino === y.ino;
  return same(here, there) || same(hereFile, thereFile);
}

/** Step uncommit: removes the COMMIT marker (after telling hooks.finished), which ends the run's roll forward. */
function uncommitStep(plan: CommitPlan, hooks: CommitHooks): Step {
  return {
    name: 'uncommit',
    run() {
      // COMMIT goes first: while it is there, a roll forward needs every staged file.
      // Without it, start-up drops the directory (the reflog has left the inbox).
      hooks.finished?.(plan.run);
      fs.rmSync(path.join(plan.staging, 'COMMIT'), { force: true });
      fsyncPath(plan.staging);
    },
  };
}

/** Step cleanup: removes the run's staging directory. */
function cleanupStep(plan: CommitPlan): Step {
  return {
    name: 'cleanup',
    run() {
      fs.rmSync(plan.staging, { recursive: true, force: true });
      fsyncPath(path.dirname(plan.staging));
    },
  };
}

/** What each publish step does, for a message on what still waits. */
function stepWork(step: string): string {
  if (step.startsWith('queue:')) return `publish the queue file of Yacobot ${step.slice('queue:'.length)}`;
  const work: Record<string, string> = {
    current_log: 'replace current_log',
    settings: 'store its settings',
    memory: "record current_log's identity",
    rejects: 'keep its rejects',
    record: 'append its runs.jsonl line',
    reflog: 'move its reflog to done/',
    uncommit: 'remove its staging area',
  };
  return work[step] ?? '';
}

/**
 * Runs every publish step of a committed run (first time or roll forward). A step that
 * fails throws a DataError that says the run is committed and which steps still wait.
 */
export function publish(plan: CommitPlan, hooks: CommitHooks = {}, recovered = false): void {
  const steps = publishSteps(plan, hooks, recovered);
  steps.forEach((s, i) => {
    hooks.beforeStep?.(plan.run, s.name);
    try {
      s.run();
    } catch (err) {
      if (!(err instanceof DataError)) throw err;
      const waiting = [
        ...new Set(
          steps
            .slice(i)
            .map((t) => stepWork(t.name))
            .filter((w) => w !== ''),
        ),
      ].join(', ');
      throw new DataError(
        err.code,
        `${err.message}; run ${plan.run} is committed, nothing of it is lost: still waiting: ${waiting}, which the next invocation does once this is fixed`,
        err.place,
      );
    }
  });
}
