// The option values as given: the keys the command line and a config file may set, and
// a reader of the merged values (raw, as paths, as switches) whose messages name where
// each was set.
import * as path from 'node:path';
import { UsageError, clipText } from '../../core/errors.js';

/** The keys a config file may set; each is also a --flag taking a value. */
export const KEYS = [
  'inbox',
  'state',
  'db',
  'queue-dir',
  'now',
  'backlog-warn',
  'keep',
  'resend-after',
  'max-per-domain',
  'carry-keep',
  'max-reject-ratio',
  'memory',
  'log-level',
  'kill-after',
  'max-run-time',
  'keep-done',
  'accept-settings-change',
  'allow-unterminated',
  'reset-current-log',
  'metrics-file',
  'master-name',
  'claim-lease',
  'connect-timeout',
  'answer-timeout',
  'statement-timeout',
  'lock-timeout',
] as const;
export type Key = (typeof KEYS)[number];
export const PATH_KEYS: ReadonlySet<Key> = new Set(['inbox', 'state', 'db', 'queue-dir', 'metrics-file']);
/** Keys that are switches: a flag without a value on the command line, yes or no in a config file. */
export const BOOL_KEYS: ReadonlySet<Key> = new Set(['accept-settings-change', 'allow-unterminated', 'reset-current-log']);

/** Where each option was set: its value, the directory a relative path in it is from, and 'FILE:LINE: ' (config file) or '' (command line) for a message. */
export type Values = Map<Key, { value: string; base: string; at: string }>;

/** Reads the merged option values: raw, as paths, as switches; messages name where a value was set. */
export class OptionReader {
  constructor(
    private readonly values: Values,
    private readonly cwd: string,
  ) {}

  /** The value of `k`, if set. */
  get(k: Key): string | undefined {
    return this.values.get(k)?.value;
  }

  /** `k` as a message names it: after its config file's place when it was set there. */
  named(k: Key): string {
    return `${this.values.get(k)?.at ?? ''}${k}`;
  }

  /** `k` resolved from where it was set (a path key), or `dflt` from the current directory; an empty value is a UsageError. */
  pathOf(k: Key, dflt: string): string {
    const v = this.values.get(k);
    if (v === undefined) return path.resolve(this.cwd, dflt);
    // Not 'inbox is empty', which reads as an inbox without reflogs.
    if (v.value === '') throw new UsageError(`${this.named(k)} is an empty path ('' is not the current directory)`);
    return PATH_KEYS.has(k) ? path.resolve(v.base, v.value) : v.value;
  }

  /** The switch `k`: false when unset; a value other than yes/no is a UsageError. */
  bool(k: Key): boolean {
    const v = this.get(k);
    if (v === undefined) return false;
    const b = parseSwitch(v);
    if (b === null) throw new UsageError(`${this.named(k)} is yes or no (also true/false, 1/0), got '${clipText(v)}'`);
    return b;
  }
}

/** A switch's value: true for yes/true/1, false for no/false/0 (any case), else null. */
function parseSwitch(v: string): boolean | null {
  const t = v.toLowerCase();
  if (['yes', 'true', '1'].includes(t)) return true;
  if (['no', 'false', '0'].includes(t)) return false;
  return null;
}
