// The project's native addons (src/native, built by `npm install` with node-gyp from
// binding.gyp). Each is optional: without it the code that uses it works as before,
// only slower.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { PROJECT_ROOT } from './root.js';

/** Where addon `name` is once built. */
export function addonPath(name: string): string {
  return path.join(PROJECT_ROOT, 'build', 'Release', `${name}.node`);
}

/** Addon `name`'s exports, or null when it was not built (or cannot load here). */
export function loadAddon<T>(name: string): T | null {
  const file = addonPath(name);
  try {
    // dlopen of anything but a file (a FIFO there) would block every stage in open(2).
    if (!fs.statSync(file).isFile()) return null;
    return createRequire(import.meta.url)(file) as T;
  } catch {
    return null;
  }
}
