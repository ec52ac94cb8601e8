// Where the project lives, for the code that starts its binaries or reads its files.
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project's root directory (bin/, scripts/, package.json); this module runs as dist/src/core/root.js. */
export const PROJECT_ROOT = path.resolve(fileURLToPath(new URL('../../..', import.meta.url)));
/** The stages' binaries. */
export const BIN_DIR = path.join(PROJECT_ROOT, 'bin');
