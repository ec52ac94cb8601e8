// Finding a URL's record in a queue file by a chunked scan: a record cut by a chunk's
// end (1 MiB) is found whole, on the first line and the last one too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scratch } from './lib/run.js';
import { idsInFile, recordById } from '../src/runner/views/find-url.js';

/** A URL record with id `n` (16 hex digits) and a URL long enough to spread the file over chunks. */
function record(n: number, pad: number): string {
  const id = n.toString(16).padStart(16, '0');
  return `${id}\t20110728060000\t\t1\texample.com\thttp://example.com/${'x'.repeat(pad)}/${n}`;
}

test('recordById: first, last, cut by a chunk end, and missing records', () => {
  const dir = scratch('ms-find-url-');
  const file = path.join(dir, 'q.tsv');
  // 300 records of ~5 KiB: the 1 MiB chunk ends fall inside records.
  const lines = Array.from({ length: 300 }, (_, i) => record(i + 1, 5000 + i));
  fs.writeFileSync(file, lines.join('\n') + '\n');
  let offset = 0;
  const cut = lines.findIndex((l) => (offset += l.length + 1) > 1 << 20);
  for (const i of [0, cut, cut + 1, 299]) {
    const f = lines[i]!.split('\t');
    assert.deepEqual(recordById(file, f[0]!), f, `record ${i}`);
  }
  assert.equal(recordById(file, 'ffffffffffffffff'), null);
  assert.deepEqual([...idsInFile(file, [lines[cut]!.slice(0, 16), 'ffffffffffffffff'])], [lines[cut]!.slice(0, 16)]);
  // A last line without LF.
  fs.writeFileSync(file, lines.slice(0, 3).join('\n'));
  assert.deepEqual(recordById(file, lines[2]!.slice(0, 16)), lines[2]!.split('\t'));
});
