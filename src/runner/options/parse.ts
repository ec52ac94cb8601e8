// Options of reflog-to-yacobot-queue: flags, an optional key = value config file
// (the same names as the flags; flags win), defaults under ./var/. Pure: no I/O
// except reading the config file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError, clipText } from '../../core/errors.js';
import { rememberSecretsIn } from '../../core/secrets.js';
import { BOOL_KEYS, KEYS, type Key, OptionReader, type Values } from './reader.js';
import type { RunnerOptions } from './types.js';
import { backlogWarnOption, capOptions, dbOptions, keepOptions, masterOptions, maxRunTimeOption, nowOption, stageOptions } from './values.js';

/** Parses a config file's text into key -> value and the line (from 1) it is on; throws UsageError naming the line. */
export function parseConfig(text: string, file: string): Map<Key, { value: string; line: number }> {
  const out = new Map<Key, { value: string; line: number }>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.replace(/\r$/, '');
    const t = raw.trim();
    if (t === '' || t.startsWith('#')) continue;
    const eq = t.indexOf('=');
    if (eq < 0) throw new UsageError(`${file}:${i + 1}: want "key = value", got '${clipText(t)}'`);
    const key = t.slice(0, eq).trim();
    let value = t.slice(eq + 1).trim();
    // Before any check: a message about this line must not show a password in it.
    rememberSecretsIn(value);
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new UsageError(`${file}:${i + 1}: unknown key '${clipText(key)}' (known: ${KEYS.join(', ')})`);
    }
    const quote = value[0] === '"' || value[0] === "'" ? value[0] : null;
    if (quote !== null && (value.length < 2 || !value.endsWith(quote)))
      throw new UsageError(`${file}:${i + 1}: ${key}: the ${quote} that opens the value is never closed`);
    if (quote !== null) value = value.slice(1, -1);
    out.set(key as Key, { value, line: i + 1 });
  }
  return out;
}

/**
 * Parses argv (without node and script), merges the config file, validates.
 * Returns 'help' or 'version' when asked; throws UsageError on anything wrong.
 */
export function parseArgs(argv: readonly string[], cwd: string): RunnerOptions | 'help' | 'version' {
  const cli = readArgv(argv);
  if (cli === 'help' || cli === 'version') return cli;
  const { values, configPath } = mergeConfig(cli.flags, cli.configFile, cwd);
  const o = new OptionReader(values, cwd);
  // The checks run in this order: with several wrong values, the first one is reported.
  const state = o.pathOf('state', 'var/state');
  const now = nowOption(o);
  const backlogWarn = backlogWarnOption(o);
  const { keep, resend } = keepOptions(o);
  const cap = capOptions(o);
  const stage = stageOptions(o);
  const { db, dbArgs, dbTimeouts } = dbOptions(o, state);
  return {
    inbox: o.pathOf('inbox', 'var/inbox'),
    state,
    db,
    dbArgs,
    dbTimeouts,
    queueDir: o.pathOf('queue-dir', 'var/queue'),
    now,
    backlogWarn,
    keep: o.get('keep') ?? null,
    keepMs: keep.ms,
    resendAfter: o.get('resend-after') ?? null,
    resendAfterMs: resend.ms,
    ...cap,
    maxRejectRatio: stage.maxRejectRatio,
    memory: stage.memory,
    logLevel: stage.logLevel,
    killAfterMs: stage.killAfterMs,
    maxRunTimeMs: maxRunTimeOption(o),
    config: configPath,
    acceptSettingsChange: o.bool('accept-settings-change'),
    allowUnterminated: o.bool('allow-unterminated'),
    resetCurrentLog: o.bool('reset-current-log'),
    keepDoneMs: stage.keepDoneMs,
    metricsFile: values.has('metrics-file') ? o.pathOf('metrics-file', '') : null,
    ...masterOptions(o),
  };
}

/** The command line's --key values and its --config file; 'help' or 'version' as soon as asked; throws UsageError on an unknown or incomplete option. */
function readArgv(argv: readonly string[]): { flags: Map<Key, string>; configFile: string | null } | 'help' | 'version' {
  const flags = new Map<Key, string>();
  let configFile: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') return 'help';
    if (a === '--version') return 'version';
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument '${clipText(a)}'`);
    const eq = a.indexOf('=');
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    let value: string | undefined = eq < 0 ? undefined : a.slice(eq + 1);
    if (name !== 'config' && !(KEYS as readonly string[]).includes(name)) throw new UsageError(`unknown option '--${clipText(name)}'`);
    if (value === undefined && BOOL_KEYS.has(name as Key)) value = 'yes';
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new UsageError(`option '--${name}' wants a value`);
    }
    if (name === 'config') configFile = value;
    else flags.set(name as Key, value);
  }
  return { flags, configFile };
}

/** The config file's values (if one is given) overridden by the command line's `flags`, and the config file's absolute path. */
function mergeConfig(flags: Map<Key, string>, configFile: string | null, cwd: string): { values: Values; configPath: string | null } {
  const values: Values = new Map();
  let configPath: string | null = null;
  if (configFile !== null) {
    if (configFile === '') throw new UsageError(`config is an empty path ('' is not the current directory)`);
    configPath = path.resolve(cwd, configFile);
    let text: string;
    try {
      text = fs.readFileSync(configPath, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read config file ${configFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    for (const [k, { value, line }] of parseConfig(text, configFile)) values.set(k, { value, base: path.dirname(configPath), at: `${configFile}:${line}: ` });
  }
  for (const [k, v] of flags) values.set(k, { value: v, base: cwd, at: '' });
  return { values, configPath };
}
