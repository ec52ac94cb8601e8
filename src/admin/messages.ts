// What partner-db writes: its answers on stdout, its warnings on stderr (one line each),
// and how a Yacobot and a domain that is no registrable one are named.
import { visibleName } from '../core/errors.js';
import type { Yacobot } from '../core/store/yacobots.js';
import { domainOfHost } from '../core/url.js';

export const NAME = 'partner-db';

export const say = (text: string) => process.stdout.write(text + '\n');
// One line, whatever it quotes (a domain written by hand may hold a newline).
export const warn = (text: string) => process.stderr.write(`${NAME}: warning: ${visibleName(text)}\n`);

/** Routing keys are registrable domains (unless analyze-dump runs with --domain-mode host): say so when one is not. */
export function subdomainNote(domain: string): string | null {
  const reg = domainOfHost(domain);
  return reg !== domain ? `${domain} is not a registrable domain; URL records of its pages carry ${reg} (unless --domain-mode host)` : null;
}
// A name written by hand may hold control characters (add refuses them): shown escaped, as list shows it.
export const label = (y: Yacobot) => `${y.id} (${visibleName(y.name)})`;
