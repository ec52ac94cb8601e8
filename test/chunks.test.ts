import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { CHUNK_BYTES, fileChunks, pipeChunks } from '../src/core/chunks.js';

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes the chunks of `chunks` slowly (a wait after each), checking that each one's
 * bytes have not changed by the time the next is asked for; returns them joined.
 */
async function takeSlowly(chunks: AsyncIterable<Buffer>): Promise<{ all: Buffer; sizes: number[] }> {
  const parts: Buffer[] = [];
  const sizes: number[] = [];
  for await (const chunk of chunks) {
    const copy = Buffer.from(chunk);
    await tick(5);
    assert.ok(chunk.equals(copy), 'a chunk changed before the next one was asked for');
    parts.push(copy);
    sizes.push(chunk.length);
  }
  return { all: Buffer.concat(parts), sizes };
}

test('pipeChunks: a FIFO written in pieces gives its bytes in order, in chunks of at most CHUNK_BYTES, each unchanged until the next', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-chunks-'));
  try {
    const fifo = path.join(dir, 'in');
    execFileSync('mkfifo', [fifo]);
    const data = randomBytes(3 * CHUNK_BYTES + 12345);
    const rfd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const wfd = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
    // The writer writes while the reader holds a chunk: a buffer refilled meanwhile shows.
    const writer = (async () => {
      for (let at = 0; at < data.length; ) {
        try {
          at += fs.writeSync(wfd, data, at, Math.min(200_000, data.length - at));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
          await tick(1);
        }
      }
      fs.closeSync(wfd);
    })();
    const [{ all, sizes }] = await Promise.all([takeSlowly(pipeChunks(rfd)), writer]);
    assert.ok(all.equals(data), 'the bytes read are the bytes written');
    assert.ok(sizes.length > 1);
    assert.ok(Math.max(...sizes) <= CHUNK_BYTES, `chunks of ${Math.max(...sizes)} bytes`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('fileChunks: a regular file gives its bytes from the current offset, in chunks of at most the buffer size', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-chunks-'));
  try {
    const file = path.join(dir, 'f');
    const data = randomBytes(3 * 65536 + 7);
    fs.writeFileSync(file, data);
    const fd = fs.openSync(file, 'r');
    fs.readSync(fd, Buffer.alloc(10), 0, 10, null);
    const { all, sizes } = await takeSlowly(fileChunks(fd, 65536));
    fs.closeSync(fd);
    assert.ok(all.equals(data.subarray(10)));
    assert.deepEqual(sizes, [65536, 65536, 65536 + 7 - 10]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
