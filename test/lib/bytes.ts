// Adapters between the byte-level cores of the streaming stages and test text.
import { LineRef } from '../../src/core/records.js';
import type { ByteSink } from '../../src/core/bytes.js';

/** A LineRef over the UTF-8 bytes of `text`, placed at an offset so positions are not accidentally 0-based. */
export function lineRef(text: string, tabs: number): LineRef {
  const pad = 7;
  const buf = Buffer.alloc(pad + Buffer.byteLength(text) + 3, 0x2a);
  const n = buf.write(text, pad);
  return new LineRef(tabs).set(buf, pad, pad + n);
}

/** A ByteSink that keeps everything written to it, in a deliberately small buffer that has to grow. */
export class TextSink implements ByteSink {
  buf = Buffer.alloc(16);
  pos = 0;
  private parts: Buffer[] = [];

  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.parts.push(Buffer.from(this.buf.subarray(0, this.pos)));
    this.buf = Buffer.alloc(Math.max(16, n));
    this.pos = 0;
  }

  /** Everything written so far, as text; the sink is then empty. */
  take(): string {
    const text = Buffer.concat([...this.parts, this.buf.subarray(0, this.pos)]).toString('utf8');
    this.parts = [];
    this.pos = 0;
    return text;
  }
}
