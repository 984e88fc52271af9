/**
 * Issue 28: the local runner stopped at each point of a stateful switch — after the router began to
 * hold, after blue's fence, after green's promotion, after the release to green — then a new runner
 * picks the migration up from its journal, as `migration resume` does: no acknowledged write is
 * lost, nothing stays fenced and the router holds nothing. Once more with the runner back only after
 * the router let go of the hold by itself (its bound, the budget plus a grace): the switch is then
 * undone, since blue took the writes released to it meanwhile.
 *
 * The runner runs in this process (the crash is its `detach()` while the driver call it waits for
 * never returns, with the journal as that leaves it, as test/engine/runner/crash-sweep does); the
 * drivers are the real ones (processes, the router) wrapped to stop at the chosen call after it took
 * effect. A writer sends 200 acknowledged writes/s through the route all along.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import { defaultDrivers } from '../../engine/drivers/default-drivers.js';
import type { DriverSet } from '../../engine/drivers/driver-set.js';
import type { ComponentDriver, Replicator, RouteDriver } from '../../engine/drivers/types.js';
import { holdExpiryGraceMs } from '../../engine/runner/execute-switch.js';
import { LocalRunner } from '../../engine/runner/local-runner.js';
import { noSecrets } from '../../engine/secrets/secret-source.js';
import { createMigration } from '../../engine/services/migrations.js';
import { topologySource } from '../../engine/sources/topology-source.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { runCli } from '../support/cli.js';
import { routeUrl, setVersion, type Workspace, workspace } from '../support/migrations.js';
import {
  expectNothingLost,
  heldRoutes,
  useGroupCommitStore,
  type WriteFigures,
} from '../support/stateful.js';
import { eventually } from '../support/wait.js';
import { startWriter, type WriteRecord } from '../support/writer.js';

type Point = 'hold' | 'fence' | 'promote' | 'release';

let w: Workspace;
let url: string;
let version = 1;
const runners: LocalRunner[] = [];

beforeAll(async () => {
  w = await workspace('test/fixtures/stateful-kv');
  useGroupCommitStore(w.dir);
  url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  for (const runner of runners) runner.detach();
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  await w.cleanup();
}, 60_000);

/** The real drivers, but the call at `point` takes effect and then never returns (`stopped` says when). */
function stoppingAt(point: Point, stopped: { at: Point | null }): DriverSet {
  const drivers = defaultDrivers();
  const stop = (): Promise<never> => {
    stopped.at = point;
    return new Promise<never>(() => {});
  };
  const process = drivers.component.process as ComponentDriver;
  const replication = process.replication as Replicator;
  const wrapped: Replicator = {
    ...replication,
    capabilities: replication.capabilities,
    fence: async (...args) => {
      const fenced = await replication.fence(...args);
      if (point === 'fence') await stop();
      return fenced;
    },
    promote: async (...args) => {
      await replication.promote(...args);
      if (point === 'promote') await stop();
    },
  };
  if (replication.supports) wrapped.supports = replication.supports;
  const router = drivers.route.router as RouteDriver;
  let held = false;
  const applyAll: RouteDriver['applyAll'] = async (ctx, states, options) => {
    await router.applyAll?.(ctx, states, options);
    const holding = states.some((s) => s.hold !== undefined);
    if (holding && point === 'hold') await stop();
    if (!holding && held && point === 'release') await stop();
    held ||= holding;
  };
  return {
    component: { ...drivers.component, process: { ...process, replication: wrapped } },
    route: { ...drivers.route, router: { ...router, applyAll } },
  };
}

/** Migrates to the next version, stops the runner at `point`, and picks the migration up again. */
async function crashAt(point: Point, resumeAfterMs = 0): Promise<MigrationState> {
  version += 1;
  setVersion(w, 'store', `${version}.0.0`);
  const stateDir = StateDir.at(w.stateDir);
  const created = await createMigration({
    source: topologySource({ text: readFileSync(w.file, 'utf8'), file: w.file }),
    stateDir,
    secrets: noSecrets,
  });
  if (!created.created) throw new Error('nothing to migrate');
  const { id, environment } = created.spec;
  const stopped = { at: null as Point | null };
  const first = LocalRunner.recover(stateDir, environment, id, {
    stateDir,
    drivers: stoppingAt(point, stopped),
    secrets: noSecrets,
  });
  runners.push(first);
  await eventually(
    () => stopped.at === point,
    30_000,
    () => JSON.stringify(first.current.lifecycle),
  );
  first.detach();
  if (resumeAfterMs > 0) await sleep(resumeAfterMs);
  const second = LocalRunner.recover(stateDir, environment, id, {
    stateDir,
    drivers: defaultDrivers(),
    secrets: noSecrets,
  });
  runners.push(second);
  return second.done();
}

/** Nothing lost on the serving side; nothing fenced; the router holds nothing. */
async function judge(
  point: string,
  final: MigrationState,
  records: WriteRecord[],
  refused: 'none' | 'hold full' = 'none',
): Promise<WriteFigures> {
  // A hold past its bound of requests answers 503 (Retry-After): not acknowledged, not lost.
  const figures = await expectNothingLost(url, records, refused === 'hold full' ? [200, 503] : [200]);
  console.log(
    `runner stopped at ${point}: ${final.lifecycle} (${final.ending?.reason ?? 'switched'}); ${figures.acknowledged} acknowledged, ${figures.missing} missing, ${figures.sent - figures.acknowledged} not acknowledged`,
  );
  expect(final.switch?.fenced ?? []).toEqual([]);
  expect(await heldRoutes(w.stateDir)).toEqual([]);
  return figures;
}

for (const point of ['hold', 'fence', 'promote', 'release'] as const) {
  it(`stopped after the ${point}, picked up at once: the switch completes, nothing lost`, async () => {
    const writer = startWriter(url, 200, `${point}-`);
    const final = await crashAt(point);
    const records = await writer.stop();
    const figures = await judge(point, final, records);
    expect(final.lifecycle, final.ending?.reason).toBe('completed');
    expect(figures.version).toBe(`${version}.0.0`);
  }, 90_000);
}

it('stopped after the promotion and picked up only after the router let go of the hold: undone, blue serves, nothing lost', async () => {
  const writer = startWriter(url, 200, 'late-');
  const live = `${version}.0.0`;
  const final = await crashAt('promote', 2_000 + holdExpiryGraceMs + 1_000);
  const records = await writer.stop();
  // 7 s of the router holding at 200 writes/s: past its 1,000 it answers 503.
  const figures = await judge('promote (late)', final, records, 'hold full');
  expect(final.lifecycle).toBe('failed');
  expect(final.ending?.reason).toMatch(/budget/);
  expect(figures.version).toBe(live);
}, 90_000);
