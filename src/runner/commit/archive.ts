// Step 5 of the commit: the run's reflog leaves the inbox for STATE/done/, only while it
// is the file the run read; parked under a dot name first, so that a file renamed over
// the inbox name meanwhile stays for the next invocation. An earlier run's reflog of the
// name in done/ is kept under a numbered name; a symlink is moved as a link that still
// leads to the file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fsyncPath } from '../../core/dirs.js';
import { mkdirDurable, moveDurable, relinkDurable, sameBytes, statQuiet, symlinkTarget } from '../../core/durable.js';
import { ioError } from '../../core/errors.js';
import { reflogIdentity, sameFile } from '../state/inbox.js';
import { doneReflog, stateLayout } from '../state/layout.js';
import type { CommitHooks, Step } from './hooks.js';
import type { CommitPlan } from './marker.js';

/** Step reflog: moves the run's reflog from the inbox to done/, leaving a file renamed over it in the inbox. */
export function reflogStep(plan: CommitPlan, hooks: CommitHooks): Step {
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
      // sender writes: a check of the inbox name followed by a move of that name would move
      // a file renamed over it in between to done/ unprocessed; and a copy to another file
      // system, or a link made anew, would remove by the inbox name a file renamed over it
      // during the copy. The run's own link whose target went after it was read goes too
      // (left, every later invocation would fail on it, and no later hour would run).
      park(plan.reflog, parked);
      settleOrUnpark();
    },
  };
}

/** Moves what is parked to done/ if it is the run's reflog (calling `replaced` otherwise, after putting it back). */
function settleParked(plan: CommitPlan, hooks: CommitHooks, replaced: () => void): void {
  const done = stateLayout(plan.state).done;
  const to = doneReflog(plan.state, plan.run);
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

/** Whether names `a` and `b` are, or (as symlinks) lead to, the same file; a dangling link leads nowhere. */
function sameFileAt(a: string, b: string): boolean {
  const here = statQuiet(a, fs.lstatSync);
  const there = statQuiet(b, fs.lstatSync);
  const hereFile = here?.isSymbolicLink() ? statQuiet(a, fs.statSync) : here;
  const thereFile = there?.isSymbolicLink() ? statQuiet(b, fs.statSync) : there;
  const same = (x?: fs.BigIntStats, y?: fs.BigIntStats) => x !== undefined && y !== undefined && x.dev === y.dev && x.ino === y.ino;
  return same(here, there) || same(hereFile, thereFile);
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

/** Where the reflog step parks `file` before copying or relinking it: `.<name>.moving` beside it. */
export function parkedPath(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.moving`);
}
