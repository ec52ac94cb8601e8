// A re-sent hour: a reflog that repeats one a committed run read is set aside.
import * as path from 'node:path';
import { visibleName } from '../core/errors.js';
import type { RunnerOptions } from './options.js';
import { REFLOG_EXT } from './plan.js';
import { resentOf, setAside } from './resent.js';
import type { Say } from './say.js';

/**
 * When INBOX/NAME.reflog repeats byte for byte a reflog a committed run of NAME archived:
 * sets it aside in done/ with a warning, and returns true (nothing else is done with it).
 */
export function setAsideResent(o: Pick<RunnerOptions, 'inbox' | 'state'>, say: Say, name: string): boolean {
  const file = path.join(o.inbox, name + REFLOG_EXT);
  const done = path.join(o.state, 'done');
  const same = resentOf(file, done, name);
  if (same === null) return false;
  const to = setAside(file, same.st, done, name);
  if (to === file) return false; // another file came under its name meanwhile: it runs
  say.warn(
    `${visibleName(file)}: the same bytes as ${visibleName(same.archived)}, which a committed run of ${visibleName(name)} read: ` +
      `a re-sent hour, set aside as ${visibleName(to)}; nothing was run (to replay the hour, move the reflog from done/ into the inbox)`,
    { fields: { run: name, reflog: file, archived: same.archived, set_aside: to }, msg: 're-sent hour set aside' },
  );
  return true;
}
