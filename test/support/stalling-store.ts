/**
 * A release of a stateful switch caught in flight without a timing race (issue 28): the key store
 * of test/fixtures/stateful-kv, whose next versions answer /healthz only while a file of the test's
 * does not exist, and a preRollout hook that waits for the test after the health gate, before the
 * hold. `stallGreenAfterGate` then makes green's next look (the release's) wait, until the test
 * calls `unstall`.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { runCli } from './cli.js';
import type { Workspace } from './migrations.js';
import { liveKvStore } from './stateful.js';
import { eventually } from './wait.js';

export interface StallingStore {
  w: Workspace;
  url: string;
  /** Green's health probes answer again. */
  unstall(): void;
}

/** liveKvStore (its topology given to `edit` first), its store's file made to stall in its next versions. */
export async function stallingKvStore(edit?: (yaml: string) => string): Promise<StallingStore> {
  const { w, url } = await liveKvStore(edit);
  // Given STALL_DIR, the store answers /healthz only while <STALL_DIR>/stall does not exist, and
  // says it waits (<STALL_DIR>/stalled). Blue (1.0.0) runs the file as it was.
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
  return { w, url, unstall: () => rmSync(path.join(w.dir, 'stall'), { force: true }) };
}

/**
 * The file's store, set up before its tests (stallingKvStore) and brought down after them; its
 * fields are there once the tests run.
 */
export function stallingKvStoreOfFile(edit?: (yaml: string) => string): StallingStore {
  const store = {} as StallingStore;
  beforeAll(async () => {
    Object.assign(store, await stallingKvStore(edit));
  }, 60_000);
  afterAll(async () => {
    if (!store.w) return;
    store.unstall();
    await runCli(['topology', 'down', '-f', store.w.file, '--yes']).catch(() => undefined);
    await store.w.cleanup();
  }, 60_000);
  return store;
}

/**
 * The topology's store at 2.0.0, able to stall (its probes wait up to 60 s each), with a preRollout
 * hook that waits for the test (stallGreenAfterGate).
 */
export function stallingNextVersion(w: Workspace): void {
  const at = (name: string) => path.join(w.dir, name);
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
}

/**
 * Once green passed its gate (the hook waits; nothing has moved), green's probes are made to wait
 * and the migration goes on; resolves when green's next look (the release's) waits.
 */
export async function stallGreenAfterGate(w: Workspace): Promise<void> {
  const at = (name: string) => path.join(w.dir, name);
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
}
