// Lists the longest functions of the project's TypeScript, by lines, as the compiler
// parses them (functions, methods, constructors, accessors, arrow functions). Usage:
//   node dist/scripts/longest-functions.js [--top N] [--min LINES] [--root DIR] [DIR...]
// DIRs (default: src) are relative to the project root (or --root); one line per function:
// "lines  file:line  name", longest first.
import '../src/cli/runtime.js'; // first: exits 2 on an unsupported Node.js before the imports below load
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { API } from 'typescript/unstable/sync';
import { SyntaxKind, type Node, type SourceFile } from 'typescript/unstable/ast';
import { intOption, runAdmin } from '../src/cli/admin.js';
import { UsageError } from '../src/core/errors.js';
import { PROJECT_ROOT } from '../src/core/root.js';

export interface FunctionSize {
  file: string;
  /** 1-based line of the function's first token. */
  line: number;
  lines: number;
  name: string;
}

const FUNCTION_KINDS = new Set<SyntaxKind>([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/** Kinds whose name qualifies the functions inside them (a class, a variable, an object's property). */
const NAMING_KINDS = new Set<SyntaxKind>([
  SyntaxKind.ClassDeclaration,
  SyntaxKind.VariableDeclaration,
  SyntaxKind.PropertyAssignment,
  SyntaxKind.PropertyDeclaration,
  ...FUNCTION_KINDS,
]);

/** The sizes of every function in the files of the project at `root` (its tsconfig.json) under `dirs`. */
export function functionSizes(root: string, dirs: readonly string[]): FunctionSize[] {
  const roots = dirs.map((d) => path.resolve(root, d) + path.sep);
  const api = new API({ cwd: root });
  try {
    const project = api.updateSnapshot({ openProjects: [path.join(root, 'tsconfig.json')] }).getProjects()[0];
    if (!project) throw new UsageError(`${path.join(root, 'tsconfig.json')} opened no project`);
    const sizes: FunctionSize[] = [];
    for (const file of project.program.getSourceFileNames()) {
      if (!roots.some((r) => file.startsWith(r))) continue;
      const sf = project.program.getSourceFile(file);
      if (sf) sizes.push(...sizesIn(sf, path.relative(root, file)));
    }
    return sizes.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
  } finally {
    api.close();
  }
}

/** The sizes of the functions of one parsed file (nested ones too). */
function sizesIn(sf: SourceFile, file: string): FunctionSize[] {
  const sizes: FunctionSize[] = [];
  const visit = (node: Node): void => {
    if (FUNCTION_KINDS.has(node.kind)) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      sizes.push({ file, line: first + 1, lines: last - first + 1, name: qualifiedName(node, sf) });
    }
    node.forEachChild(visit);
  };
  sf.forEachChild(visit);
  return sizes;
}

/** `Outer.inner` names of a function: the names of the classes, variables, properties and functions it is in. */
function qualifiedName(node: Node, sf: SourceFile): string {
  const parts: string[] = [];
  for (let n: Node | undefined = node; n && n.kind !== SyntaxKind.SourceFile; n = n.parent) {
    if (!NAMING_KINDS.has(n.kind)) continue;
    const name = ownName(n, sf);
    if (name) parts.unshift(name);
    else if (n === node) parts.unshift(n.kind === SyntaxKind.Constructor ? 'constructor' : anonymousName(n, sf));
  }
  return parts.join('.');
}

/** A function without a name: `callee(fn)` when it is an argument of a call, else `(anonymous)`. */
function anonymousName(n: Node, sf: SourceFile): string {
  const call = n.parent;
  if (call?.kind !== SyntaxKind.CallExpression) return '(anonymous)';
  const callee = (call as Node & { expression: Node }).expression.getText(sf);
  return `${callee.slice(callee.lastIndexOf('.') + 1)}(fn)`;
}

/** The text of a node's `name`, if it has one. */
function ownName(n: Node, sf: SourceFile): string | undefined {
  const name = (n as Node & { name?: Node }).name;
  return name ? name.getText(sf) : undefined;
}

function main(argv: string[]): Promise<never> {
  return runAdmin(
    'longest-functions',
    (p) =>
      p
        .description('Lists the longest functions (by lines, longest first) of the TypeScript files under DIRs (default: src).')
        .argument('[dirs...]', 'directories, relative to the project root', ['src'])
        .option('--top <N>', 'how many to list', intOption('--top', 1), 20)
        .option('--min <LINES>', 'list only functions of at least this many lines', intOption('--min', 1), 1)
        .option('--root <DIR>', 'the project to measure (a checkout of another commit)', PROJECT_ROOT)
        .action((dirs: string[], o: { top: number; min: number; root: string }) => {
          const rows = functionSizes(path.resolve(o.root), dirs)
            .filter((s) => s.lines >= o.min)
            .slice(0, o.top);
          for (const s of rows) process.stdout.write(`${String(s.lines).padStart(5)}  ${s.file}:${s.line}  ${s.name}\n`);
        }),
    argv,
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) void main(process.argv);
