/**
 * replicate for a stateful container component, against a real Podman: blue's named volumes copied
 * into green's by a helper container of green's image, or `replicate.command` run in a container of
 * green's image with blue's volumes mounted read-only under /cutover/from.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
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
import { runCli } from '../../support/cli.js';
import { killRunners } from '../../support/migrations.js';
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
  if (base) killRunners(path.join(base, '.cutover'));
  await fx?.cleanup([environment(), `${fx.prefix}-repcli`]);
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

  it("runs in a migration of a stateful component: green starts with blue's data (the CLI, the runner)", async () => {
    const file = path.join(base, 'topology.yaml');
    const write = (version: string) =>
      writeFile(
        file,
        `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${fx.prefix}-repcli }
drivers:
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(fx.config)}, stopTimeout: 2s }
components:
  db:
    driver: ctr
    version: "${version}"
    image: ${fx.image('1')}
    pull: never
    stateful: true
    ports: [{ container: 8080 }]
    env: { VERSION: "${version}" }
    volumes: [data:/data]
    health: { http: { path: /health }, interval: 100ms, deadline: 30s }
`,
      );
    const live = async () => {
      const out = await fx.podman([
        'ps',
        '--filter',
        `label=dev.cutover.environment=${fx.prefix}-repcli`,
        '--format',
        '{{.Names}}',
      ]);
      return out.stdout.trim().split('\n');
    };
    await write('1');
    const first = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(first.code, first.stderr).toBe(0);
    const [blue] = await live();
    expect((await fx.podman(['exec', blue as string, 'sh', '-c', 'echo from-blue > /data/rows'])).code).toBe(
      0,
    );
    await write('2');
    const second = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toMatch(/copied volume cutover-.*-db-mig_\w+-data into cutover-.*-db-mig_\w+-data/);
    const [green] = await live();
    expect(green).not.toBe(blue);
    expect((await fx.podman(['exec', green as string, 'cat', '/data/rows'])).stdout.trim()).toBe('from-blue');
    expect((await runCli(['topology', 'down', '-f', file, '--yes', '--volumes'])).code).toBe(0);
  }, 90_000);

  it('refuses replicate.dataDir on a container component when the topology is checked, by file:line', async () => {
    const file = path.join(base, 'datadir.yaml');
    await writeFile(
      file,
      `apiVersion: cutover/v1
kind: Topology
metadata: { name: datadir }
drivers:
  ctr: { type: container }
components:
  db:
    driver: ctr
    version: "1"
    image: app:1
    stateful: true
    replicate: { dataDir: pgdata }
`,
    );
    const result = await runCli(['topology', 'validate', '-f', file]);
    expect(result.code).toBe(1);
    expect(result.stderr + result.stdout).toMatch(
      /datadir\.yaml:12:.*components\.db\.replicate\.dataDir: is for the process driver; a container component's named volumes are copied from blue to green without it: remove it, or set replicate\.command/,
    );
  });
});
