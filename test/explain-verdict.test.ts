// explain's verdict as of the job's now, each case on its own: held back, due again,
// forgotten, never seen, rejected, new; and without a known now.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { verdictOf, type VerdictFacts } from '../src/runner/views/explain-verdict.js';

const HOUR = 3600_000;
const base: VerdictFacts = { invalid: null, owner: { id: 2, name: 'y2' }, pick: null, current: null, sent_in: [], rejected_in: [] };
const at = { run: '2011072807', now: '20110728080000' };
const current = { due_at: '20110728081925', kept_until: '20110728171925' };

test('verdict: held back, or due again, as of the job now, sent or not', () => {
  assert.equal(verdictOf({ ...base, current }, at, 10 * HOUR), 'held back in 2011072807; due again at 20110728081925');
  const sent = { ...base, current, sent_in: ['/q/2/2011072806.tsv', '/q/2/2011072807.tsv'], sent_timestamp: '20110728071925' };
  assert.equal(verdictOf(sent, at, 10 * HOUR), 'sent in 2011072807 to Yacobot 2; held back in 2011072807; due again at 20110728081925');
  // Due at the job's now exactly: a sighting at that time is sent.
  assert.equal(
    verdictOf({ ...base, current: { ...current, due_at: '20110728080000' } }, at, 10 * HOUR),
    'due again since 20110728080000: its next sighting is sent',
  );
  assert.equal(
    verdictOf({ ...base, current }, { run: '2011072808', now: '20110728090000' }, 10 * HOUR),
    'due again since 20110728081925: its next sighting is sent',
  );
  // No committed run known (runs.jsonl emptied): the times alone.
  assert.equal(verdictOf({ ...base, current }, null, 10 * HOUR), 'due again at 20110728081925');
});

test('verdict: forgotten at its sent timestamp + keep, once the job now has reached it', () => {
  const gone = { ...base, sent_in: ['/q/1/2011072806.tsv'], sent_timestamp: '20110728060011' };
  assert.equal(
    verdictOf(gone, { run: '2011072818', now: '20110728190000' }, 10 * HOUR),
    'sent in 2011072806 to Yacobot 1; forgotten at 20110728160011: its next sighting is sent as new',
  );
  assert.equal(
    verdictOf(gone, { run: '2011072807', now: '20110728080000' }, HOUR),
    'sent in 2011072806 to Yacobot 1; forgotten at 20110728070011: its next sighting is sent as new',
  );
  // Not in current_log before keep ran out (its memory started over): not said to be forgotten.
  assert.equal(verdictOf(gone, at, 10 * HOUR), 'sent in 2011072806 to Yacobot 1; not in current_log: its next sighting is sent as new');
  assert.equal(verdictOf({ ...gone, sent_timestamp: null }, at, HOUR), 'sent in 2011072806 to Yacobot 1; not in current_log: its next sighting is sent as new');
});

test('verdict: never seen and would be rejected, rejected, new', () => {
  assert.equal(verdictOf({ ...base, invalid: 'unsupported scheme: ftp', owner: null }, at, HOUR), 'never seen; would be rejected: unsupported scheme: ftp');
  assert.equal(
    verdictOf({ ...base, invalid: 'unsupported scheme: ftp', owner: null, rejected_in: [{ reason: 'unsupported scheme: ftp' }] }, at, HOUR),
    'rejected: unsupported scheme: ftp',
  );
  assert.equal(verdictOf({ ...base, rejected_in: [{ reason: 'bad timestamp: x' }] }, at, HOUR), 'rejected: bad timestamp: x');
  assert.equal(verdictOf(base, at, HOUR), 'new: goes out when next seen, to Yacobot 2 (y2)');
  assert.equal(verdictOf({ ...base, owner: null, pick: { id: 1, name: '' } }, at, HOUR), 'new: goes out when next seen, to Yacobot 1 (least-loaded pick now)');
});
