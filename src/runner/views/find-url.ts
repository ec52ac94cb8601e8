// Finding a URL in the job's files without loading them: current_log by binary search
// on its sorted ids, queue files and rejects files by a bounded streaming scan.
import * as fs from 'node:fs';
import * as readline from 'node:readline';

const CHUNK = 1 << 16;

/** The fields of the line of `file` (sorted bytewise by its 16-digit id first field, unique) whose id is `id`, or null. */
export function findById(file: string, id: string): string[] | null {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const size = fs.fstatSync(fd).size;
    // The first offset whose next line start has an id >= `id` (or is the end).
    let lo = 0;
    let hi = size;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const s = nextLineStart(fd, mid, size);
      if (s < size && readAt(fd, s, id.length) < id) lo = mid + 1;
      else hi = mid;
    }
    const s = nextLineStart(fd, lo, size);
    if (s >= size || readAt(fd, s, id.length + 1) !== `${id}\t`) return null;
    return readLine(fd, s, size).split('\t');
  } finally {
    fs.closeSync(fd);
  }
}

/** `n` bytes at `pos` as text (fewer at the end of the file). */
function readAt(fd: number, pos: number, n: number): string {
  const buf = Buffer.alloc(n);
  const got = fs.readSync(fd, buf, 0, n, pos);
  return buf.toString('latin1', 0, got);
}

/** The first line start at or after `pos` (`size` when there is none). */
function nextLineStart(fd: number, pos: number, size: number): number {
  if (pos === 0) return 0;
  const buf = Buffer.alloc(CHUNK);
  for (let at = pos - 1; at < size; at += CHUNK) {
    const got = fs.readSync(fd, buf, 0, CHUNK, at);
    const lf = buf.subarray(0, got).indexOf(10);
    if (lf >= 0) return at + lf + 1;
    if (got === 0) break;
  }
  return size;
}

/** The line that starts at `start`, LF removed. */
function readLine(fd: number, start: number, size: number): string {
  const parts: Buffer[] = [];
  const buf = Buffer.alloc(CHUNK);
  for (let at = start; at < size; at += CHUNK) {
    const got = fs.readSync(fd, buf, 0, CHUNK, at);
    const lf = buf.subarray(0, got).indexOf(10);
    parts.push(Buffer.from(buf.subarray(0, lf >= 0 ? lf : got)));
    if (lf >= 0 || got === 0) break;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** Which of `ids` start a line of `file` (a stream of URL records, any order); read in chunks. */
export function idsInFile(file: string, ids: readonly string[]): Set<string> {
  const found = new Set<string>();
  const needles = ids.map((id) => ({ id, bytes: Buffer.from(`\n${id}\t`, 'latin1') }));
  const keep = 17; // a needle cut by a chunk's end is whole in the next window
  const fd = fs.openSync(file, 'r');
  try {
    // The file's first line counts as one after an LF.
    let window = Buffer.from('\n');
    const buf = Buffer.alloc(1 << 20);
    for (;;) {
      const got = fs.readSync(fd, buf, 0, buf.length, null);
      if (got === 0) break;
      window = Buffer.concat([window.subarray(Math.max(0, window.length - keep)), buf.subarray(0, got)]);
      for (const n of needles) if (!found.has(n.id) && window.includes(n.bytes)) found.add(n.id);
      if (found.size === needles.length) break;
    }
  } finally {
    fs.closeSync(fd);
  }
  return found;
}

/** The fields of the first line of `file` (a stream of URL records, any order) whose id is `id`, or null; read in chunks. */
export function recordById(file: string, id: string): string[] | null {
  const needle = Buffer.from(`\n${id}\t`, 'latin1');
  const fd = fs.openSync(file, 'r');
  try {
    // From the last LF read on (the file's first line counts as one after an LF).
    let window = Buffer.from('\n');
    const buf = Buffer.alloc(1 << 20);
    for (;;) {
      const got = fs.readSync(fd, buf, 0, buf.length, null);
      window = Buffer.concat([window, buf.subarray(0, got)]);
      const at = window.indexOf(needle);
      const end = at < 0 ? -1 : window.indexOf(10, at + 1);
      if (at >= 0 && (end >= 0 || got === 0))
        return window
          .subarray(at + 1, end >= 0 ? end : window.length)
          .toString('utf8')
          .split('\t');
      if (got === 0) return null;
      // Not found, or found with its line not yet whole: keep from the last LF before it.
      if (at < 0) window = window.subarray(window.lastIndexOf(10));
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** One line of a rejects file: its reflog line number, the reason, and the URL field of the original line. */
export interface RejectLine {
  line: number;
  reason: string;
  url: string | null;
}

/** Calls `each` for every line of a rejects file (`line TAB reason TAB original bytes`), streamed. */
export async function eachReject(file: string, each: (r: RejectLine) => void): Promise<void> {
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  for await (const l of lines) {
    const f = l.split('\t');
    if (f.length < 3) continue;
    each({ line: Number(f[0]), reason: f[1]!, url: f[2 + 4] ?? null });
  }
}
