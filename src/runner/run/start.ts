// The start of a run's attempt: the name of its queue files.
import { formatTimestamp } from '../../core/time.js';
import { queueNameTaken } from '../commit.js';

/**
 * The name of the queue files of a new run of `name` started at `started`: the run's,
 * unless files of that name are still in a Yacobot's directory (a replay or a re-sent
 * hour whose earlier run's files were not taken yet): then NAME.replay-YYYYMMDDhhmmss,
 * with -2, -3... if that is there too. Publishing over them would replace URLs that
 * current_log records as sent.
 */
export function queueNameFor(queueDir: string, name: string, started: Date): string {
  if (!queueNameTaken(queueDir, name)) return name;
  const base = `${name}.replay-${formatTimestamp(started)}`;
  for (let k = 1; ; k++) {
    const candidate = k === 1 ? base : `${base}-${k}`;
    if (!queueNameTaken(queueDir, candidate)) return candidate;
  }
}
