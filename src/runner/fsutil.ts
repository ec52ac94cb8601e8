// Where the commit's reflog step parks a reflog on its way to done/.
import * as path from 'node:path';

/** Where the reflog step parks `file` before copying or relinking it: `.<name>.moving` beside it. */
export function parkedPath(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.moving`);
}
