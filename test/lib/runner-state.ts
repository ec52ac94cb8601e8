// What a runner's run leaves behind, compared between an interrupted and an
// uninterrupted run: the files under var/ and the database's rows, and runs.jsonl.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';

/** Everything that must come out the same: files of queue/, state/ (but logs, lock, last-invocation.json, which holds times and a pid, and identity.json, random), inbox, DB rows. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const abs = path.join(dir, rel);
    for (const e of fs.readdirSync(abs, { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else if (!/^var\/state\/(runs\.jsonl|lock|last-invocation\.json|\.?identity\.json(\.tmp)?|partner\.db.*)$/.test(r))
        out[r] = fs.readFileSync(path.join(dir, r), 'latin1');
    }
  };
  walk('var');
  const db = new Database(path.join(dir, 'var/state/partner.db'), { readonly: true });
  out['db:partner_domain'] = JSON.stringify(db.prepare('SELECT domain, yacobot_id, added_at FROM partner_domain ORDER BY domain').raw().all());
  out['db:yacobot'] = JSON.stringify(db.prepare('SELECT * FROM yacobot ORDER BY id').raw().all());
  db.close();
  return out;
}

export function runsJsonl(dir: string): Record<string, unknown>[] {
  const f = path.join(dir, 'var/state/runs.jsonl');
  if (!fs.existsSync(f)) return [];
  return fs
    .readFileSync(f, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Each committed run's new_domains, by run name. */
export function newDomains(dir: string): Record<string, unknown> {
  return Object.fromEntries(
    runsJsonl(dir)
      .filter((x) => x.status === 'ok')
      .map((x) => [x.run, x.new_domains]),
  );
}

export function assertSameState(got: Record<string, string>, want: Record<string, string>, what: string): void {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: the same files`);
  for (const k of Object.keys(want)) assert.ok(got[k] === want[k], `${what}: ${k} differs`);
}

/** Runs `fn` on the SQLite database `file`, then closes it. */
export function withDb(file: string, fn: (db: Database.Database) => void): void {
  const db = new Database(file);
  try {
    fn(db);
  } finally {
    db.close();
  }
}
