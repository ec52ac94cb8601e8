// Runs the test suites: `npm test` runs the fast one (every stage, rule, format and
// README example on SQLite, one PostgreSQL round where a server is there), `npm run
// test:all` every test file on every backend (adding fault and kill sweeps, fuzzing,
// long races and the PostgreSQL variants).
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const usage = `usage: node dist/scripts/test.js [--all] [node --test option...]
  without --all: the fast suite, every dist/test/*.test.js but the slow ones listed
                 below, PostgreSQL in routing-chain.test.js only (MASTER_SERVER_SUITE=fast)
  --all: every test file on every backend`;

/** Test files (without .test.js) left out of the fast suite: they sweep, fuzz or race for minutes. */
export const SLOW: readonly string[] = [
  'caps',
  'checks',
  'dedup-chain',
  'domain-spelling',
  'durability',
  'explain',
  'faults',
  'fuzz',
  'kill-sweep',
  'long-domain',
  'partner-db-full',
  'partner-load',
  'pg-flood',
  'politeness',
  'progress',
  'properties',
  'rekey-carry',
  'runner-carry',
  'runner-carry-memory',
  'runner-commit',
  'runner-config',
  'runner-done',
  'runner-inbox',
  'runner-memory',
  'runner-recovery',
  'runner-replay',
  'runner-signals',
  'runtime',
  'secrets',
  'set-up',
  'status-health',
  'two-masters-fence',
  'unattended',
];

/** The compiled test files of a suite, in name order; throws when a SLOW name has no file. */
export function suiteFiles(dir: string, all: boolean): string[] {
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.test.js'))
    .sort();
  const missing = SLOW.filter((s) => !files.includes(`${s}.test.js`));
  if (missing.length > 0) throw new Error(`test: no ${missing.map((s) => `${s}.test.js`).join(', ')} in ${dir}`);
  return files.filter((f) => all || !SLOW.includes(f.slice(0, -'.test.js'.length))).map((f) => path.join(dir, f));
}

/** Runs node's test runner on the chosen suite, two files at a time; exits with its status. */
function main(argv: string[]): never {
  if (argv.includes('--help')) {
    process.stdout.write(`${usage}\n  slow: ${SLOW.join(' ')}\n`);
    process.exit(0);
  }
  const all = argv.includes('--all');
  const rest = argv.filter((a) => a !== '--all');
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test');
  const env = { ...process.env, MASTER_SERVER_SUITE: all ? 'all' : 'fast' };
  const args = ['--test', '--test-concurrency=2', ...rest, ...suiteFiles(dir, all)];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
