// partner-db owner URL|HOST...: which Yacobot owns the registrable domain of a URL or a
// host, taken as analyze-dump takes it; for a domain nobody owns, the Yacobot
// least-loaded assignment would give it now. Reads only.
import type { Command } from 'commander';
import { normalizeDomain } from '../core/store/domains.js';
import { timeoutsOf, type Timeouts } from '../core/store/store.js';
import { UsageError } from '../core/errors.js';
import { domainOfHost, loadUrlHash } from '../core/url.js';
import { urlIdentity } from '../core/reflog.js';
import { PartnerView, type YacobotRef } from '../core/store/partner-view.js';

/** The answer for one argument. */
export interface OwnerAnswer {
  input: string;
  domain: string;
  owner: YacobotRef | null;
  /** When no Yacobot owns the domain: the one least-loaded assignment would pick now (null: none is active). */
  pick: YacobotRef | null;
}

/**
 * The domain of each argument as analyze-dump computes it: a URL's (anything with "://"),
 * else the registrable domain of a host (spelled as partner-db assign reads it:
 * www.Site.ru. is site.ru); throws UsageError for one that is neither.
 */
export async function domainsOf(inputs: readonly string[]): Promise<string[]> {
  const hash = inputs.some((i) => i.includes('://')) ? await loadUrlHash() : null;
  return inputs.map((input) => {
    if (hash !== null && input.includes('://')) {
      const c = urlIdentity(input, hash);
      if ('invalid' in c) throw new UsageError(`'${input}': ${c.invalid}`);
      return c.domain;
    }
    const nd = normalizeDomain(input);
    if ('error' in nd) throw new UsageError(nd.error);
    return domainOfHost(nd.domain);
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

/** One answer for a person: `DOMAIN: WHO`, or `INPUT -> DOMAIN: WHO` when the input is spelled otherwise or is a subdomain or a URL. */
export function ownerLine(a: OwnerAnswer): string {
  const name = (y: YacobotRef) => `Yacobot ${y.id}${y.name ? ` (${y.name})` : ''}`;
  const who = a.owner !== null ? name(a.owner) : `no owner; least-loaded would give it to ${a.pick ? name(a.pick) : 'no Yacobot (none is active)'}`;
  return a.input === a.domain ? `${a.domain}: ${who}` : `${a.input} -> ${a.domain}: ${who}`;
}

/** Adds the owner command to partner-db; `dbFile` gives the --db of the command line. */
export function addOwnerCommand(program: Command, dbFile: (cmd: Command) => string): void {
  program
    .command('owner <url-or-host...>')
    .description('which Yacobot owns the registrable domain of a URL or host, as analyze-dump takes it (or which one a new domain would get now)')
    .option('--json', 'one JSON array for scripts')
    .action(async (inputs: string[], o: { json?: boolean }, cmd: Command) => {
      const file = dbFile(cmd);
      const answers = await ownersOf(file, inputs, await domainsOf(inputs), timeoutsOf(cmd.optsWithGlobals()));
      process.stdout.write(o.json ? JSON.stringify(answers) + '\n' : answers.map((a) => ownerLine(a) + '\n').join(''));
    });
}
