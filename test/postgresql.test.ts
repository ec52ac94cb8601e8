// The one line `npm test` shows when PostgreSQL is not here: every PostgreSQL test
// (the PostgreSQL variants of the partner-db, domains-from-db and upload-domains
// tests, two masters, the runner with the server stopped) is then left out, and
// MASTER_SERVER_REQUIRE_PG=1 (as .ci/run sets) makes it a failure instead. The fast
// suite (`npm test`) runs PostgreSQL in routing-chain.test.ts only; `npm run test:all`
// runs every PostgreSQL test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pgBinDir, pgSkipReason } from './lib/pg.js';

const skip = pgSkipReason();
test('PostgreSQL is here for its tests (initdb, pg_ctl, psql)', { skip: skip ?? false }, () => {
  assert.ok(pgBinDir() !== null);
});
