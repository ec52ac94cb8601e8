// INBOX: the reflogs as the runner names, orders and reads them.
import type * as fs from 'node:fs';
import * as path from 'node:path';
import { hasControl, visibleName } from '../../core/errors.js';

/**
 * Which file a run read as its reflog (st_dev, st_ino, and size and mtime as a
 * sanity check against a number reused after an unlink), as decimal strings: the
 * commit moves the file at the inbox name to done/ only while it is still this one.
 */
export interface ReflogIdentity {
  dev: string;
  ino: string;
  size: string;
  mtime_ns: string;
}

/** The identity of an open file or of a stat result (bigint stats). */
export function reflogIdentity(st: fs.BigIntStats): ReflogIdentity {
  return { dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtime_ns: String(st.mtimeNs) };
}

/** Whether two identities are of the same file, unchanged. */
export function sameFile(a: ReflogIdentity, b: ReflogIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtime_ns === b.mtime_ns;
}

export const REFLOG_EXT = '.reflog';

/** Why a run name cannot be used, or null. The name becomes a file name in several directories. */
export function checkRunName(name: string): string | null {
  if (name === '') return 'is empty';
  if (name.startsWith('.')) return "starts with '.'";
  // hasControl: logsaver refuses a queue name (the run name) with such a character.
  // \p{Zs}: a no-break or ideographic space (U+00A0, U+3000, ...) is a space to the eye too.
  if (!/^[\x21-\x7e\u0080-\uffff]+$/.test(name) || /[/\\\p{Zs}]/u.test(name) || hasControl(name)) return 'contains a space, a slash or a control character';
  if (Buffer.byteLength(name) > 200) return 'is longer than 200 bytes';
  // Node reads a name that is not UTF-8 with U+FFFD in place of its bad bytes: that name
  // cannot be opened again, and the run would fail every time, holding up the inbox.
  if (name.includes('\ufffd')) return 'is not valid UTF-8 (rename the file; ls -b shows its bytes as escapes)';
  return null;
}

/**
 * The reflogs to process, from the inbox's directory entries: `*.reflog` files not
 * starting with '.', in bytewise order of their names (Hour stamps sort oldest
 * first). Names that cannot be run names come back in `skipped` with the reason.
 */
export function planInbox(entries: readonly string[]): { runs: string[]; skipped: { file: string; why: string }[] } {
  const runs: string[] = [];
  const skipped: { file: string; why: string }[] = [];
  for (const f of entries) {
    if (!f.endsWith(REFLOG_EXT) || f.startsWith('.')) continue;
    const name = f.slice(0, -REFLOG_EXT.length);
    const bad = checkRunName(name);
    if (bad) skipped.push({ file: f, why: `run name '${visibleName(name)}' ${bad}` });
    else runs.push(name);
  }
  runs.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return { runs, skipped };
}

/** INBOX/NAME.reflog. */
export function inboxReflog(inbox: string, name: string): string {
  return path.join(inbox, name + REFLOG_EXT);
}
