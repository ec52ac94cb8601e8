// --db and the PostgreSQL time-outs as command-line options of the stages that use
// the partner database; what they mean and their defaults are core/store/store.ts's.
import type { Command } from 'commander';
import { DB_ENV } from '../core/secrets.js';
import { DEFAULT_TIMEOUTS, TIMEOUT_OPTIONS } from '../core/store/store.js';
import { loadCommander } from './commander.js';

/** Adds --db and the PostgreSQL time-out options to a command. */
export function addDbOptions(cmd: Command, required = true): Command {
  const { Option } = loadCommander();
  const what = `the partner database: a SQLite file or a postgres:// URI${required ? ' (required)' : ''}; ${DB_ENV} when not given (the runner hands it so: never on an argv, which ps shows)`;
  cmd.addOption(new Option('--db <db>', what).env(DB_ENV).makeOptionMandatory(required));
  for (const [flag, field, help, zero] of TIMEOUT_OPTIONS)
    cmd.option(`--${flag} <s>`, `PostgreSQL: ${help} (0: ${zero})`, String(DEFAULT_TIMEOUTS[field] / 1000));
  return cmd;
}
