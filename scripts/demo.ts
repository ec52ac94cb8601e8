// npm start: a demo of the hourly runner on the bundled fixture reflogs
// (fixtures/reflogs/, three consecutive hours). Everything goes under ./var/demo;
// running it again is safe and says there was nothing new.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { BIN_DIR, PROJECT_ROOT as ROOT } from '../src/core/root.js';
const DEMO = path.resolve('var/demo');
const INBOX = path.join(DEMO, 'inbox');
const STATE = path.join(DEMO, 'state');
const QUEUE = path.join(DEMO, 'queue');
const DB = path.join(STATE, 'partner.db');
// Fixed zone: the runs' "now" (end of each reflog's hour) and the reflog timestamps are read in it.
const ENV = { ...process.env, TZ: 'UTC', LC_ALL: 'C' };
const rel = (p: string) => path.relative(process.cwd(), p) || '.';

function run(cmd: string, args: string[], quiet = false): number {
  const r = spawnSync(cmd, args, { env: ENV, stdio: quiet ? ['ignore', 'ignore', 'inherit'] : 'inherit' });
  if (r.error) {
    process.stderr.write(`demo: cannot run ${cmd}: ${r.error.message}\n`);
    process.exit(1);
  }
  return r.status ?? 1;
}

function main(): void {
  for (const d of [INBOX, STATE, QUEUE]) fs.mkdirSync(d, { recursive: true });

  const partnerDb = path.join(BIN_DIR, 'partner-db');
  if (!fs.existsSync(DB)) {
    process.stdout.write(`Creating ${rel(DB)} with three Yacobots (weights 1, 1, 2)\n`);
    const steps: string[][] = [
      ['init'],
      ['add', 'yacobot-alpha', '--weight', '1'],
      ['add', 'yacobot-beta', '--weight', '1'],
      ['add', 'yacobot-gamma', '--weight', '2'],
    ];
    for (const s of steps) if (run(partnerDb, ['--db', DB, ...s], true) !== 0) process.exit(1);
  }

  const fixtures = path.join(ROOT, 'fixtures', 'reflogs');
  const bundled = fs
    .readdirSync(fixtures)
    .filter((f) => f.endsWith('.reflog'))
    .sort();
  const copied: string[] = [];
  for (const f of bundled) {
    if (fs.existsSync(path.join(INBOX, f)) || fs.existsSync(path.join(STATE, 'done', f))) continue;
    // Copy under a temporary name and rename: the runner only picks up whole *.reflog files.
    fs.copyFileSync(path.join(fixtures, f), path.join(INBOX, `.${f}.part`));
    fs.renameSync(path.join(INBOX, `.${f}.part`), path.join(INBOX, f));
    copied.push(f);
  }
  process.stdout.write(
    copied.length > 0
      ? `Copied ${copied.join(', ')} into ${rel(INBOX)}\n`
      : `Nothing new: the ${bundled.length} bundled reflogs are already in ${rel(path.join(STATE, 'done'))} (rm -rf ${rel(DEMO)} to start over)\n`,
  );

  const args = ['--inbox', INBOX, '--state', STATE, '--db', DB, '--queue-dir', QUEUE, '--log-level', 'warn'];
  process.stdout.write(`\n$ scripts/reflog-to-yacobot-queue ${args.map((a) => (a.startsWith('/') ? rel(a) : a)).join(' ')}\n`);
  const status = run(path.join(ROOT, 'scripts', 'reflog-to-yacobot-queue'), args);
  if (status !== 0) {
    process.stderr.write(`demo: the runner failed (exit ${status}); see above\n`);
    process.exit(status);
  }

  process.stdout.write(`\nQueue files (${rel(QUEUE)}/<yacobot_id>/<run>.tsv, URL records: id timestamp updatetag hits domain url):\n`);
  for (const id of fs
    .readdirSync(QUEUE)
    .filter((d) => /^\d+$/.test(d))
    .sort((a, b) => +a - +b)) {
    for (const f of fs
      .readdirSync(path.join(QUEUE, id))
      .filter((x) => x.endsWith('.tsv'))
      .sort()) {
      const p = path.join(QUEUE, id, f);
      const lines = fs.readFileSync(p, 'utf8').split('\n').length - 1;
      process.stdout.write(`  ${rel(p)}  ${lines} URLs\n`);
    }
  }
  process.stdout.write(
    `\nState in ${rel(STATE)}: current_log, done/, rejects/, runs.jsonl (one JSON line per run)\n` +
      `Try:  head -3 ${rel(path.join(QUEUE, '1'))}/*.tsv\n` +
      `      bin/partner-db --db ${rel(DB)} stats\n` +
      `      tail -1 ${rel(path.join(STATE, 'runs.jsonl'))}\n`,
  );
}

main();
