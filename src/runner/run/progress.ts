// The progress of a run: on a terminal, a line of how much of the reflog the chain has read.

/**
 * Progress of the reflog read, for the terminal display: its size, and how far the
 * chain has read it (the offset of the open file the chain reads, or -1 unknown).
 */
export interface Progress {
  size: number;
  read: () => number;
}

/** On a terminal: a one-line progress display (how much of the reflog the chain has read); returns its stop function. */
export function showProgress(name: string, p: Progress): () => void {
  if (!process.stderr.isTTY) return () => undefined;
  const t0 = Date.now();
  let readSecs = 0;
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
  const timer = setInterval(() => {
    const s = (Date.now() - t0) / 1000;
    const at = p.read();
    let text: string;
    if (at < 0 || p.size === 0) text = `${name}: running... ${s.toFixed(0)} s`;
    else if (at < p.size) {
      readSecs = s;
      text = `${name}: ${mib(at)} of ${mib(p.size)} read (${Math.floor((100 * at) / p.size)}%), ${mib(at / Math.max(s, 0.001))}/s, ${s.toFixed(0)} s`;
    } else text = `${name}: read ${mib(p.size)} in ${readSecs.toFixed(0)} s; sorting, filtering, routing... ${s.toFixed(0)} s`;
    process.stderr.write(`\r\x1b[K${text}`);
  }, 500);
  timer.unref();
  return () => {
    clearInterval(timer);
    process.stderr.write('\r\x1b[K');
  };
}
