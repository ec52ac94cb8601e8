// The README's examples (then those of docs/*.md), run as printed, and the relative links of
// README.md and docs/*.md.
//
// Convention for examples: a fenced block opened with ```console holds commands and their
// output. A line starting with "$ " is a command; a command line ending in "\" goes on
// with the next line. The lines after a command, up to the next "$ " or the end of the
// block, are its stdout exactly; "…" in an expected line stands for any text within that
// line (a duration). Every command of the README runs in order, in one scratch directory
// that holds symbolic links to the checkout's fixtures/ and scripts/, under bash with
// bin/ on PATH, TZ=UTC and LC_ALL=C; it must exit 0 (an example that shows a failure
// ends in `; echo "exit $?"`). The scratch directory's path is removed from the output,
// as the README shortens the absolute paths the runner prints. The console blocks of
// docs/*.md run after the README's, in the same directory, file by file in name order, so
// they can show what the README's examples left (its job after two hours).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, scratch, testEnv } from './lib/run.js';

export interface Example {
  line: number;
  command: string;
  expected: string[];
}

/** The console examples of a Markdown text, in order, by the convention above. */
export function examplesOf(markdown: string): Example[] {
  const out: Example[] = [];
  let inConsole = false;
  let current: Example | undefined;
  let continued = false;
  markdown.split('\n').forEach((text, i) => {
    if (!inConsole) {
      inConsole = text === '```console';
      return;
    }
    if (text.startsWith('```')) {
      inConsole = false;
      current = undefined;
      return;
    }
    if (continued && current) current.command += '\n' + text;
    else if (text.startsWith('$ ')) out.push((current = { line: i + 1, command: text.slice(2), expected: [] }));
    else if (current) current.expected.push(text);
    else throw new Error(`line ${i + 1}: output before any command in a console block`);
    continued = current !== undefined && text.endsWith('\\') && current.expected.length === 0;
  });
  return out;
}

/** Whether `actual` is the line `expected` shows, "…" standing for any text. */
export function lineMatches(expected: string, actual: string): boolean {
  const re = expected
    .split('…')
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${re}$`, 's').test(actual);
}

/** The differences between what an example shows and what it printed, as messages. */
export function mismatches(expected: string[], actual: string[]): string[] {
  const problems: string[] = [];
  const n = Math.max(expected.length, actual.length);
  for (let i = 0; i < n; i++) {
    const e = expected[i];
    const a = actual[i];
    if (e === undefined || a === undefined || !lineMatches(e, a))
      problems.push(`output line ${i + 1}: expected ${JSON.stringify(e)}, got ${JSON.stringify(a)}`);
  }
  return problems;
}

/** Runs one example's command (of `file`) in `dir`; returns its stdout as lines, with `dir/` removed. */
function run(ex: Example, dir: string, file: string): string[] {
  const r = spawnSync('bash', ['-c', ex.command], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `${file}:${ex.line}: \`${ex.command}\` exited ${r.status}: ${r.stderr}`);
  const out = r.stdout
    .split(`${dir}/`)
    .join('')
    .split(`${fs.realpathSync(dir)}/`)
    .join('');
  const lines = out.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The console examples of README.md, then of docs/*.md in name order, each with its file. */
function allExamples(): { file: string; ex: Example }[] {
  const docs = fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs].flatMap((file) => examplesOf(fs.readFileSync(path.join(ROOT, file), 'utf8')).map((ex) => ({ file, ex })));
}

describe('README examples', () => {
  const examples = examplesOf(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'));

  test('the README shows examples for every command', () => {
    const commands = examples.map((e) => e.command).join('\n');
    for (const c of [
      'analyze-dump',
      'group-sum',
      'join-current',
      'filter-url',
      'partner-db',
      'domains-from-db',
      'upload-domains',
      'logsaver',
      'reflog-to-yacobot-queue',
      'reflog-to-yacobot-queue status',
      'reflog-to-yacobot-queue explain',
      'partner.db owner',
    ]) {
      assert.ok(commands.includes(c), `no example runs ${c}`);
    }
  });

  test('each example prints what the README (and docs/*.md) shows', (t) => {
    const dir = scratch('ms-readme-');
    for (const d of ['fixtures', 'scripts']) fs.symlinkSync(path.join(ROOT, d), path.join(dir, d));
    const hasJq = spawnSync('jq', ['--version']).status === 0;
    for (const { file, ex } of allExamples()) {
      // jq only reads what the runner wrote; without it, that example alone is left out.
      if (!hasJq && /\bjq\b/.test(ex.command)) {
        t.diagnostic(`${file}:${ex.line}: skipped, jq is not installed`);
        continue;
      }
      const problems = mismatches(ex.expected, run(ex, dir, file));
      assert.deepEqual(problems, [], `${file}:${ex.line}: \`${ex.command}\``);
    }
  });

  test('a changed output line is a mismatch', () => {
    const ex = examples.find((e) => e.expected.length > 0);
    assert.ok(ex, 'no example with output');
    const altered = [...ex.expected];
    altered[0] = altered[0] + 'x';
    assert.equal(
      mismatches(
        altered,
        ex.expected.map((l) => l.replace(/…/g, '1.0')),
      ).length,
      1,
    );
    assert.equal(
      mismatches(
        ex.expected,
        ex.expected.map((l) => l.replace(/…/g, '1.0')),
      ).length,
      0,
    );
    assert.equal(mismatches(ex.expected, ex.expected.slice(1)).length > 0, true);
  });

  test('the parser reads commands, continuations and output', () => {
    const md = ['```console', '$ a \\', '    b', 'out 1', '$ c', '```', '$ not a command', '```sh', '$ nor this', '```'].join('\n');
    assert.deepEqual(examplesOf(md), [
      { line: 2, command: 'a \\\n    b', expected: ['out 1'] },
      { line: 5, command: 'c', expected: [] },
    ]);
  });
});

/** GitHub's anchor of a heading's text: lower case, punctuation dropped, spaces as '-'. */
export function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown file's headings (outside fenced blocks), with GitHub's -1, -2 for repeats. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = anchorOf(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Problems with the relative links of one Markdown file: a target outside the repo, missing, or an unknown anchor. */
export function linkProblems(file: string, root: string): string[] {
  const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const problems: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/i.test(target)) continue;
    const [rel, anchor] = target.split('#', 2) as [string, string | undefined];
    const to = rel === '' ? file : path.resolve(path.dirname(file), rel);
    const inside = path.relative(root, to);
    if (inside.startsWith('..') || path.isAbsolute(inside)) problems.push(`${target}: outside the repository`);
    else if (!fs.existsSync(to)) problems.push(`${target}: no such file`);
    else if (anchor !== undefined && to.endsWith('.md') && !anchorsOf(fs.readFileSync(to, 'utf8')).has(anchor)) problems.push(`${target}: no such heading`);
  }
  return problems;
}

describe('documentation links', () => {
  const files = [
    'README.md',
    ...fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  test('every relative link of README.md and docs/*.md resolves inside the repository', () => {
    for (const f of files) assert.deepEqual(linkProblems(path.join(ROOT, f), ROOT), [], f);
  });

  test('a link out of the repository, to a missing file or heading is found', () => {
    const dir = scratch('ms-links-');
    fs.mkdirSync(path.join(dir, 'docs'));
    fs.writeFileSync(path.join(dir, 'docs', 'a.md'), '# Replay a reflog\n');
    fs.writeFileSync(
      path.join(dir, 'README.md'),
      '[ok](docs/a.md#replay-a-reflog) [web](https://example.com/x) [spec](../shared/SPEC.md) [gone](docs/b.md) [anchor](docs/a.md#nope)\n',
    );
    assert.deepEqual(linkProblems(path.join(dir, 'README.md'), dir), [
      '../shared/SPEC.md: outside the repository',
      'docs/b.md: no such file',
      'docs/a.md#nope: no such heading',
    ]);
  });

  test('anchors follow GitHub: `code`, punctuation and case', () => {
    assert.equal(anchorOf('A run failed on a `current_log` line'), 'a-run-failed-on-a-current_log-line');
    assert.equal(anchorOf('Symptom → what to do'), 'symptom--what-to-do');
    assert.equal(anchorOf('"Reflog still being written"'), 'reflog-still-being-written');
  });
});
