/**
 * A release of the switch to green whose look at green outlasts the write hold's budget (issue 28).
 * The release checked the budget, then looked at green (a health probe, bounded only by the
 * component's `health.timeout`), then set the routes: a slow look let the release go live after the
 * router had let go of the hold by its own bound (budget + 5 s), by the weights it had, to blue.
 * With `replicate.dataDir` blue is not fenced: the writes blue acknowledged in between were missing
 * on green once the routes went there. The look now ends with the budget, which is checked once
 * more after it, right before the routes are set; past it, the switch is undone and blue, which has
 * every write, serves.
 *
 * Real processes (the key store of test/fixtures/stateful-kv), the real router and CLI. The look is
 * made slow without a race: a preRollout hook waits for the test (after the health gate, before the
 * hold), which then makes green's /healthz wait (test/support/stalling-store.ts) until the hold
 * has ended and blue has acknowledged writes of the test's own.
 */
import { expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { isFinal, migrateDetached, waitFor } from '../support/migrations.js';
import {
  stallGreenAfterGate,
  stallingKvStoreOfFile,
  stallingNextVersion,
} from '../support/stalling-store.js';
import { expectNothingLost, heldRoutes } from '../support/stateful.js';
import { eventually } from '../support/wait.js';
import { startWriter, storedKeys } from '../support/writer.js';

const store = stallingKvStoreOfFile();

/** How the router of the workspace ended the route's last write hold, once one ended. */
async function lastHoldEnd(): Promise<{ ended: string; releasedTo: string } | undefined> {
  const snapshot = (await routerClient(store.w.stateDir).routes()) as unknown as {
    routes: Record<string, { lastHold?: { ended: string; releasedTo: string } }>;
  };
  return snapshot.routes['kv/www']?.lastHold;
}

it('a release whose look at green outlasts the budget is not set: the switch is undone and blue keeps every write', async () => {
  const { w, url, unstall } = store;
  stallingNextVersion(w);
  const writer = startWriter(url, 100, 'r');
  const id = await migrateDetached(w);
  const acknowledgedByBlue: string[] = [];
  let holdEnd: Awaited<ReturnType<typeof lastHoldEnd>>;
  try {
    // Green passed its gate; its next look (the release's) waits.
    await stallGreenAfterGate(w);
    // The hold ends while green's look waits: before the fix, by the router's own bound (the 2 s
    // budget plus 5 s), to blue; now, at the budget, by the switch's undo (the routes back to blue).
    await eventually(
      async () => {
        holdEnd = await lastHoldEnd();
        return holdEnd !== undefined;
      },
      30_000,
      () => 'the write hold did not end',
    );
    // Blue takes writes again and acknowledges them, green's look still waiting: they must survive
    // whatever the release does next.
    for (let i = 1; i <= 20; i++) {
      const key = `after-hold-${i}`;
      const res = await fetch(new URL(`/put?k=${key}`, url), { method: 'POST' });
      await res.text();
      expect([res.status, res.headers.get('x-version')]).toEqual([200, '1.0.0']);
      acknowledgedByBlue.push(key);
    }
  } finally {
    unstall();
  }
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  const stored = await storedKeys(url);
  const lost = acknowledgedByBlue.filter((key) => !stored.keys.has(key));
  const lostOfWriter = records.filter((r) => r.status === 200 && !stored.keys.has(r.key)).length;
  console.log(
    `release past the budget: the hold ${holdEnd?.ended} to ${holdEnd?.releasedTo}, the migration ${ended.lifecycle}, served by ${stored.version}; of the test's ${acknowledgedByBlue.length} writes blue acknowledged after the hold ended ${lost.length} missing, of the writer's ${lostOfWriter}`,
  );
  expect(lost).toEqual([]);
  const figures = await expectNothingLost(url, records, [200, 503]);
  expect(figures.version).toBe('1.0.0');
  expect(ended.lifecycle, ended.reason ?? '').toBe('failed');
  expect(ended.reason ?? '').toMatch(/budget .* ran out before releasing the held requests to green/);
  expect(await heldRoutes(w.stateDir)).toEqual([]);
}, 120_000);
