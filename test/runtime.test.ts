// The runtime, checked first: on a Node.js that package.json's "engines" refuses, every
// executable (bin/*, the runner and its subcommands, the scripts behind the npm scripts,
// analyze-dump's worker started alone) exits 2 with one line naming the version found,
// the one needed and where to read how to get it; nothing on stdout, no signal.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { enginesRange, lowestAccepted, programName, runtimeRefusal, versionOf } from '../src/cli/runtime.js';
import { SUBCOMMANDS } from '../src/runner/main.js';
import { BIN, ROOT, scratch } from './lib/run.js';
import { oldNode, pathWith } from './lib/old-node.js';

const RUNNER = path.join(ROOT, 'scripts', 'reflog-to-yacobot-queue');
const RUNTIME_IMPORT = /^import ["'](\.\.\/)+(dist\/)?(src\/)?cli\/runtime\.js["'];/;

/** The scripts/*.ts that are programs or load more than node: modules: the npm scripts' entries, and those with a non-node: import. */
function checkedScripts(): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const npmEntries = Object.values(pkg.scripts).flatMap((s) => [...s.matchAll(/\bnode (dist\/scripts\/[\w-]+)\.js\b/g)].map((m) => path.basename(m[1]!)));
  assert.ok(npmEntries.includes('demo') && npmEntries.includes('test'), `npm scripts' entries: ${npmEntries}`);
  const importing = fs
    .readdirSync(path.join(ROOT, 'scripts'))
    .filter((f) => f.endsWith('.ts') && /^import .* from ['"](?!node:)/m.test(fs.readFileSync(path.join(ROOT, 'scripts', f), 'utf8')))
    .map((f) => f.slice(0, -3));
  return [...new Set([...npmEntries, ...importing])].sort();
}

/** The first import statement of a source file. */
function firstImport(file: string): string {
  return (
    fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('import ')) ?? '(none)'
  );
}

describe('the supported Node.js', () => {
  test('is read from package.json\'s "engines", of the form >=MAJOR[.MINOR[.PATCH]]', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    assert.equal(enginesRange(), pkg.engines.node);
    assert.deepEqual(lowestAccepted(enginesRange()), versionOf(pkg.engines.node.replace('>=', '')));
    assert.deepEqual(lowestAccepted('>=22'), [22, 0, 0]);
    assert.deepEqual(lowestAccepted(' >= 22.12.1 '), [22, 12, 1]);
    for (const bad of ['^22', '22', '>=22 <27', '>22', '']) assert.throws(() => lowestAccepted(bad), /is not of the form/, bad);
  });

  test('an older one is refused in one line: what was found, what is needed, where to read how to get it', () => {
    assert.equal(
      runtimeRefusal('group-sum', '>=22', 'v20.20.2', '/usr/bin/node'),
      'group-sum: Node.js v20.20.2 (/usr/bin/node) is not supported: master-server needs Node.js 22 or later; put one first on PATH (see README "Set up")',
    );
    assert.match(runtimeRefusal('x', '>=22', 'v21.99.99', 'n')!, /^x: Node\.js v21\.99\.99 \(n\) is not supported: master-server needs Node\.js 22 or later;/);
    assert.match(runtimeRefusal('x', '>=22.12.1', 'v22.12.0', 'n')!, /needs Node\.js 22\.12\.1 or later/);
    assert.match(runtimeRefusal('x', '>=22', 'v4.9.1', 'n')!, /Node\.js v4\.9\.1/);
    for (const ok of ['v22.0.0', 'v22.12.1', 'v24.1.0', 'v26.0.0', 'v100.0.0']) assert.equal(runtimeRefusal('x', '>=22', ok, 'n'), null, ok);
    assert.equal(runtimeRefusal('x', '>=22', process.version, process.execPath), null, 'the Node.js running the tests');
  });

  test('messages name the program by its file name', () => {
    assert.equal(programName('/opt/master-server/bin/group-sum'), 'group-sum');
    assert.equal(programName('/opt/master-server/dist/scripts/demo.js'), 'demo');
    assert.equal(programName(undefined), 'master-server');
  });

  test('every executable imports the check before anything else', () => {
    const files = [...fs.readdirSync(BIN).map((f) => path.join(BIN, f)), RUNNER, ...checkedScripts().map((s) => path.join(ROOT, 'scripts', `${s}.ts`))];
    files.push(path.join(ROOT, 'src', 'stages', 'analyze-dump-worker.ts'));
    for (const f of files) assert.match(firstImport(f), RUNTIME_IMPORT, path.relative(ROOT, f));
  });

  test("analyze-dump's worker started alone says it is not a program (exit 2)", () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'src', 'stages', 'analyze-dump-worker.js')], { encoding: 'utf8' });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr, 'analyze-dump-worker: a worker thread of analyze-dump, which starts it: run bin/analyze-dump\n');
  });
});

describe('on an unsupported Node.js', () => {
  /** Runs `file args` (through its shebang, or with `node` when it is a dist script) with the old Node.js first on PATH; asserts the refusal. */
  function refused(node: { bin: string; version: string }, name: string, file: string, args: string[], cwd: string): void {
    const viaNode = file.endsWith('.js');
    const r = spawnSync(viaNode ? node.bin : file, viaNode ? [file, ...args] : args, {
      cwd,
      input: 'hdr\n1\t5\t20110727200841\t2310\thttp://example.com/\t1\n',
      env: { ...process.env, PATH: pathWith(node.bin) },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const what = `${name} ${args.join(' ')}`;
    assert.equal(r.signal, null, `${what}: killed by ${r.signal}`);
    assert.equal(r.status, 2, `${what}: exit ${r.status}: ${r.stderr}`);
    assert.equal(r.stdout, '', `${what}: stdout`);
    const line = `${name}: Node.js ${node.version} (${node.bin}) is not supported: master-server needs Node.js ${lowestAccepted(enginesRange())[0]} or later; put one first on PATH (see README "Set up")\n`;
    assert.equal(r.stderr.replace(fs.realpathSync(node.bin), node.bin), line, what);
  }

  test('every bin/* exits 2 with its one line; partner-db init creates nothing', (t) => {
    const node = oldNode(t);
    if (node === null) return;
    const dir = scratch('ms-runtime-');
    for (const f of fs.readdirSync(BIN)) refused(node, f, path.join(BIN, f), [], dir);
    refused(node, 'partner-db', path.join(BIN, 'partner-db'), ['--db', 'p.db', 'init'], dir);
    refused(node, 'analyze-dump', path.join(BIN, 'analyze-dump'), ['--rejects', 'r.tsv', '--memory', '8M'], dir);
    refused(node, 'upload-domains', path.join(BIN, 'upload-domains'), ['--db', 'p.db'], dir);
    assert.deepEqual(fs.readdirSync(dir), [], 'files made');
  });

  test('the runner and each of its subcommands exit 2 with its one line', (t) => {
    const node = oldNode(t);
    if (node === null) return;
    const dir = scratch('ms-runtime-');
    fs.writeFileSync(path.join(dir, 'runner.conf'), 'inbox = inbox\nstate = state\nqueue-dir = queue\n');
    const name = 'reflog-to-yacobot-queue';
    for (const args of [
      [],
      ['--config', 'runner.conf'],
      ['--help'],
      ['--version'],
      ...[...SUBCOMMANDS].map((s) => [s, '--config', 'runner.conf', 'http://example.com/']),
    ]) {
      refused(node, name, RUNNER, args, dir);
    }
    assert.deepEqual(fs.readdirSync(dir), ['runner.conf'], 'files made');
  });

  test("the npm scripts' dist entries and the other scripts exit 2 with their one line", (t) => {
    const node = oldNode(t);
    if (node === null) return;
    const dir = scratch('ms-runtime-');
    for (const s of checkedScripts()) refused(node, s, path.join(ROOT, 'dist', 'scripts', `${s}.js`), [], dir);
    refused(node, 'analyze-dump-worker', path.join(ROOT, 'dist', 'src', 'stages', 'analyze-dump-worker.js'), [], dir);
    assert.deepEqual(fs.readdirSync(dir), [], 'files made');
  });
});
