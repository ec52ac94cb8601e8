// The runner's --help: what it does, every option and its default, the now of a run,
// the subcommands and the exit statuses.
import { DEFAULT_CARRY_KEEP, DEFAULT_KEEP, DEFAULT_RESEND_AFTER } from '../../core/defaults.js';
import { DEFAULT_TIMEOUTS } from '../../core/store/store.js';
import { PROG } from '../say.js';

export const USAGE = `Usage: ${PROG} [options]
       ${PROG} status [--json] [--max-age DURATION] [options]
       ${PROG} explain [--json] [options] URL...
       ${PROG} caps [--max-per-domain N,...] [--json] [options]
       ${PROG} check [options]
       ${PROG} new-identity [options]

Processes every *.reflog in the inbox, oldest name first (bytewise order of the
file names), each as one run named after its file (2011072806.reflog -> run
2011072806, queue files <queue-dir>/<yacobot_id>/2011072806.tsv). For each run:

  analyze-dump < reflog | group-sum | join-current --current STATE/current_log
    | filter-url --current-out <staged current_log> --now NOW
    | upload-domains --db DB --now NOW
    | logsaver --queue-dir <staged queue dir> --name RUN

upload-domains looks the hour's distinct domains up in the partner database,
in batches: the run's cost follows the hour, not the size of the partner table.

Everything is written under STATE/staging/RUN/ first. Only when every stage
exited 0, the reflog was one (lines without a TAB and nothing else, more than
one of them or one without its newline, are not: an HTML page saved as the hour)
and every queue file was copied beside its place does the run commit: publish
the queue files, replace STATE/current_log, keep the rejects in
STATE/rejects/RUN.tsv, append a line to STATE/runs.jsonl, move the reflog to
STATE/done/. A failed run publishes nothing and leaves the reflog
in the inbox, its rejects in STATE/rejects/failed/RUN.tsv; later reflogs wait
for it (exit 1). A run killed at any instant is finished or redone by the
next invocation, with the same result (a queue file may be published twice,
same name, same content).

Unattended runs:
  - A reflog whose last line has no newline (a cut download) fails its run
    unless --allow-unterminated. A gzip file or an HTML page is named as such.
  - A reflog with the same bytes as one a committed run of its name left in
    STATE/done/ (a re-sent hour) is set aside there as
    RUN.reflog.resent.~N~, with a warning; nothing runs for it. To replay an
    hour on purpose, move (mv, or ln) its reflog from done/ into the inbox.
  - A run whose name still has queue files in a Yacobot's directory (not
    taken yet) writes its own as RUN.replay-YYYYMMDDhhmmss.tsv.
  - --keep, --resend-after, --max-per-domain and --carry-keep are stored with
    the state (STATE/settings.json); other values make the invocation exit 2
    (see --accept-settings-change).
  - STATE/current_log missing, or not what the last commit left (emptied,
    cut, edited, an older copy: STATE/memory.json holds its size, URL count
    and SHA-256), fails the run (exit 1); STATE/current_log.last, a copy the
    commit keeps, restores it.
  - STATE/runs.jsonl is opened by name for each line: logrotate may rotate
    it by rename (create, the safer) or copytruncate.

Options (each also a key of the --config file):
  --inbox DIR             where reflogs arrive (default ./var/inbox)
  --state DIR             current_log, done/, runs.jsonl, lock
                          (default ./var/state)
  --db DB                 partner database: a SQLite file or a postgres:// URI
                          (default STATE/partner.db)
  --connect-timeout S     PostgreSQL: seconds to wait for a connection (${DEFAULT_TIMEOUTS.connectMs / 1000})
  --answer-timeout S      PostgreSQL: seconds to wait for the answer to any
                          one request before taking the server as stopped (${DEFAULT_TIMEOUTS.answerMs / 1000})
  --statement-timeout S   PostgreSQL: seconds one statement may run on the
                          server (${DEFAULT_TIMEOUTS.statementMs / 1000}; at most --answer-timeout less a margin)
  --lock-timeout S        PostgreSQL: seconds to wait for another master's
                          commit (${DEFAULT_TIMEOUTS.lockMs / 1000})
  --queue-dir DIR         queue root: DIR/<yacobot_id>/<run>.tsv
                          (default ./var/queue)
  --now YYYYMMDDhhmmss    "now" of every run of this invocation (see below)
  --backlog-warn N        warn when a Yacobot has more than N URLs waiting in
                          its queue directory (default 1000000)
  --keep DURATION         filter-url --keep (default ${DEFAULT_KEEP}; production: 10h);
                          at least --resend-after
  --resend-after DURATION filter-url --resend-after (default ${DEFAULT_RESEND_AFTER})
  --max-per-domain N      send at most N URLs of a domain per run; the rest
                          wait in STATE/carry for the next runs (limit-domains
                          between filter-url and upload-domains; default: no
                          cap, and no such stage)
  --carry-keep DURATION   drop a URL that waited in the carry this long
                          (default ${DEFAULT_CARRY_KEEP})
  --max-reject-ratio R    analyze-dump --max-reject-ratio (default 0.01)
  --memory SIZE           analyze-dump and limit-domains --memory (default
                          256M)
  --log-level LEVEL       JSON log lines on stderr: debug, info, warn, error,
                          silent (default info: with progress every 10 s, and
                          on a terminal a line redrawn in place)
  --kill-after DURATION   after SIGINT, SIGTERM or SIGHUP, how long the stages
                          get to stop before they are SIGKILLed (default 10s,
                          at most 1d; 0: at once); a second signal SIGKILLs
                          them at once
  --max-run-time DURATION the longest an invocation runs (default 50m, at
                          most 1d): a run still going then is stopped and
                          fails (exit 1, nothing published, the reflog
                          stays), naming the stage still running; no run
                          starts after it
  --keep-done DURATION    after an invocation that committed a run, remove the
                          reflogs in STATE/done/ and the rejects files in
                          STATE/rejects/ (and failed/) last changed or moved
                          there more than DURATION ago (default: keep all)
  --accept-settings-change
                          run although --keep or --resend-after differs from
                          the settings stored with the state
                          (STATE/settings.json, written by each commit);
                          without it such an invocation exits 2 before any
                          stage runs. The next commit stores the new settings
  --allow-unterminated    commit a reflog whose last line has no newline, that
                          line included; without it such a run fails (exit 1,
                          the reflog stays in the inbox): a cut download
  --reset-current-log     start the memory of sent URLs over when
                          STATE/current_log is missing after runs were
                          committed, or go on with it as it is when it is
                          not what the last commit left (emptied, cut,
                          edited); without it such a run fails (exit 1)
  --metrics-file FILE     after every invocation that takes the lock, replace
                          FILE (atomically) with the job's metrics in the
                          Prometheus text format, for node_exporter's textfile
                          collector (FILE ends in .prom)
  --master-name NAME      this master's name in messages and records (default:
                          the host name); with several masters on one
                          database, each run claims its hour before it
                          publishes, and an hour another master published is
                          remembered, not published. A claim is this master's
                          by its state's identity (STATE/identity.json), not
                          by this name: a copy of the state directory is
                          fenced, and new-identity makes it a master of its own
  --claim-lease DURATION  how long another master's claim of an hour, not yet
                          confirmed by its publish, holds before this master
                          takes it over (default 2m)
  --config FILE           read options from FILE: "key = value" lines with the
                          names above (no dashes in front), "#" comment lines;
                          the switches (accept-settings-change, ...) take yes
                          or no;
                          relative paths are relative to FILE's directory;
                          flags given on the command line win
  -h, --help              print this help and exit
  --version               print the version and exit

The "now" of a run (filter-url's clock, added_at of new domains) is, in order:
  1. --now, when given;
  2. when the reflog's name starts with an hour YYYYMMDDhh: the end of that
     hour (2011072806.reflog -> 20110728070000), so a backlog or a replay is
     processed as it would have been on time (an hour that has not begun
     by the clock, a typo, is skipped with a warning: it would empty
     current_log; so is a name that reads as YYYYMMDDhh but is no real
     hour, 2011072824);
  3. otherwise the wall clock when the run was first attempted.
It is stored in STATE/staging/RUN/run.json before any stage starts, and a rerun
after a crash reuses the stored value, so it reaches the same result. Times are
local (set TZ), as in filter-url.

Every invocation whose state directory exists records its result in
STATE/last-invocation.json (also when the lock is busy or the options are
wrong), which status reads:
  status    whether the job is healthy (exit 0) or not (exit 1): the last
            invocation, the last committed run, the inbox, each Yacobot's
            backlog, the lock, current_log's size; --json for a machine;
            --max-age DURATION: unhealthy also when the last committed run
            is older than that
  explain   what the job knows of each URL: canonical form, id, domain, owner
            (or the Yacobot least-loaded would pick now), current_log's entry
            and when it is due again, the queue files and rejects files that
            hold it, and a verdict as of the last run; --json for an array
  caps      for choosing --max-per-domain: the busiest domains' URLs in each
            hour STATE/done/ keeps, and what a cap of N would have sent,
            carried and expired (see its --help)
  check     the checks an invocation makes before its chain (inbox, state,
            settings, current_log and the carry, the partner database, the
            queue directory) and the config's own, one line each; exit 0 or 1
All four take the options above (--config too) after their name, read only,
and take no lock: safe beside a running invocation. new-identity (same options)
gives the state a new identity, under the lock: see its --help.

One invocation at a time per state directory (flock on STATE/lock); another one
exits 75 at once, naming the process that holds the lock.

Exit status: 0 all runs committed (or nothing to do), 1 a run failed (its
stage's message is printed), 2 usage or config error, 75 locked, 130, 143 or
129 stopped by SIGINT, SIGTERM or SIGHUP (the run under way is finished or
redone by the next invocation).
`;
