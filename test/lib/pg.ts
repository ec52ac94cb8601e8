// A throwaway PostgreSQL cluster for the tests of one file: initdb in a temporary
// directory, pg_ctl start on 127.0.0.1 at a free port, stopped and removed at the end
// (also when a test fails or the process exits early). Without PostgreSQL's binaries
// the PostgreSQL tests are skipped, unless MASTER_SERVER_REQUIRE_PG=1 makes that a failure.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/** The directory of initdb, pg_ctl and psql of the newest PostgreSQL under MASTER_SERVER_PG_ROOT (default /usr/lib/postgresql), or null. */
export function pgBinDir(): string | null {
  const root = process.env.MASTER_SERVER_PG_ROOT || '/usr/lib/postgresql';
  let versions: string[];
  try {
    versions = fs
      .readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
  } catch {
    return null;
  }
  for (const v of versions) {
    const dir = path.join(root, v, 'bin');
    if (['initdb', 'pg_ctl', 'psql'].every((b) => fs.existsSync(path.join(dir, b)))) return dir;
  }
  return null;
}

/** Why the PostgreSQL tests cannot run here (a skip reason), or null when they can; throws when they are required. */
export function pgSkipReason(): string | null {
  if (pgBinDir() !== null) return null;
  const why = 'no PostgreSQL here (/usr/lib/postgresql/*/bin/initdb): PostgreSQL tests skipped; .ci/run installs it';
  if (process.env.MASTER_SERVER_REQUIRE_PG === '1') throw new Error(`MASTER_SERVER_REQUIRE_PG=1 but ${why}`);
  return why;
}

/**
 * True in the fast suite (`npm test`, MASTER_SERVER_SUITE=fast): PostgreSQL variants
 * run in one file only (routing-chain.test.ts), the rest in `npm run test:all`.
 */
export const FAST_SUITE = process.env.MASTER_SERVER_SUITE === 'fast';

/**
 * `test` when PostgreSQL is here and the suite is the whole one; else nothing is
 * registered (postgresql.test.ts says why when PostgreSQL is missing).
 */
export const pgTest = (pgSkipReason() === null && !FAST_SUITE ? test : () => undefined) as typeof test;

/** A free TCP port on 127.0.0.1 (free when asked; the server takes it right after). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** The password of PASSWORD_USER, who logs in over TCP with it (every other user is trusted). */
export const TEST_PASSWORD = 'pw-Secret_7&x';
export const PASSWORD_USER = 'ms_pw';

/** The advisory lock key of the stores' write transactions (src/core/store/pg.ts: 'MSpd' in ASCII). */
const WRITE_LOCK = 0x4d537064;

export class PgCluster {
  private dbs = 0;
  private running = false;

  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
  ) {}

  /** Makes and starts a cluster; stop() or the process's exit removes it. */
  static async start(): Promise<PgCluster> {
    const bin = pgBinDir();
    if (!bin) throw new Error(pgSkipReason() ?? 'no PostgreSQL');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-pg-'));
    const c = new PgCluster(bin, dir, await freePort());
    process.once('exit', () => c.remove());
    if (asRoot()) spawnSync('chown', ['-R', 'postgres:postgres', dir]);
    c.asOwner('initdb', ['-D', c.data, '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--auth=trust', '-N']);
    // PASSWORD_USER must give its password over TCP: the test that proves it never shows.
    const hba = path.join(c.data, 'pg_hba.conf');
    fs.writeFileSync(hba, `host all ${PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n` + fs.readFileSync(hba, 'utf8'));
    c.startServer();
    c.psql('postgres', `CREATE ROLE ${PASSWORD_USER} LOGIN SUPERUSER PASSWORD '${TEST_PASSWORD.replace(/'/g, "''")}'`);
    return c;
  }

  get data(): string {
    return path.join(this.dir, 'data');
  }

  /** Runs a PostgreSQL program as the cluster's owner (user postgres when the tests run as root). */
  private asOwner(prog: string, args: string[]): string {
    const exe = path.join(this.bin, prog);
    const r = asRoot() ? spawnSync('runuser', ['-u', 'postgres', '--', exe, ...args], { encoding: 'utf8' }) : spawnSync(exe, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${prog} ${args.join(' ')}: ${r.stderr || r.error}`);
    return r.stdout;
  }

  /** Starts the server (again, after stopServer). */
  startServer(): void {
    const opts = `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off -c max_connections=60`;
    this.asOwner('pg_ctl', ['-D', this.data, '-l', path.join(this.dir, 'log'), '-w', '-t', '60', '-o', opts, 'start']);
    this.running = true;
  }

  /** Stops the server at once (connections are cut, as a crash or failover cuts them). */
  stopServer(): void {
    this.asOwner('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
    this.running = false;
  }

  /** Runs SQL as the superuser in database `db`; returns psql's unaligned output. */
  psql(db: string, sql: string): string {
    // On stdin: an argument holds at most 128 KiB.
    const r = spawnSync(
      path.join(this.bin, 'psql'),
      ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', '-d', db, '-f', '-'],
      { input: sql, encoding: 'utf8', maxBuffer: 1 << 28 },
    );
    if (r.status !== 0) throw new Error(`psql: ${sql}: ${r.stderr}`);
    return r.stdout;
  }

  /**
   * A psql session in database `db` that holds the stores' write lock (the advisory
   * lock every write transaction takes first) for `seconds`, as another master's
   * commit would; kill it to let go sooner.
   */
  holdWriteLock(db: string, seconds: number): ChildProcess {
    const sql = `BEGIN; SELECT pg_advisory_xact_lock(${WRITE_LOCK}); SELECT pg_sleep(${seconds}); COMMIT;`;
    return spawn(path.join(this.bin, 'psql'), ['-X', '-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', '-d', db, '-c', sql], { stdio: 'ignore' });
  }

  /** The URI of a new, empty database (trusted superuser, no password). */
  newDatabase(): string {
    const name = `t${++this.dbs}`;
    this.psql('postgres', `CREATE DATABASE ${name}`);
    return this.uri(name);
  }

  /** The URI of database `name`, as the superuser or with PASSWORD_USER's password. */
  uri(name: string, withPassword = false): string {
    const who = withPassword ? `${PASSWORD_USER}:${encodeURIComponent(TEST_PASSWORD)}` : 'postgres';
    return `postgresql://${who}@127.0.0.1:${this.port}/${name}`;
  }

  /** The database name of a URI made by newDatabase. */
  static dbName(uri: string): string {
    return new URL(uri).pathname.slice(1);
  }

  /** Stops the server and removes the cluster's directory (safe to call twice). */
  remove(): void {
    if (this.running) {
      try {
        this.stopServer();
      } catch {
        /* already gone */
      }
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

function asRoot(): boolean {
  return process.getuid?.() === 0;
}
