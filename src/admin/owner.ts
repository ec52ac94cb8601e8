// partner-db owner URL|DOMAIN...: which Yacobot owns a domain, or a URL's domain as
// analyze-dump takes it; for a domain nobody owns, the Yacobot least-loaded assignment
// would give it now. Reads only.
import type { Command } from 'commander';
import { normalizeDomain } from '../core/db.js';
import { UsageError } from '../core/errors.js';
import { timeoutsOf, type Timeouts } from '../core/store.js';
import { loadUrlHash } from '../core/url.js';
import { canonicalOf } from '../runner/explain.js';
import { PartnerView, type YacobotRef } from '../runner/partners.js';

/** The answer for one argument. */
export interface OwnerAnswer {
  input: string;
  domain: string;
  owner: YacobotRef | null;
  /** When no Yacobot owns the domain: the one least-loaded assignment would pick now (null: none is active). */
  pick: YacobotRef | null;
}

/** The domain of each argument: a URL's (anything with "://") as analyze-dump computes it, else the domain as partner-db assign reads it; throws UsageError for one that is neither. */
export async function domainsOf(inputs: readonly string[]): Promise<string[]> {
  const hash = inputs.some((i) => i.includes('://')) ? await loadUrlHash() : null;
  return inputs.map((input) => {
    if (hash !== null && input.includes('://')) {
      const c = canonicalOf(input, hash);
      if ('invalid' in c) throw new UsageError(`'${input}': ${c.invalid}`);
      return c.domain;
    }
    const nd = normalizeDomain(input);
    if ('error' in nd) throw new UsageError(nd.error);
    return nd.domain;
  });
}

/** Looks up the owner (or the pick) of each domain in the database `db`. */
export async function ownersOf(db: string, inputs: readonly string[], domains: readonly string[], timeouts?: Timeouts): Promise<OwnerAnswer[]> {
  const view = await PartnerView.open(db, timeouts);
  try {
    const out: OwnerAnswer[] = [];
    for (const [i, input] of inputs.entries()) {
      const domain = domains[i]!;
      const owner = await view.owner(domain);
      out.push({ input, domain, owner, pick: owner === null ? await view.pickNow() : null });
    }
    return out;
  } finally {
    await view.close();
  }
}

/** One answer for a person. */
export function ownerLine(a: OwnerAnswer): string {
  const name = (y: YacobotRef) => `Yacobot ${y.id}${y.name ? ` (${y.name})` : ''}`;
  const who = a.owner !== null ? name(a.owner) : `no owner; least-loaded would give it to ${a.pick ? name(a.pick) : 'no Yacobot (none is active)'}`;
  return a.input === a.domain ? `${a.domain}: ${who}` : `${a.input}: ${a.domain}: ${who}`;
}

/** Adds the owner command to partner-db; `dbFile` gives the --db of the command line. */
export function addOwnerCommand(program: Command, dbFile: (cmd: Command) => string): void {
  program
    .command('owner <url-or-domain...>')
    .description("which Yacobot owns a domain, or a URL's domain (or which one a new domain would get now)")
    .option('--json', 'one JSON array for scripts')
    .action(async (inputs: string[], o: { json?: boolean }, cmd: Command) => {
      const file = dbFile(cmd);
      const answers = await ownersOf(file, inputs, await domainsOf(inputs), timeoutsOf(cmd.optsWithGlobals()));
      process.stdout.write(o.json ? JSON.stringify(answers) + '\n' : answers.map((a) => ownerLine(a) + '\n').join(''));
    });
}
