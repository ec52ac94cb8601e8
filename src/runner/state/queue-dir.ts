// QUEUE, the Yacobots' directories (QUEUE/<id>/, ids from 1): the names of the queue
// files, which names are taken, and the backlog waiting there.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { preparedPath, statQuiet } from '../../core/durable.js';
import { countLines } from '../../core/lines.js';

/** Whether `name` is a Yacobot's directory name in QUEUE (an id from 1, no leading zero). */
export function isYacobotDir(name: string): boolean {
  return /^[1-9]\d*$/.test(name);
}

/** Per-Yacobot backlog: queue files and URLs still waiting in QUEUE/<id>/. */
export type Backlog = Record<string, { files: number; urls: number }>;

/** Counts the queue files (*.tsv) and URLs waiting in each QUEUE/<id>/. */
export function countBacklog(queueDir: string): Backlog {
  const out: Backlog = {};
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return out;
  }
  for (const id of ids.filter(isYacobotDir).sort((a, b) => Number(a) - Number(b))) {
    const dir = path.join(queueDir, id);
    let files: string[];
    try {
      if (!fs.statSync(dir).isDirectory()) continue;
      files = fs.readdirSync(dir).filter((f) => f.endsWith('.tsv') && !f.startsWith('.'));
    } catch {
      continue;
    }
    let urls = 0;
    let n = 0;
    for (const f of files) {
      try {
        urls += countLines(path.join(dir, f));
        n++;
      } catch {
        /* taken away by the consumer while we counted */
      }
    }
    out[id] = { files: n, urls };
  }
  return out;
}

/** Where a run's queue file for one Yacobot is published. */
export function publishedQueueFile(q: { queueDir: string; run: string; queueName?: string | undefined }, yacobot: string): string {
  return path.join(q.queueDir, yacobot, `${q.queueName ?? q.run}.tsv`);
}

/**
 * Whether some Yacobot directory of `queueDir` holds `name`.tsv, or the copy prepareQueues
 * makes of it: a Yacobot has not taken that file yet, or a commit is publishing it.
 */
export function queueNameTaken(queueDir: string, name: string): boolean {
  let ids: string[];
  try {
    ids = fs.readdirSync(queueDir);
  } catch {
    return false;
  }
  return ids.some((id) => {
    const f = path.join(queueDir, id, `${name}.tsv`);
    return isYacobotDir(id) && (statQuiet(f, fs.lstatSync) !== undefined || statQuiet(preparedPath(f), fs.lstatSync) !== undefined);
  });
}
