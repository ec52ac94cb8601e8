// reflog-to-yacobot-queue check: the checks an invocation makes before its chain
// (checks/all.ts) and the configuration's own, one line each, exit 0 when all pass.
// Changes nothing: takes no lock (it is looked at from outside), creates no file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataError, UsageError, formatPlace, visibleName } from '../../core/errors.js';
import { CHECKS, type Found } from '../checks/all.js';
import type { RunnerOptions } from '../options/types.js';
import { PROG } from '../say.js';
import { runsLog } from '../state/runs-log.js';
import type { SubArgs } from './sub-args.js';

export const CHECK_USAGE = `Usage: ${PROG} check [--config FILE] [options]

Checks what an invocation with the same options would check before it reads a
reflog, and changes nothing: the configuration (options and paths), the inbox,
the state directory and its lock, the settings stored with the state,
current_log and the carry against what the last commit left, the partner
database (reachable, schema, Yacobots, the one the state's runs used), the
state's identity (held by this state, not by a copy of it that claims its
hours) and the queue directory. One line per check: "ok NAME: ..." or "FAIL NAME: what is
wrong, and the command that mends it". Exit 0 when every check passes, 1
otherwise. Takes no lock: a run under way is only named.

  options                 the runner's (--config, --state, --inbox, --db,
                          --queue-dir, ...), as the cron line gives them
`;

/** Runs every check, printing one line each; returns 0 when all pass, else 1. */
export async function check(a: SubArgs): Promise<number> {
  const lines = [`ok config: ${configLine(a.o)}`];
  const found: Found = { past: [], active: null };
  let failed = 0;
  if (a.o.metricsFile !== null) {
    try {
      lines.push(`ok metrics-file: ${metricsLine(a.o.metricsFile)}`);
    } catch (err) {
      failed++;
      lines.push(`FAIL metrics-file: ${faultOf(err)}`);
    }
  }
  found.past = runsLog(a.o.state).tail();
  for (const c of CHECKS) {
    try {
      lines.push(`ok ${c.name}: ${await c.run(a.o, found)}`);
    } catch (err) {
      failed++;
      lines.push(`FAIL ${c.name}: ${faultOf(err)}`);
    }
  }
  process.stdout.write(`${lines.map(visibleName).join('\n')}\n`);
  return failed === 0 ? 0 : 1;
}

/** Prints the line of a configuration that could not be read (`message`: what is wrong) and returns 1. */
export function configRefused(message: string): number {
  process.stdout.write(`FAIL config: ${visibleName(message)}\n`);
  return 1;
}

/** The metrics file's line: its directory can take it (written after every invocation, replaced by rename); throws otherwise. */
function metricsLine(file: string): string {
  const dir = path.dirname(file);
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new DataError('IO', `cannot write here: ${code}; the metrics file is written here after every invocation (mkdir -p it, and let this user write it)`, {
      file: dir,
    });
  }
  return `${dir} can take ${path.basename(file)}`;
}

/** The configuration's line: the file read and the paths it gives. */
function configLine(o: RunnerOptions): string {
  const from = o.config === null ? 'no --config: flags and defaults' : o.config;
  return `${from}; inbox ${o.inbox}, state ${o.state}, queue-dir ${o.queueDir}${o.metricsFile === null ? '' : `, metrics-file ${o.metricsFile}`}`;
}

/** A fault in one line: a DataError with its place, any other with its message. */
export function faultOf(err: unknown): string {
  if (err instanceof DataError) return formatPlace(err.place, err.message);
  if (err instanceof UsageError || err instanceof Error) return err.message;
  return String(err);
}
