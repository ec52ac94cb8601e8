// commander, the command-line parser of the stages and tools: loaded with require()
// when first asked for, as core/cjs.ts loads its CommonJS packages (and why).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** commander (the stages' and tools' argument parsing). */
export const loadCommander = () => require('commander') as typeof import('commander');
