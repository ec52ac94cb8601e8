// A filtered_log for measuring limit-domains: URL records sorted by id, every second one
// on one domain (big.example), the others spread over 100,000 domains, hits 1-50.
// Usage: node dist/scripts/gen-filtered.js --lines N --out FILE
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runAdmin } from '../src/cli/admin.js';
import { countOption } from './gen-reflog.js';
import { ioError } from '../src/core/errors.js';

/** Writes `lines` records to descriptor `fd` (the same bytes for the same count). */
export function generateFiltered(fd: number, lines: number): void {
  let buf = '';
  let x = 1;
  const rnd = () => (x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 4294967296;
  for (let i = 0; i < lines; i++) {
    // Ids grow with i (a multiple of 1844674407, 16 hex digits): sorted and unique.
    const id = (i * 1844674407).toString(16).padStart(16, '0');
    const d = i % 2 === 0 ? 'big.example' : `site${Math.floor(rnd() * 100000)}.com`;
    buf += `${id}\t20110728050000\t\t${1 + Math.floor(rnd() * 50)}\t${d}\thttp://${d}/page/${i}?q=${Math.floor(rnd() * 1e6)}\n`;
    if (buf.length > 1 << 20) {
      fs.writeSync(fd, buf);
      buf = '';
    }
  }
  fs.writeSync(fd, buf);
}

function main(argv: string[]): Promise<never> {
  return runAdmin(
    'gen-filtered',
    (p) =>
      p
        .description("Writes a filtered_log with one domain holding half of it (limit-domains' memory measure) to --out or stdout.")
        .option('--lines <N>', 'records to write: 10000000, 10M, 500k', countOption('--lines'), 10_000_000)
        .option('--out <FILE>', 'write here instead of stdout')
        .action((o: { lines: number; out?: string }) => {
          try {
            const fd = o.out ? fs.openSync(o.out, 'w') : 1;
            generateFiltered(fd, o.lines);
            if (o.out) fs.closeSync(fd);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0);
            throw ioError(err, o.out ?? 'stdout', 'write');
          }
        }),
    argv,
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) void main(process.argv);
