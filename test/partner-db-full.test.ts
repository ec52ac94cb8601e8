// The partner database's disk full (SQLite): the run fails with the message the symptom
// table of docs/operations.md shows, publishes nothing and leaves the reflog; once there is room, the
// next invocation runs the hour. A tmpfs of 2 MiB in a mount namespace of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT, RUNNER, testEnv } from './lib/run.js';
import { deliver, newJob } from './lib/job.js';

const tmpfsWorks =
  spawnSync('unshare', ['-rm', 'bash', '-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d"; s=$?; rmdir "$d"; exit $s']).status === 0;

/** The message of the symptom row (docs/operations.md, More symptoms) for a full partner database disk. */
function readmeSymptom(): string {
  const row = fs
    .readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('| exit 1, `database error: SQLITE_FULL'));
  assert.ok(row, 'docs/operations.md has a SQLITE_FULL symptom row');
  return /`([^`]+)`/.exec(row)![1]!;
}

// Inside the namespace: the database moved onto the tmpfs, the tmpfs filled to 40 KiB of
// room (the -shm file fits, the new domains do not), a run, the room given back, a run.
const SCRIPT = `
set -e
mkdir dbfs && mount -t tmpfs -o size=2m tmpfs dbfs && mv var/state/partner.db dbfs/
avail=$(df -B1 --output=avail dbfs | tail -1)
dd if=/dev/zero of=dbfs/filler bs=4096 count=$(( (avail - 40960) / 4096 )) 2>/dev/null
set +e
"$0" --db dbfs/partner.db --log-level silent 2>full.err; echo $? > full.exit
ls var/inbox > full.inbox; ls var/queue > full.queue 2>/dev/null
rm dbfs/filler
"$0" --db dbfs/partner.db --log-level silent 2>room.err; echo $? > room.exit
`;

test('the partner database disk full: SQLITE_FULL as the docs show it, nothing published, the reflog stays; with room the next invocation runs it', {
  skip: !tmpfsWorks && 'no user namespace to mount a tmpfs here',
}, () => {
  const dir = newJob('ms-dbfull-');
  deliver(dir, '2011072806');
  const r = spawnSync('unshare', ['-rm', 'bash', '-c', SCRIPT, RUNNER], { cwd: dir, env: testEnv(), encoding: 'utf8', timeout: 240_000 });
  assert.equal(r.status, 0, r.stderr);
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  assert.equal(read('full.exit'), '1\n', read('full.err'));
  assert.ok(read('full.err').includes(`run 2011072806 failed: upload-domains: ${path.join(dir, 'dbfs/partner.db')}: ${readmeSymptom()}`), read('full.err'));
  assert.equal(read('full.inbox'), '2011072806.reflog\n');
  assert.equal(read('full.queue'), '', 'nothing published');
  assert.equal(read('room.exit'), '0\n', read('room.err'));
  assert.ok(fs.readdirSync(path.join(dir, 'var/queue')).length > 0);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'var/inbox')), []);
});
