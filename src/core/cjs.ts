// CommonJS packages (commander, pino, better-sqlite3, tldts) are loaded with
// require(), not import: imported from an ES module, each of their files first
// goes through Node's CJS lexer, which looks for its named exports, a cost paid at
// every start of every stage (measured, one package each: tldts 24 ms imported
// against 10 ms required, commander 10 against 7, better-sqlite3 10 against 6,
// pino 18 against 16). Types still come from `import type`.
import { createRequire } from 'node:module';

/** require() for the project's CommonJS dependencies. */
export const requireCjs = createRequire(import.meta.url);
