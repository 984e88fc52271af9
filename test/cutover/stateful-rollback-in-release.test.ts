/**
 * A rollback asked while the switch's release is in flight (issue 28): the release is a route
 * change, which a rollback does not cut short, so it goes live and green takes writes (the held
 * requests first). The rollback must then switch back (hold, fence green, blue catches up, promote
 * blue) before the routes go back to blue; planned before the release went live, it only unfenced
 * blue and put the routes back, and every write green took was lost.
 *
 * Real processes (the key store of test/fixtures/stateful-kv, its data a file: the process
 * driver's `replicate.dataDir`), the real router and CLI, 100 uniquely keyed writes/s. The release
 * is caught in flight without a race: a preRollout hook waits for the test (after the health gate,
 * before the hold), which then makes green's /healthz wait, so the release's look at green waits
 * until the rollback is journaled.
 */
import { expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { isFinal, migrateDetached, waitFor } from '../support/migrations.js';
import {
  stallGreenAfterGate,
  stallingKvStoreOfFile,
  stallingNextVersion,
} from '../support/stalling-store.js';
import { expectNothingLost, heldRoutes } from '../support/stateful.js';
import { startWriter } from '../support/writer.js';

// A budget far beyond what the case takes: the rollback must be journaled (a CLI started, on a
// loaded machine) before the release's look at green ends, and a release past the budget is not
// set (stateful-release-past-budget), which would take the other way and miss the case under test.
const store = stallingKvStoreOfFile((yaml) => yaml.replace('writeHold: 2s', 'writeHold: 30s'));

it('a rollback asked while the release to green is in flight switches back: every write green took reaches blue', async () => {
  const { w, url, unstall } = store;
  stallingNextVersion(w);
  const writer = startWriter(url, 100, 'r');
  const id = await migrateDetached(w);
  let rollback: ReturnType<typeof runCli> | undefined;
  try {
    // Green passed its gate; its next look (the release's) waits.
    await stallGreenAfterGate(w);
    // The CLI waits for the rollback to end, which waits for the release: it is not awaited here.
    rollback = runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
    await waitFor(w, id, (s) => s.lifecycle === 'rolling_back' || isFinal(s), 30_000);
  } finally {
    // The release goes on, within the hold's budget: the routes at 100 % green, the held requests to green.
    unstall();
  }
  const done = await rollback;
  expect(done?.code, `${done?.stdout}${done?.stderr}`).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  expect(ended.lifecycle, ended.reason ?? '').toBe('rolled_back');
  const figures = await expectNothingLost(url, records);
  console.log(
    `rollback during the release: ${figures.acknowledged} acknowledged, ${figures.missing} missing, served by ${figures.version}`,
  );
  expect(figures.version).toBe('1.0.0');
  expect(await heldRoutes(w.stateDir)).toEqual([]);
  // The case under test was reached: the release went live while the rollback waited for it.
  const logs = await runCli(['topology', 'migration', 'logs', id, '-f', w.file]);
  expect(logs.stdout).toMatch(/the release to green went live before the rollback could stop it/);
}, 120_000);
