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
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { isFinal, migrateDetached, type Workspace, waitFor } from '../support/migrations.js';
import { expectNothingLost, heldRoutes, liveKvStore } from '../support/stateful.js';
import { eventually } from '../support/wait.js';
import { startWriter } from '../support/writer.js';

let w: Workspace;
let url: string;

/** Files the test and the fixture meet at (in the workspace). */
const at = (name: string) => path.join(w.dir, name);

beforeAll(async () => {
  ({ w, url } = await liveKvStore((yaml) => yaml.replace('writeHold: 2s', 'writeHold: 5s')));
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

it('a rollback asked while the release to green is in flight switches back: every write green took reaches blue', async () => {
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
  let rollback: ReturnType<typeof runCli> | undefined;
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
    // The CLI waits for the rollback to end, which waits for the release: it is not awaited here.
    rollback = runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
    await waitFor(w, id, (s) => s.lifecycle === 'rolling_back' || isFinal(s), 30_000);
  } finally {
    // The release goes on, within the hold's budget: the routes at 100 % green, the held requests to green.
    rmSync(at('stall'), { force: true });
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
