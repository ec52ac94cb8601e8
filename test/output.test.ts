// Output (every stage's stdout): back-pressure that never waits for a 'drain' which
// already came, such as one that came while the stage awaited its database.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { Output } from '../src/cli/output.js';
import { BIN, scratch, partnerDb, testEnv } from './lib/run.js';
import { FAST_SUITE, PgCluster, pgSkipReason, pgTest } from './lib/pg.js';
import { DelayProxy } from './lib/delay-proxy.js';

/** A stream that takes a write on the next turn of the event loop and asks for a pause above 1 KiB. */
function slowStream(): Writable & { bytes: number } {
  const w = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, cb) {
      w.bytes += chunk.length;
      setImmediate(cb);
    },
  }) as Writable & { bytes: number };
  w.bytes = 0;
  return w;
}

/** `p`, or a rejection naming `what` if it has not settled within `ms`. */
async function within<T>(p: Promise<T> | undefined, ms: number, what: string): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('a drain that came while the stage awaited something else does not make flush or end wait for another', async () => {
  const stream = slowStream();
  const out = new Output(stream, 4096);
  out.write('x'.repeat(10_000) + '\n');
  await out.flush(); // the stream asked for a pause: this waited for its drain
  out.write('y'.repeat(10_000) + '\n');
  out.write('z'.repeat(9) + '\n'); // the y's handed: the stream asks for a pause again...
  await pause(50); // ...and drains meanwhile (a database's answer being awaited)
  await within(out.flushIfFull(), 2000, 'flushIfFull');
  await within(out.flush(), 2000, 'flush');
  await within(out.end(), 2000, 'end');
  assert.equal(stream.bytes, 20_012);
});

test('flushIfFull still waits while the stream asks for a pause, and ends once it drains', async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const w = new Writable({
    highWaterMark: 1024,
    write(_chunk, _enc, cb) {
      void held.then(() => cb());
    },
  });
  const out = new Output(w, 4096);
  out.write('x'.repeat(10_000) + '\n');
  out.write('y'.repeat(10_000) + '\n'); // hands the x's to the stream, which asks for a pause
  let waited = false;
  const p = out.flushIfFull()!;
  assert.ok(p, 'the stream is full: flushIfFull returns a promise');
  void p.then(() => (waited = true));
  await pause(50);
  assert.equal(waited, false, 'flushIfFull returned before the stream drained');
  release();
  await within(p, 2000, 'flushIfFull after the drain');
  await within(out.end(), 2000, 'end');
});

let cluster: PgCluster | null = null;
before(async () => {
  if (pgSkipReason() === null && !FAST_SUITE) cluster = await PgCluster.start();
});
after(() => cluster?.remove());

/** A filtered_log of `domains` domains, `per` records each, in id order. */
function filtered(domains: number, per: number): string {
  let out = '';
  for (let i = 0; i < domains * per; i++) {
    const d = `site${i % domains}.example`;
    out += `${i.toString(16).padStart(16, '0')}\t20110801085500\t\t1\t${d}\thttp://www.${d}/section/${i}/page.html\n`;
  }
  return out;
}

pgTest('upload-domains on PostgreSQL ends when its stdout drained while its last query was answered slowly', { timeout: 300_000 }, async () => {
  const work = scratch('ms-out-');
  const uri = cluster!.newDatabase();
  partnerDb(work, uri, 'init');
  for (const [name, w] of [
    ['y1', '1'],
    ['y2', '1'],
    ['y3', '2'],
  ] as const)
    partnerDb(work, uri, 'add', name, '--weight', w);
  const proxy = await DelayProxy.start(cluster!.port);
  try {
    const input = filtered(500, 40);
    const child = spawn(path.join(BIN, 'upload-domains'), ['--db', proxy.through(uri), '--now', '20110801090000'], { cwd: work, env: testEnv() });
    child.stdin.end(input);
    let stderr = '';
    let bytes = 0;
    // Once the new domains are committed the records go out to a reader slower than
    // upload-domains, and each answer of the database takes 300 ms: the pipe empties
    // while the last query (the active Yacobots) is on its way.
    child.stdout.pause();
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
      if (proxy.delayMs === 0 && stderr.includes('new domains committed')) {
        proxy.delayMs = 300;
        child.stdout.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          child.stdout.pause();
          setTimeout(() => child.stdout.resume(), 5);
        });
        child.stdout.resume();
      }
    });
    const hung = setTimeout(() => child.kill('SIGKILL'), 150_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(hung);
    assert.equal(signal, null, `upload-domains did not end within 150 s (killed); its log ends:\n${stderr.trimEnd().split('\n').slice(-3).join('\n')}`);
    assert.equal(code, 0, stderr);
    assert.equal(bytes, Buffer.byteLength(input) + 20_000 * 2, 'every record, with its Yacobot id in front');
  } finally {
    proxy.close();
  }
});
