// One table-driven test over fixtures/<stage>/<case>/:
//   args     one argument per line (optional)
//   stdin    bytes fed to stdin (optional)
//   setup    bash script run first in the scratch dir, bin/ on PATH (optional; its first
//            lines that make p.db run once per list and are copied, see runSetup)
//   files/   copied into the scratch dir before the run (optional)
//   stdout   expected stdout, byte for byte (when absent, stdout must be empty)
//   exit     expected exit status (default 0)
//   stderr   each non-empty line must appear in stderr (optional)
//   expect/  files that must exist afterwards in the scratch dir with this content
//   absent   paths (one per line) that must not exist afterwards, e.g. an unpublished output
//   ada-N/   stdout, exit, stderr or expect/ of the runtime's URL parser where its answers
//            differ from the case's (ada N: its major version; 2 is Node 20-22, 4 Node 24-26)
// The stage runs in a scratch copy with TZ=UTC and LC_ALL=C.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, hasStackTrace, madeDb, runBin, scratch, testEnv } from './lib/run.js';
import { ADA_MAJOR, PARSER } from './lib/parser.js';

const FIXTURES = path.join(ROOT, 'fixtures');
const stages = fs
  .readdirSync(FIXTURES)
  .filter((s) => fs.existsSync(path.join(ROOT, 'bin', s)))
  .sort();

const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f) : null);

for (const stage of stages) {
  const dir = path.join(FIXTURES, stage);
  for (const name of fs.readdirSync(dir).sort()) {
    const c = path.join(dir, name);
    if (!fs.statSync(c).isDirectory()) continue;
    const pinned = fs.readdirSync(c).some((f) => /^ada-\d+$/.test(f));
    // An expectation of the running parser where the case has one, else the case's own.
    const want = (f: string) => (fs.existsSync(path.join(c, `ada-${ADA_MAJOR}`, f)) ? path.join(c, `ada-${ADA_MAJOR}`, f) : path.join(c, f));
    test(`${stage}/${name}${pinned ? ` (${PARSER})` : ''}`, () => {
      const work = scratch(`ms-fx-${stage}-`);
      if (fs.existsSync(path.join(c, 'files'))) fs.cpSync(path.join(c, 'files'), work, { recursive: true });
      if (fs.existsSync(path.join(c, 'setup'))) runSetup(fs.readFileSync(path.join(c, 'setup'), 'utf8'), work);
      const argsText = read(path.join(c, 'args'))?.toString('utf8') ?? '';
      const args = argsText.split('\n').filter((a) => a.length > 0);
      const stdin = read(path.join(c, 'stdin')) ?? Buffer.alloc(0);
      const r = runBin(stage, args, stdin, work);
      const wantExit = Number((read(want('exit'))?.toString('utf8') ?? '0').trim());
      assert.equal(r.status, wantExit, `exit status; stderr:\n${r.stderr}`);
      assert.ok(!hasStackTrace(r.stderr), `stack trace in stderr:\n${r.stderr}`);
      const wantOut = read(want('stdout')) ?? Buffer.alloc(0);
      assert.equal(r.stdout, wantOut.toString('utf8'), 'stdout');
      const wantErr = read(want('stderr'))?.toString('utf8');
      if (wantErr) {
        for (const frag of wantErr.split('\n').filter((l) => l.length > 0)) {
          assert.ok(r.stderr.includes(frag), `stderr lacks ${JSON.stringify(frag)}:\n${r.stderr}`);
        }
      }
      const expectDir = want('expect');
      if (fs.existsSync(expectDir)) {
        for (const rel of walk(expectDir)) {
          const got = read(path.join(work, rel));
          assert.ok(got, `expected file ${rel} was not written`);
          const want = fs.readFileSync(path.join(expectDir, rel));
          if (!got.equals(want)) assert.equal(got.toString('latin1'), want.toString('latin1'), `content of ${rel}`);
        }
      }
      const absent = read(path.join(c, 'absent'))?.toString('utf8') ?? '';
      for (const rel of absent.split('\n').filter((l) => l.length > 0)) {
        assert.ok(!fs.existsSync(path.join(work, rel)), `${rel} must not exist after the run`);
      }
      const leftovers = fs.readdirSync(work).filter((f) => /\.tmp-\d+-[0-9a-f]{8}$/.test(f));
      assert.deepEqual(leftovers, [], 'temporary files left behind');
    });
  }
}

/** A set-up line that makes p.db from nothing but its arguments: `partner-db --db p.db init`, add, assign, disable or enable. */
const DB_LINE = /^partner-db --db p\.db ((?:init|add|assign|disable|enable)(?: (?:[A-Za-z0-9._-]+|'[^']*'))*)$/;

/**
 * Runs the set-up script `text` in `work`: its first lines that only make p.db (DB_LINE)
 * through madeDb, which runs each list of them once per test process and copies the
 * database, each asserted to succeed; the lines after them through bash, as before.
 */
function runSetup(text: string, work: string): void {
  const lines = text.split('\n');
  const commands: string[][] = [];
  let k = 0;
  for (; k < lines.length; k++) {
    const m = DB_LINE.exec(lines[k]!);
    if (m === null) break;
    commands.push(m[1]!.match(/'[^']*'|[^ ]+/g)!.map((a) => (a.startsWith("'") ? a.slice(1, -1) : a)));
  }
  if (k > 0) {
    assert.deepEqual(commands[0], ['init'], 'a set-up that makes p.db starts with init');
    madeDb(work, 'p.db', commands.slice(1));
  }
  const rest = lines.slice(k).join('\n');
  if (rest.trim() === '') return;
  const s = spawnSync('bash', ['-c', rest], { cwd: work, env: testEnv(), encoding: 'utf8' });
  assert.equal(s.status, 0, `setup failed: ${s.stderr}`);
}

function walk(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = path.join(rel, e.name);
    if (e.isDirectory()) out.push(...walk(dir, r));
    else out.push(r);
  }
  return out;
}
