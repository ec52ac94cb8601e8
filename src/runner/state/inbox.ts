// INBOX: the reflogs as the runner names and reads them.
import type * as fs from 'node:fs';

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
