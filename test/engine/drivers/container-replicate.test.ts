/**
 * replicate for a stateful container component, against a real Podman: blue's named volumes copied
 * into green's by a helper container of green's image, or `replicate.command` run in a container of
 * green's image with blue's volumes mounted read-only under /cutover/from.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Component, ContainerDriverSpec } from '../../../core/topology/types.js';
import { createContainerDriver } from '../../../engine/drivers/container-driver.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { type PodmanFixture, podmanFixture } from '../../support/podman.js';

let fx: PodmanFixture;
let base: string;
const environment = () => `${fx.prefix}-rep`;
const driver = createContainerDriver();
const lines: string[] = [];
const call: DriverCallOptions = { signal: new AbortController().signal, log: (l) => lines.push(l) };

beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'build-one');
  base = await mkdtemp(path.join(tmpdir(), 'cutover-container-rep-'));
}, 120_000);

afterAll(async () => {
  await fx?.cleanup([environment()]);
  if (base) await rm(base, { recursive: true, force: true });
}, 120_000);

function context(migrationId: string, overrides: Partial<Component> = {}): ComponentCallContext {
  const spec: Component = {
    driver: 'ctr',
    version: '1.0.0',
    image: fx.image('1'),
    pull: 'never',
    ports: [{ container: 8080 }],
    env: { VERSION: '1.0.0' },
    replicas: 1,
    volumes: ['data:/data', 'cache:/var/cache/app'],
    placement: { labels: {} },
    dependsOn: [],
    stateful: true,
    ...overrides,
  };
  const driverSpec: ContainerDriverSpec = { ...fx.driver };
  return {
    environment: environment(),
    migrationId,
    component: 'db',
    spec,
    driver: driverSpec,
    baseDir: base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
  };
}

/** Runs `sh -c script` in the slot's first replica. */
async function shell(slot: SlotInfo, script: string): Promise<string> {
  const name = (slot.details as { replicas: { name: string }[] }).replicas[0]?.name as string;
  const result = await fx.podman(['exec', name, 'sh', '-c', script]);
  if (result.code !== 0) throw new Error(`exec in ${name} failed: ${result.stderr}`);
  return result.stdout.trim();
}

async function leftHelpers(): Promise<string[]> {
  const out = await fx.podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${environment()}`,
    '--format',
    '{{.Names}}',
  ]);
  return out.stdout.split('\n').filter((n) => n.includes('replicate'));
}

describe('replicate of a container component (real podman)', () => {
  it("copies each of blue's named volumes into green's (files, modes, nested directories)", async () => {
    const blueCtx = context('mig_blue1');
    const blue = await driver.provision(blueCtx, 'blue', call);
    await shell(
      blue,
      'mkdir -p /data/nested && echo rows-42 > /data/nested/table && chmod 640 /data/nested/table && echo warm > /var/cache/app/c',
    );
    const greenCtx = context('mig_green1', { version: '2.0.0' });
    const green = await driver.provision(greenCtx, 'green', call);
    expect(await shell(green, 'ls -A /data')).toBe('');

    lines.length = 0;
    await driver.replicate(greenCtx, blue, green, call);
    expect(
      await shell(green, 'cat /data/nested/table; stat -c %a /data/nested/table; cat /var/cache/app/c'),
    ).toBe('rows-42\n640\nwarm');
    expect(lines.join('\n')).toContain(
      `copied volume cutover-${environment()}-db-mig_blue1-data into cutover-${environment()}-db-mig_green1-data`,
    );
    // Blue's copy is untouched, and the helper container is gone.
    expect(await shell(blue, 'cat /data/nested/table')).toBe('rows-42');
    expect(await leftHelpers()).toEqual([]);
    await driver.retire(greenCtx, green, call);
    await driver.retire(blueCtx, blue, call);
  }, 90_000);

  it("runs replicate.command in a container of green's image, blue's volumes read-only under /cutover/from", async () => {
    const command = [
      'sh',
      '-c',
      'cp /cutover/from/data/dump /data/restored && echo "$CUTOVER_FROM_SLOT_ID>$CUTOVER_SLOT_ID" > /data/who && touch /cutover/from/data/x 2>/dev/null || echo read-only > /data/ro',
    ];
    const blueCtx = context('mig_blue2', { replicate: { maxLag: 1_000, timeout: 60_000, command } });
    const blue = await driver.provision(blueCtx, 'blue', call);
    await shell(blue, 'echo dumped > /data/dump');
    const greenCtx = context('mig_green2', { replicate: { maxLag: 1_000, timeout: 60_000, command } });
    const green = await driver.provision(greenCtx, 'green', call);
    await driver.replicate(greenCtx, blue, green, call);
    expect(await shell(green, 'cat /data/restored /data/who /data/ro')).toBe(
      'dumped\nmig_blue2>mig_green2\nread-only',
    );
    expect(await leftHelpers()).toEqual([]);

    // A command that fails: a permanent error quoting its last lines of output.
    const failing = context('mig_green2', {
      replicate: {
        maxLag: 1_000,
        timeout: 60_000,
        command: ['sh', '-c', 'echo "no dump in /cutover/from" >&2; exit 4'],
      },
    });
    const error = await driver.replicate(failing, blue, green, call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toMatch(/^component db: replicate command sh -c .* exited with code 4/);
    expect((error as Error).message).toContain('no dump in /cutover/from');
    expect(await leftHelpers()).toEqual([]);
    await driver.retire(greenCtx, green, call);
    await driver.retire(blueCtx, blue, call);
  }, 90_000);
});
