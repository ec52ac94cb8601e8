// CommonJS packages (pino, better-sqlite3, tldts; commander in cli/commander.ts) are
// loaded with require(), not import: imported from an ES module, each of their files first
// goes through Node's CJS lexer, which looks for its named exports, a cost paid at
// every start of every stage (measured, one package each: tldts 24 ms imported
// against 10 ms required, commander 10 against 7, better-sqlite3 10 against 6,
// pino 18 against 16). Each is loaded when its function is first called, typed
// as its ESM entry (the same exports, checked at runtime for the pinned versions).
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

const require = createRequire(import.meta.url);

/** pino (the JSON log lines on stderr). */
export const loadPino = () => (require('pino') as typeof import('pino')).pino;
/** better-sqlite3's Database class (the partner database). */
export const loadBetterSqlite3 = () => require('better-sqlite3') as typeof BetterSqlite3;
/** tldts (registrable domains from the Public Suffix List). */
export const loadTldts = () => require('tldts') as typeof import('tldts');
