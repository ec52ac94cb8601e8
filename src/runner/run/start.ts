// The start of a run's attempt: its run.json (its now, its queue files' name), a fresh
// work area, and the warnings said before its chain.
import * as fs from 'node:fs';
import { mkdirDurable } from '../../core/durable.js';
import { ioError, visibleName } from '../../core/errors.js';
import { formatTimestamp } from '../../core/time.js';
import { type RunJson, readRunJson, writeRunJson } from '../state/attempt.js';
import type { RunContext } from './context.js';
import { replayWarning, resolveNow } from './now.js';
import { queueNameTaken } from '../state/queue-dir.js';

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

/** Starts an attempt: its run.json (made or reused, attempts counted), a fresh work area, and its warnings. */
export function startAttempt({ o, say, p, newest, replayed }: RunContext, started: Date): RunJson {
  let rj = readRunJson(p);
  if (rj === null) {
    const { now, source } = resolveNow(p.name, o.now, started);
    rj = { run_id: `${p.name}@${started.toISOString()}#${process.pid}`, run: p.name, now, now_source: source, created: started.toISOString(), attempts: 0 };
    const queue = queueNameFor(o.queueDir, p.name, started);
    if (queue !== p.name) rj.queue = queue;
  } else if (o.now !== null && o.now !== rj.now) {
    say.log?.warn({ run: p.name, stored_now: rj.now, flag_now: o.now }, 'rerun of an interrupted run keeps the now it started with');
  }
  rj.attempts++;
  mkdirDurable(p.staging);
  writeRunJson(p, rj);
  fs.rmSync(p.work, { recursive: true, force: true });
  for (const d of [p.work, p.tmp, p.logs, p.queue]) {
    try {
      fs.mkdirSync(d, { recursive: true });
    } catch (err) {
      throw ioError(err, d, 'create directory');
    }
  }
  say.log?.info({ run: p.name, now: rj.now, now_source: rj.now_source, attempt: rj.attempts }, 'run start');
  if (rj.queue !== undefined) {
    p.queueName = rj.queue;
    say.warn(
      `${visibleName(p.name)}: queue files of an earlier run of this name are still in ${visibleName(o.queueDir)} (not taken yet); this run's are named ${visibleName(rj.queue)}.tsv`,
      {
        fields: { run: p.name, queue_name: rj.queue },
        msg: "queue files of an earlier run of this name are not taken yet; this run's get a name of their own",
      },
    );
  }
  // Said before the run, not after its commit: one who replays by hand can still stop
  // it (nothing is published then), and in a cron log it comes before the run's line.
  const replay = replayWarning(p.name, rj.now, newest, o.keepMs, replayed);
  if (replay !== null) {
    say.warn(visibleName(replay), {
      fields: { run: p.name, now: rj.now, newest_run: newest?.run, newest_now: newest?.now, keep_ms: newest?.keepMs ?? o.keepMs },
      msg: "a committed run's now is its --keep or more ahead of this run's: the URLs current_log forgot are sent again",
    });
  }
  return rj;
}
