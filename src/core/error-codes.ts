// The machine-readable names of failures: DataError's `code`, a stage summary's
// `error_code` (docs/formats-and-rules.md), each stable across releases. One line
// each says who raises it.
export type ErrorCode =
  // Input streams and files (core/lines.ts, core/records.ts, the stages)
  | 'BAD_RECORD' // a stream line that is not its format's (every stage but analyze-dump; the runner's re-key)
  | 'BAD_CURRENT' // join-current: a current_log line
  | 'BAD_INCOMING' // join-current: a line from group-sum
  | 'BAD_CARRY' // limit-domains: a carry line
  | 'BAD_TIMESTAMP' // core/time.ts: a timestamp that is no real time
  | 'BAD_UTF8' // core/lines.ts: a line that is not UTF-8
  | 'LINE_TOO_LONG' // core/lines.ts: a line over the stream's bound
  | 'TRUNCATED' // core/lines.ts: a stream whose last line has no LF
  | 'UNSORTED' // group-sum: input out of id order
  | 'HITS_TOO_BIG' // group-sum, filter-url: a hits sum beyond its digits
  | 'REJECT_RATIO' // analyze-dump: more rejected lines than --max-reject-ratio
  | 'NOT_A_FILE' // core/fifos.ts, core/writers.ts: a path that is no regular file
  | 'IO' // core/errors.ts ioError: a system call failed on a named file
  // The partner database (core/store/, core/db-uri.ts, core/domain-map.ts)
  | 'BAD_DB_URI' // a --db that is no PostgreSQL URI
  | 'BAD_ENV' // sqlite-db.ts: the environment's database variable is wrong
  | 'BAD_MAP' // domain-map.ts: a --map line
  | 'BAD_SCHEMA' // schema.ts: tables or columns not the project's
  | 'OLD_SCHEMA' // schema.ts: a schema version to migrate first
  | 'BAD_WEIGHT' // yacobots.ts: a Yacobot weight out of range
  | 'BAD_YACOBOT_ID' // yacobots.ts: a Yacobot id that is none
  | 'NO_ACTIVE_YACOBOT' // yacobots.ts: a new domain and no active Yacobot
  | 'NO_SUCH_YACOBOT' // yacobots.ts: a row names a Yacobot that is not there
  | 'NO_YACOBOT' // store.ts: a Yacobot named that is not there
  | 'NO_DB' // sqlite-db.ts: no database file
  | 'NO_DIR' // sqlite-db.ts: the database's directory is missing
  | 'DB' // sqlite-db.ts, pg.ts, pg-waits.ts: the database failed
  | 'DB_BUSY' // sqlite-db.ts, pg.ts: another process holds the database
  | 'DB_NO_PASSWORD' // pgpass.ts: no password for a URI that wants one
  | 'BAD_ROW' // domains-from-db, partner-db: a row that is not the schema's
  // partner-db (admin/)
  | 'BAD_CSV' // an import file's rows
  | 'CSV_TOO_BIG' // an import file beyond what one import holds
  | 'COPY_ORPHANS' // copy: domains of a Yacobot the target lacks
  | 'DISABLED' // a Yacobot disabled while an import read its file
  | 'DUPLICATE' // a Yacobot name taken
  | 'LAST_YACOBOT' // removing the last active Yacobot
  | 'NOT_EMPTY' // init over a database that holds rows
  // The runner (src/runner/)
  | 'COMMIT_UNDECIDED' // a dead upload-domains' commit the database cannot tell
  | 'HOUR_HELD' // another master holds the hour's claim
  | 'INBOX_READ_ONLY' // the inbox cannot be written (reflogs cannot leave it)
  | 'NO_INBOX' // the inbox cannot be read
  | 'QUEUE_NOT_TAKEN' // a queue file of the run's name, other bytes, not taken yet
  | 'QUEUE_NOT_WRITABLE' // checks/queue-dir.ts: QUEUE cannot take an active Yacobot's queue files
  | 'RUNS_NOT_FILE' // runs.jsonl is no regular file
  | 'STATE_NOT_WRITABLE' // a place a commit writes cannot be written
  | 'STATE_FENCED' // a copy of the state that another copy outran may not publish the hour
  | 'BAD_IDENTITY' // STATE/identity.json cannot be read or is damaged
  | 'NO_STATE' // new-identity: no such state directory
  | 'COMMITTED_RUN' // new-identity: a committed run awaits its publish under the current identity
  // The scripts (scripts/)
  | 'BENCH' // bench-runner.ts: a benchmark run that failed
  | 'NO_TIME' // bench.ts: no GNU time (/usr/bin/time) to measure peak RSS
  // Not DataErrors
  | 'USAGE' // UsageError: wrong arguments (exit 2)
  | 'INTERNAL'; // cli/stage.ts: a bug, in a stage summary's error_code
