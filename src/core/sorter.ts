// Stable sort of TSV lines by a fixed-width key prefix.

export interface SorterOptions {
  /** Length of the sort key: the line's first `keyLength` characters (ASCII). */
  keyLength: number;
  /** Budget for buffered lines, in bytes (estimated). */
  memoryBytes: number;
  /** Directory for spilled runs. */
  tmpDir: string;
}

// Each buffered line is decorated as key + sequence number + rest, so the plain
// string order is the stable order and the sort needs no comparator closure.
const SEQ_WIDTH = 12;

/**
 * Collects lines (without LF) and hands them back sorted by their key prefix,
 * ties in input order.
 */
export class LineSorter {
  private lines: string[] = [];
  private seq = 0;

  constructor(private readonly opts: SorterOptions) {}

  /** Number of lines added. */
  get count(): number {
    return this.seq;
  }

  add(line: string): void {
    const k = this.opts.keyLength;
    this.lines.push(line.slice(0, k) + this.seq.toString(16).padStart(SEQ_WIDTH, '0') + line.slice(k));
    this.seq++;
  }

  /** Calls `onLine` for every line in sorted order (awaiting it when it returns a promise). */
  async drain(onLine: (line: string) => void | Promise<void>): Promise<void> {
    const k = this.opts.keyLength;
    const lines = this.lines;
    this.lines = [];
    lines.sort();
    for (let i = 0; i < lines.length; i++) {
      const d = lines[i]!;
      const p = onLine(d.slice(0, k) + d.slice(k + SEQ_WIDTH));
      if (p) await p;
    }
  }

  /** Drops everything buffered or spilled. */
  dispose(): void {
    this.lines = [];
  }
}
