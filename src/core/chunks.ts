// A descriptor read in chunks into one reused buffer: a regular file through fs.read,
// a pipe or a socket on the event loop (net.Socket's `onread`), so that a signal still
// stops the reader while its writer is late. No buffer is made per read, as a stream
// makes one (docs/performance.md, "Reading the streams").
import * as fs from 'node:fs';
import * as net from 'node:net';

/** Bytes read at most at once: a grown pipe's size (src/core/pipes.ts). */
export const CHUNK_BYTES = 1 << 20;

/**
 * The regular file open on `fd`, from its current offset, as chunks in one reused
 * buffer: a chunk is valid until the next one is asked for.
 */
export async function* fileChunks(fd: number, size = CHUNK_BYTES): AsyncGenerator<Buffer> {
  const buf = Buffer.allocUnsafeSlow(size);
  for (let n = await readInto(fd, buf); n > 0; n = await readInto(fd, buf)) yield buf.subarray(0, n);
}

/** Reads from `fd` into `buf` (at most its length); resolves to the bytes read, 0 at the end. */
export function readInto(fd: number, buf: Buffer): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, 0, buf.length, null, (err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * The pipe or socket open on `fd` as chunks in one reused buffer, read on the event
 * loop: a chunk is valid until the next one is asked for, and nothing is read
 * meanwhile (the socket is paused between chunks). The descriptor is closed at the end,
 * unless it is 0, 1 or 2 (libuv leaves those open).
 */
export async function* pipeChunks(fd: number, size = CHUNK_BYTES): AsyncGenerator<Buffer> {
  const buf = Buffer.allocUnsafeSlow(size);
  let got = -1; // the bytes of the chunk read and not yet handed out, or -1
  let ended = false;
  let failed: Error | null = null;
  let wake: (() => void) | null = null;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onread = {
    buffer: buf,
    callback: (n: number) => {
      got = n;
      poke();
      return false; // paused until the chunk has been taken
    },
  };
  const socket = new net.Socket({ fd, readable: true, writable: false, onread } as net.SocketConstructorOpts);
  socket.on('end', () => {
    ended = true;
    poke();
  });
  socket.on('error', (err) => {
    failed = err;
    poke();
  });
  try {
    for (;;) {
      if (got < 0 && !ended && failed === null) await new Promise<void>((resolve) => (wake = resolve));
      if (got >= 0) {
        const n = got;
        got = -1;
        yield buf.subarray(0, n);
        socket.resume();
      } else if (failed !== null) throw failed;
      else return;
    }
  } finally {
    socket.destroy();
  }
}
