// A stage's input: stdin or a named file, a FIFO or a regular file (read straight
// into the stage's buffers when it asks for blocks), and what a failure to read it is.
import * as fs from 'node:fs';
import { Readable } from 'node:stream';
import { DataError, UsageError, ioError } from '../core/errors.js';
import { fileChunks, pipeChunks, readInto } from '../core/chunks.js';
import { openFifoToRead, readStreamFor } from '../core/fifos.js';
import { OutputClosed } from './output.js';

/**
 * The stage's input: a regular file's descriptor (read into the stage's buffers), and
 * the input as chunks, each valid until the next is asked for.
 */
export interface InputSource {
  fd: number | null;
  chunks(): AsyncIterable<Buffer>;
}

/**
 * The stage's input, `inputPath` ('-': stdin) named `inputName` in messages (an empty
 * stream when the stage reads none); throws the DataError of an input it cannot read.
 */
export function openInput(readsInput: boolean, inputPath: string, inputName: string): InputSource {
  if (!readsInput) return streamInput(Readable.from([]));
  if (inputPath === '-') {
    const stdin = fstatQuietly(0);
    // Read as a stream, a directory on stdin looks like empty input.
    if (stdin?.isDirectory()) throw new DataError('IO', 'cannot read input: EISDIR: illegal operation on a directory', { file: inputName });
    if (stdin?.isFile()) return fileInput(0);
    return stdin?.isFIFO() || stdin?.isSocket() ? pipeInput(0) : streamInput(process.stdin);
  }
  try {
    fs.accessSync(inputPath, fs.constants.R_OK);
    const st = fs.statSync(inputPath);
    if (st.isFile()) return fileInput(fs.openSync(inputPath, 'r'));
    return st.isFIFO() ? pipeInput(openFifoToRead(inputPath)) : streamInput(readStreamFor(inputPath, st));
  } catch (err) {
    throw ioError(err, inputName, 'read input');
  }
}

/** A regular file as input (`stage < file` or `stage file`), read in 1 MiB chunks into one buffer. */
function fileInput(fd: number): InputSource {
  return { fd, chunks: () => fileChunks(fd) };
}

/** A pipe or a socket as input (a chain's stdin, a FIFO), read on the event loop into one buffer. */
function pipeInput(fd: number): InputSource {
  return { fd: null, chunks: () => pipeChunks(fd) };
}

/** Any other input (a terminal, a character device) as the stream's own chunks. */
function streamInput(s: Readable): InputSource {
  return { fd: null, chunks: () => s };
}

/**
 * Reads the input into buffers the stage gives: each time into `room()` (from its
 * start), then `fn(n)` for the `n` bytes put there; `flush` between reads. A file is
 * read straight into them; a stream's chunks (fed by `pump`) are copied in.
 */
export async function readBlocks(
  input: InputSource,
  room: () => Buffer,
  fn: (n: number) => void | Promise<void>,
  pump: (push: (chunk: Buffer) => Promise<void>) => Promise<void>,
  flush: () => Promise<void> | undefined,
  inputName: string,
): Promise<void> {
  const fd = input.fd;
  if (fd === null) {
    await pump(async (chunk) => {
      for (let at = 0; at < chunk.length; ) {
        const r = room();
        const n = Math.min(r.length, chunk.length - at);
        chunk.copy(r, 0, at, at + n);
        at += n;
        const p = fn(n);
        if (p) await p;
      }
    });
    return;
  }
  try {
    for (let n = await readInto(fd, room()); n > 0; n = await readInto(fd, room())) {
      const p = fn(n);
      if (p) await p;
      await flush();
    }
  } catch (err) {
    throw inputFailure(err, inputName);
  }
}

/** The file status of descriptor `fd`, or null when it has none (closed). */
export function fstatQuietly(fd: number): fs.Stats | null {
  try {
    return fs.fstatSync(fd);
  } catch {
    return null;
  }
}

/** A failure while reading the input, as the run reports it: a system error reading it names the input. */
export function inputFailure(err: unknown, file: string): unknown {
  if (err instanceof DataError || err instanceof OutputClosed) return err;
  const e = err as NodeJS.ErrnoException;
  // A stage's own file operation failing inside the line callback names its own file.
  if (e && typeof e.path === 'string' && e.path !== file) return systemFailure(err);
  return e && typeof e.code === 'string' && /^E[A-Z]+$/.test(e.code) ? ioError(err, file, 'read input') : err;
}

/**
 * A system error (ENOSPC, EACCES, ...) that reached the runner unwrapped is an I/O
 * failure, not a bug: one with a path names that file; a write without one is
 * stdout's (a full disk or device under a redirection).
 */
export function systemFailure(err: unknown): unknown {
  if (err instanceof DataError || err instanceof UsageError) return err;
  const e = err as NodeJS.ErrnoException;
  if (!e || typeof e.code !== 'string' || !/^E[A-Z0-9]+$/.test(e.code)) return err;
  if (typeof e.path === 'string') return ioError(err, e.path, e.syscall ?? 'access');
  return e.syscall === 'write' ? ioError(err, 'stdout', 'write output') : err;
}
