// upload-domains: route filtered_log to Yacobots by domain, assigning new domains. Its
// command line, the database opened and checked, and the run's steps here; the routing
// itself in upload-domains-route.ts.
import * as os from 'node:os';
import { pathOption, refuseOwnStreams, type StageContext, type StageDef } from '../cli/stage.js';
import { loadRendezvous } from '../core/store/assign.js';
import { openStore } from '../core/store/open.js';
import { movesSoFar } from '../core/store/moves.js';
import { addDbOptions } from '../cli/db-options.js';
import { timeoutsOf } from '../core/store/store.js';
import { missingOwnerError, noActive } from '../core/store/yacobots.js';
import { UsageError, shellQuote } from '../core/errors.js';
import { emptyDomainMap, loadDomainMap, writeDomainMap } from '../core/domain-map.js';
import { formatTimestamp, isValidTimestamp } from '../core/time.js';
import { replaceableTarget } from '../core/writers.js';
import { removeStaleTemps } from '../core/temps.js';
import { INACTIVE_SHOWN, Router, SPOOL_PREFIX, type Partners, type UploadDomainsOptions } from './upload-domains-route.js';

export { SPOOL_PREFIX, chooserFor, type AssignMode, type UploadDomainsOptions } from './upload-domains-route.js';

/**
 * The warning (log fields, message) about `domains` domains routed to the inactive
 * Yacobots `ids`: it names every one of them, or the first INACTIVE_SHOWN and how
 * many more, with the command that moves each one's domains.
 */
export function inactiveWarning(domains: number, ids: Iterable<number>, db: string): [Record<string, unknown>, string] {
  const all = [...ids].sort((a, b) => a - b);
  const shown = all.slice(0, INACTIVE_SHOWN);
  const more = all.length - shown.length;
  const cmd = (id: number | string) => `partner-db --db ${shellQuote(db)} disable ${id}`;
  const which = more > 0 ? `${shown.join(', ')} and ${more} more (${all.length} in all)` : shown.join(', ');
  // One command per Yacobot: disable moves the domains of the one it is given only.
  const fix = more > 0 ? `${cmd('ID')} for each of them (partner-db --db ${shellQuote(db)} list shows which are inactive)` : shown.map(cmd).join('; ');
  return [
    { domains_of_inactive: domains, inactive_yacobots: all.length, yacobots: shown },
    `${domains} domain(s) belong to inactive Yacobot(s) ${which} and were routed to them; to move them to active ones: ${fix}`,
  ];
}

export const uploadDomains: StageDef<UploadDomainsOptions> = {
  name: 'upload-domains',
  summary: 'Route filtered_log records to Yacobots by domain; assign new domains.',
  usage: `
Reads URL records "id timestamp updatetag hits domain url" (filtered_log) and
writes routed records, in input order:

  yacobot_id  id  timestamp  updatetag  hits  domain  url

A domain's Yacobot comes from the --map file if given (entries that point to a
Yacobot that is no longer active are ignored), else from the database. A domain
the database gives to an inactive Yacobot (made so by hand; partner-db disable
moves its domains) is routed there all the same, with a warning and
domains_of_inactive in the summary. A Yacobot disabled while the run goes on
keeps, for this run, the domains it had when they were looked up (a domain has
one Yacobot per run), with a warning at the end and
domains_of_disabled_during_run in the summary. A database row naming a Yacobot
that does not exist (written with foreign keys off) is an error at start, before
any output. A domain found in neither is new: it is given an active Yacobot by
--assign

  least-loaded  the one with the fewest domains per unit of weight, ties to the
                smallest id; counts grow as it assigns, so a batch spreads out
  rendezvous    weighted rendezvous hashing of the domain: score =
                -weight / ln(hash(domain, id)), highest wins, so two Master
                Servers with the same Yacobot list agree without talking

All new assignments are written in ONE transaction at the end of the input
(INSERT ... ON CONFLICT(domain) DO NOTHING, added_at = --now) and read back: if
another process assigned a domain first, the database's answer wins and is the
one written. On PostgreSQL (--db postgres://...) that transaction first takes
an advisory lock every writer takes: masters sharing the database assign one
at a time, so loads spread as one master's would, and a domain another master
took first counts as lost_race. Last, after every record has been written,
--map is rewritten atomically (temporary file + rename), sorted bytewise, with
every domain learned in this run merged in; a missing --map file is an empty
map and is created.

Rule for "no active Yacobot": checked when the stage starts, before it reads
any input - if no Yacobot is active it fails with no output at all, even if
every domain would be known. (Checked again at commit time.)

--db is a SQLite file or a PostgreSQL URI (PG* variables and ~/.pgpass fill in
what it leaves out; messages show it without its password). Domains missing
from --map are looked up in one batch per input chunk: the chunk's records
from the first such domain on wait in memory for the answers.

Buffers: records stream out as long as their domain is known. From the first
record of a new domain on, every record (known or new) is spooled to a
temporary file in --tmp, because the new domain's Yacobot is final only after
the commit; the spool is written out, in input order, after the commit. Memory
holds the distinct domains seen in this run (about 60 bytes each) and --map,
read whole (about 70 bytes per line): with a partner table of millions of
domains, leave --map out and let the database's index answer the run's domains
(the cron runner does so; the run's cost then follows its own domains, not the
table).`,
  options(cmd) {
    addDbOptions(cmd)
      .option('--map <file>', 'domain_map file (from domains-from-db); updated with new assignments')
      .option('--assign <mode>', 'how new domains are assigned: least-loaded or rendezvous', 'least-loaded')
      .option('--now <YYYYMMDDhhmmss>', 'added_at of new assignments (default: the wall clock, local time)')
      .option('--tmp <dir>', 'directory for the spool file', os.tmpdir());
  },
  normalize(raw) {
    const assign = String(raw.assign);
    if (assign !== 'least-loaded' && assign !== 'rendezvous') {
      throw new UsageError(`--assign wants least-loaded or rendezvous, got '${assign}'`);
    }
    const now = raw.now === undefined ? formatTimestamp(new Date()) : String(raw.now);
    if (!isValidTimestamp(now)) throw new UsageError(`--now wants a real time as YYYYMMDDhhmmss, got '${now}'`);
    return {
      db: pathOption('--db', raw.db),
      timeouts: timeoutsOf(raw),
      map: raw.map === undefined ? null : pathOption('--map', raw.map),
      assign,
      now,
      tmpDir: pathOption('--tmp', raw.tmp, 'a directory name'),
    };
  },
  run: (ctx, o) => route(ctx, o),
};

/**
 * Opens the partner database and checks what must hold before any input is read: no
 * row names a Yacobot that does not exist, one Yacobot is active, --map and --tmp are
 * usable. Removes the spools of runs that were SIGKILLed.
 */
async function openPartners(ctx: StageContext, o: UploadDomainsOptions): Promise<Partners> {
  if (o.map) refuseOwnStreams('--map', o.map, ctx.inputPath);
  const store = await openStore(o.db, { timeouts: o.timeouts });
  ctx.onExit(() => void store.close().catch(() => undefined));
  const all = await store.yacobotLoads();
  // Rows written with foreign keys off: routed there, a domain would go to a queue no Yacobot reads.
  const missing = await store.missingOwners();
  if (missing.length > 0) throw missingOwnerError(store.name, missing);
  const active = new Set(all.filter((y) => y.active).map((y) => y.id));
  if (active.size === 0) throw noActive(store.name, '', shellQuote(store.name));
  removeStaleTemps(o.tmpDir, SPOOL_PREFIX);
  if (o.map) replaceableTarget(o.map); // the map is rewritten at the end: refuse /dev/null now, not after the commit
  const rendezvous = o.assign === 'rendezvous' ? await loadRendezvous() : null;
  return { store, active, exists: new Set(all.map((y) => y.id)), rendezvous };
}

/** upload-domains' run: open and check the database, route the input, assign, write out, update --map. */
async function route(ctx: StageContext, o: UploadDomainsOptions): Promise<void> {
  const db = await openPartners(ctx, o);
  const map = o.map ? loadDomainMap(o.map) : emptyDomainMap();
  const movesBefore = await movesSoFar(db.store);
  const r = new Router(ctx, o, db, map);
  ctx.reportCounts(() => r.counts());
  await r.readInput();
  if (r.ofInactive > 0) ctx.log.warn(...inactiveWarning(r.ofInactive, r.inactiveOwners, db.store.name));
  r.spool.close();
  await r.assignFresh();
  await r.replaySpool();
  await r.warnDisabledDuringRun();
  await r.warnMovedDuringRun(movesBefore);
  // After the records: the map (a copy of the database, which already holds every
  // assignment) is written, with its fsync, while logsaver works on them, not before.
  if (o.map && (r.learned!.size > 0 || !map.existed)) {
    await ctx.out.end(); // every record, to its last byte (a flush holds the last LF back)
    writeDomainMap(o.map, map, r.learned!);
  }
}
