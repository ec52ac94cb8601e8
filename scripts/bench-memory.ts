// What the checked memory costs: the runner's check of current_log (size, URL count,
// SHA-256 in one read) before each run, and the commit's copy of it to current_log.last
// with the copy's identity. Usage:
//   node dist/scripts/bench-memory.js [--urls 4M] [--repeat 3] [--out DIR]
// Builds a current_log of about --urls URLs once (cached in --out): a flood hour of
// scripts/gen-reflog.ts (every line a URL of its own) through analyze-dump, group-sum,
// join-current and filter-url, as the runner's chain writes it. Then times each part,
// best of --repeat, with the file in the page cache (the usual case: the last commit
// wrote it an hour before) and after dropping it from the cache where that is allowed.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { BIN_DIR } from '../src/core/root.js';
import { countOption } from './gen-reflog.js';
import { identityOf, stageMemory } from '../src/runner/state/memory.js';
import type { RunRecord } from '../src/runner/state/run-record.js';

interface Options {
  urls: number;
  repeat: number;
  out: string;
}

/** STATE/current_log of about `urls` URLs in `dir` (made once, then reused). */
function currentLog(dir: string, urls: number): string {
  const file = path.join(dir, `current_log-${urls}`);
  if (fs.existsSync(file)) return file;
  const gen = fileURLToPath(new URL('./gen-reflog.js', import.meta.url));
  const bin = (s: string) => path.join(BIN_DIR, s);
  const chain =
    `node ${gen} --lines ${urls} --hour 1 --flood | ${bin('analyze-dump')} --log-level silent | ${bin('group-sum')} --log-level silent` +
    ` | ${bin('join-current')} --log-level silent --current /dev/null | ${bin('filter-url')} --log-level silent --now 20110728060000 --current-out ${file}.tmp > /dev/null`;
  const r = spawnSync('bash', ['-o', 'pipefail', '-c', chain], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`building current_log failed (exit ${r.status})`);
  fs.renameSync(`${file}.tmp`, file);
  return file;
}

/** The best of `repeat` timings of `f`, in seconds. */
function best(repeat: number, f: () => void, before: () => void = () => undefined): number {
  let min = Infinity;
  for (let i = 0; i < repeat; i++) {
    before();
    const t0 = process.hrtime.bigint();
    f();
    min = Math.min(min, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return min;
}

/** Drops `file` from the page cache (POSIX_FADV_DONTNEED through dd); false where that cannot be done. */
function dropCache(file: string): boolean {
  return spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']).status === 0 && spawnSync('sync').status === 0;
}

/** Times the check and the commit's part on a current_log of `o.urls` URLs and prints the figures. */
function bench(o: Options): void {
  fs.mkdirSync(o.out, { recursive: true });
  const file = currentLog(o.out, o.urls);
  const id = identityOf(file);
  const mib = id.size / 2 ** 20;
  const check = best(o.repeat, () => identityOf(file));
  const cold = dropCache(file)
    ? best(
        o.repeat,
        () => identityOf(file),
        () => dropCache(file),
      )
    : null;
  const staging = fs.mkdtempSync(path.join(o.out, 'staging-'));
  fs.mkdirSync(path.join(staging, 'work'));
  const record = { run: 'bench', status: 'ok', now: '20110728060000', keep_ms: 3_600_000 } as RunRecord;
  const commit = best(o.repeat, () => stageMemory(staging, { staging, work: path.join(staging, 'work'), currentNext: file }, record));
  fs.rmSync(staging, { recursive: true, force: true });
  const rate = (s: number) => `${s.toFixed(2)} s (${(mib / s).toFixed(0)} MiB/s)`;
  process.stdout.write(
    `current_log: ${id.urls} URLs, ${mib.toFixed(0)} MiB\n` +
      `check before a run (size, URL count, SHA-256): ${rate(check)}${cold === null ? '' : `; not in the page cache: ${rate(cold)}`}\n` +
      `commit: copy to current_log.last and its identity: ${rate(commit)}\n`,
  );
}

function main(argv: string[]): Promise<never> {
  return runAdmin(
    'bench-memory',
    (p) =>
      p
        .description("Times the runner's check of current_log and the commit's copy of it, on a current_log of --urls URLs.")
        .option('--urls <N>', 'URLs in current_log: 4M, 500k', countOption('--urls'), 4_000_000)
        .option('--repeat <R>', 'best of R timings', intOption('--repeat', 1, 100), 3)
        .option('--out <DIR>', 'where the current_log is made and kept', 'bench/out')
        .action((o: Options) => bench(o)),
    argv,
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) void main(process.argv);
