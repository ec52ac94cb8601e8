// The digest that names a reflog in the claims of hours: SHA-256 of its bytes.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';

/** The SHA-256 (hex) of the whole file open on `fd`, read from its start (the descriptor's offset is left as it is). */
export function digestOfFd(fd: number): string {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  for (let at = 0; ; ) {
    const n = fs.readSync(fd, buf, 0, buf.length, at);
    if (n === 0) break;
    hash.update(buf.subarray(0, n));
    at += n;
  }
  return hash.digest('hex');
}
