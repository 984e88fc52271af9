/**
 * The haproxy driver end to end: the real CLI (dist/: `npm run build` first), real app processes,
 * the real haproxy (Debian's 2.6) that the driver starts in the workspace's state directory, and a
 * load of 500 requests/s over keep-alive connections (bench/load.js). One workspace and one haproxy
 * for the file; each test migrates the live layout to a new version.
 *
 * - a stepped shift with an analysed hold reaches the commit with no failed request and no reload
 *   (the same haproxy worker before and after);
 * - a rollback from 50 % loses no request either;
 * - a server disabled by hand and a weight edited by hand are drift in `plan` and `status`, and
 *   `migrate` repairs them;
 * - haproxy killed while a migration holds: the next step starts it again from its file and the
 *   migration completes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Load } from '../../bench/load.js';
import { type Canary, startCanary, stopCanary, writeRelease } from '../support/canary.js';
import { runCli } from '../support/cli.js';
import { startTestLoad } from '../support/load.js';
import { isFinal, migrateDetached, type Summary, waitFor } from '../support/migrations.js';
import { Resources } from '../support/resources.js';
import { eventually } from '../support/wait.js';
import { killHaproxy, operatorCommand, requireHaproxy, stopHaproxyAtCleanup } from './support.js';

const rate = 500;
const shared = new Resources();
let w: Canary;
let version = 1;

beforeAll(async () => {
  requireHaproxy();
  w = await startCanary(
    (yaml) =>
      yaml
        .replace('drivers:\n', 'drivers:\n  edge: { type: haproxy }\n')
        .replace('    to: web\n', '    to: web\n    driver: edge\n'),
    (workspace) => stopHaproxyAtCleanup(shared, workspace.stateDir),
  );
}, 120_000);

afterAll(async () => {
  await stopCanary(w);
  await shared.cleanup();
  await w.cleanup();
}, 120_000);

function release(shift: string): void {
  version += 1;
  writeRelease(w, version, { shift });
}

const cli = (...args: string[]) => runCli([...args, '-f', w.file]);

async function logText(id: string): Promise<string> {
  return (await cli('topology', 'migration', 'logs', id)).stdout;
}

async function worker(): Promise<string | undefined> {
  return /^Pid: (\d+)/m.exec(await operatorCommand(w.stateDir, 'show info'))?.[1];
}

async function versionNow(): Promise<string> {
  const answer = await fetch(w.url, { headers: { connection: 'close' } });
  return ((await answer.json()) as { version: string }).version;
}

/** Runs `during` while `rate` requests/s flow; the load's result with it. */
async function underLoad<T>(during: (load: Load) => Promise<T>): Promise<{
  value: T;
  failed: number;
  requests: number;
  failures: unknown[];
  versions: Record<string, number>;
}> {
  const load: Load = startTestLoad({ url: w.url, rate });
  try {
    const value = await during(load);
    const result = await load.stop();
    console.log(
      `haproxy under load: ${result.requests} requests, ${result.failed} failed, by version ${JSON.stringify(result.versions)}`,
    );
    return {
      value,
      failed: result.failed,
      requests: result.requests,
      failures: result.failures.slice(0, 5),
      versions: result.versions,
    };
  } catch (error) {
    await load.stop();
    throw error;
  }
}

describe('haproxy driver, end to end', { timeout: 90_000 }, () => {
  it('a stepped shift with an analysed hold, at 500 requests/s on keep-alive connections: completed, 0 failed, no reload', async () => {
    const before = await worker();
    const analysis = '{ successRate: { min: 99 }, latency: { p99: { max: 500ms } }, minRequests: 20 }';
    release(`[{ weight: 10, hold: 2s, analysis: ${analysis} }, 50, 100]`);
    const run = await underLoad(async () => {
      const id = await migrateDetached(w);
      return { id, end: await waitFor(w, id, isFinal, 60_000) };
    });
    expect(run.value.end.lifecycle).toBe('completed');
    expect(run.failures).toEqual([]);
    expect(run.failed).toBe(0);
    expect(run.requests).toBeGreaterThan(rate);
    expect(Object.keys(run.versions).sort()).toEqual([`${version - 1}.0.0`, `${version}.0.0`]);
    const log = await logText(run.value.id);
    // Judged on haproxy's own counters of green's server (hrsp_5xx, rtime).
    const passed =
      /analysis passed at the 10 % step: green 5xx 0 % ≤ 1 %; green p99 [\d.]+ m?s ≤ 500 ms over (\d+) requests/.exec(
        log,
      );
    expect(passed, log).not.toBeNull();
    expect(Number(passed?.[1])).toBeGreaterThanOrEqual(20);
    const changes = [...log.matchAll(/set through the runtime API in (\d+) ms \(no reload\)/g)].map((m) =>
      Number(m[1]),
    );
    expect(changes.length).toBeGreaterThanOrEqual(3);
    console.log(`haproxy: splits set through the runtime API in ${changes.join(', ')} ms`);
    for (const ms of changes) expect(ms).toBeLessThan(100);
    expect(await worker()).toBe(before);
    expect(await versionNow()).toBe(`${version}.0.0`);
  });

  it('a rollback from 50 % at 500 requests/s: 0 failed, blue serves', async () => {
    const live = `${version}.0.0`;
    const liveText = readFileSync(w.file, 'utf8');
    release('[{ weight: 50, hold: manual }, 100]');
    const run = await underLoad(async (load) => {
      const id = await migrateDetached(w);
      await waitFor(w, id, (s: Summary) => s.lifecycle === 'awaiting_promotion', 60_000);
      // Green carries half of the traffic for a while before the rollback.
      const green = () => load.records.filter((r) => r.version === `${version}.0.0`).length;
      await eventually(
        () => green() >= 200,
        20_000,
        () => `${green()} answers from green`,
      );
      const rollback = await cli('topology', 'migration', 'rollback', id);
      expect(rollback.code, rollback.stderr).toBe(0);
      return waitFor(w, id, isFinal, 60_000);
    });
    expect(run.value.lifecycle).toBe('rolled_back');
    // Green served its half before the rollback.
    expect(run.versions[`${version}.0.0`]).toBeGreaterThanOrEqual(200);
    expect(run.failures).toEqual([]);
    expect(run.failed).toBe(0);
    expect(await versionNow()).toBe(live);
    // The file back to what is live, for the next test.
    version -= 1;
    writeFileSync(w.file, liveText);
  });

  it('a server disabled by hand and a weight edited by hand: drift in plan and status, repaired by migrate', async () => {
    const clean = await cli('topology', 'plan', '--detailed-exitcode');
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    const state = await operatorCommand(w.stateDir, 'show servers state');
    const name = /cutover_canary_www \d+ (s_\S+)/.exec(state)?.[1] as string;
    expect(name, state).toBeDefined();
    const address = name.replace(/^s_(\d+)_(\d+)_(\d+)_(\d+)_(\d+)$/, '$1.$2.$3.$4:$5');

    for (const [edit, drift] of [
      [`disable server cutover_canary_www/${name}`, `haproxy server ${address} disabled by hand`],
      [`set server cutover_canary_www/${name} weight 7`, `haproxy server ${address} weight 7, cutover set 1`],
    ] as const) {
      await operatorCommand(w.stateDir, edit);
      const drifted = await cli('topology', 'plan', '--detailed-exitcode');
      expect(drifted.code, drifted.stderr).toBe(2);
      expect(drifted.stdout).toContain(`route www: ${drift}`);
      const status = await cli('topology', 'status');
      expect(status.stdout).toContain(`edited (${drift}`);
      const repaired = await cli('topology', 'migrate', '--yes');
      expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
      expect((await cli('topology', 'plan', '--detailed-exitcode')).code).toBe(0);
      expect(await versionNow()).toBe(`${version}.0.0`);
    }
  });

  it('haproxy killed while a migration holds: the next step starts it from its file and the migration completes', async () => {
    release('[{ weight: 10, hold: manual }, 100]');
    const id = await migrateDetached(w);
    await waitFor(w, id, (s: Summary) => s.lifecycle === 'awaiting_promotion', 60_000);
    await killHaproxy(w.stateDir);
    const drifted = await cli('topology', 'status');
    expect(drifted.stdout).toMatch(/not served \(haproxy for .* does not answer/);
    const promote = await cli('topology', 'migration', 'promote', id);
    expect(promote.code, promote.stderr).toBe(0);
    const end = await waitFor(w, id, isFinal, 60_000);
    expect(end.lifecycle, end.reason ?? '').toBe('completed');
    const log = await logText(id);
    expect(log).toMatch(
      /route www: haproxy for .* is not running \(its runtime API .*haproxy\.sock does not answer\): starting it from .*haproxy\.cfg with the new split/,
    );
    expect(log).toMatch(/started haproxy for .*haproxy \(master pid \d+, worker \d+\) from .*haproxy\.cfg/);
    expect(await versionNow()).toBe(`${version}.0.0`);
    expect((await cli('topology', 'plan', '--detailed-exitcode')).code).toBe(0);
  });
});
