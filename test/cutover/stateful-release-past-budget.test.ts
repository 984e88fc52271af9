/**
 * A release of the switch to green whose look at green outlasts the write hold's budget (issue 28).
 * The release checked the budget, then looked at green (a health probe, bounded only by the
 * component's `health.timeout`), then set the routes: a slow look let the release go live after the
 * router had let go of the hold by its own bound (budget + 5 s), by the weights it had, to blue.
 * With `replicate.dataDir` blue is not fenced: the writes blue acknowledged in between were missing
 * on green once the routes went there. The budget is now checked once more after the look, right
 * before the routes are set; past it, the switch is undone and blue, which has every write, serves.
 *
 * Real processes (the key store of test/fixtures/stateful-kv), the real router and CLI. The look is
 * made slow without a race: a preRollout hook waits for the test (after the health gate, before the
 * hold), which then makes green's /healthz wait on a file until the router has let go of the hold
 * and blue has acknowledged writes of the test's own.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { runCli } from '../support/cli.js';
import { isFinal, migrateDetached, type Workspace, waitFor } from '../support/migrations.js';
import { expectNothingLost, heldRoutes, liveKvStore } from '../support/stateful.js';
import { eventually } from '../support/wait.js';
import { startWriter, storedKeys } from '../support/writer.js';

let w: Workspace;
let url: string;

/** Files the test and the fixture meet at (in the workspace). */
const at = (name: string) => path.join(w.dir, name);

beforeAll(async () => {
  ({ w, url } = await liveKvStore());
  // The store's next versions: given STALL_DIR, one answers /healthz only while <STALL_DIR>/stall
  // does not exist, and says it waits (<STALL_DIR>/stalled). Blue (1.0.0) runs the file as it was.
  const store = path.join(w.dir, 'kv.mjs');
  const healthz = "if (url.pathname === '/healthz') return res.end('ok');";
  const stalling = `if (url.pathname === '/healthz') {
      const dir = process.env.STALL_DIR;
      const stall = dir ? path.join(dir, 'stall') : '';
      if (stall && existsSync(stall)) writeFileSync(path.join(dir, 'stalled'), '');
      const answer = () => (stall && existsSync(stall) ? setTimeout(answer, 20) : res.end('ok'));
      return answer();
    }`;
  const text = readFileSync(store, 'utf8');
  expect(text).toContain(healthz);
  writeFileSync(
    store,
    text
      .replace(healthz, stalling)
      .replace('import { closeSync,', 'import { existsSync, writeFileSync, closeSync,'),
  );
}, 60_000);

afterAll(async () => {
  rmSync(at('stall'), { force: true });
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  await w.cleanup();
}, 60_000);

/** How the router of the workspace ended the route's last write hold (`expired`: by its own bound). */
async function lastHoldEnd(): Promise<string | undefined> {
  const snapshot = (await routerClient(w.stateDir).routes()) as unknown as {
    routes: Record<string, { lastHold?: { ended: string } }>;
  };
  return snapshot.routes['kv/www']?.lastHold?.ended;
}

it('a release whose look at green outlasts the budget is not set: the switch is undone and blue keeps every write', async () => {
  const yaml = readFileSync(w.file, 'utf8')
    .replace('version: "1.0.0"', 'version: "2.0.0"')
    .replace(
      '    run: { command: [node, kv.mjs] }\n',
      `    run: { command: [node, kv.mjs] }\n    env: { STALL_DIR: "${w.dir}" }\n`,
    )
    .replace('      deadline: 15s\n', '      timeout: 60s\n      deadline: 15s\n')
    .replace(
      'strategy:\n',
      `strategy:\n  hooks:\n    preRollout:\n      - name: wait-for-the-test\n        command: [sh, -c, "touch ${at('at-hook')}; while test ! -e ${at('go')}; do sleep 0.05; done"]\n        timeout: 60s\n`,
    );
  writeFileSync(w.file, yaml);
  const writer = startWriter(url, 100, 'r');
  const id = await migrateDetached(w);
  const acknowledgedByBlue: string[] = [];
  try {
    // Green passed its gate; nothing has moved. Green's next look (the release's) will wait.
    await eventually(
      () => existsSync(at('at-hook')),
      60_000,
      () => 'the preRollout hook did not start',
    );
    writeFileSync(at('stall'), '');
    writeFileSync(at('go'), '');
    await eventually(
      () => existsSync(at('stalled')),
      30_000,
      () => "the release's look at green did not come",
    );
    // The router lets go of the hold by its own bound (the 2 s budget plus 5 s), to blue.
    await eventually(
      async () => (await lastHoldEnd()) === 'expired',
      30_000,
      () => 'the router did not let go of the hold by itself',
    );
    // Blue takes writes again and acknowledges them: they must survive whatever the release does.
    for (let i = 1; i <= 20; i++) {
      const key = `after-expiry-${i}`;
      const res = await fetch(new URL(`/put?k=${key}`, url), { method: 'POST' });
      await res.text();
      expect([res.status, res.headers.get('x-version')]).toEqual([200, '1.0.0']);
      acknowledgedByBlue.push(key);
    }
  } finally {
    rmSync(at('stall'), { force: true });
  }
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  const stored = await storedKeys(url);
  const lost = acknowledgedByBlue.filter((key) => !stored.keys.has(key));
  const lostOfWriter = records.filter((r) => r.status === 200 && !stored.keys.has(r.key)).length;
  console.log(
    `release past the budget: ${ended.lifecycle}, served by ${stored.version}; of the test's ${acknowledgedByBlue.length} writes blue acknowledged after the hold expired ${lost.length} missing, of the writer's ${lostOfWriter}`,
  );
  expect(lost).toEqual([]);
  const figures = await expectNothingLost(url, records, [200, 503]);
  expect(figures.version).toBe('1.0.0');
  expect(ended.lifecycle, ended.reason ?? '').toBe('failed');
  expect(ended.reason ?? '').toMatch(/budget .* ran out before releasing the held requests to green/);
  expect(await heldRoutes(w.stateDir)).toEqual([]);
}, 120_000);
