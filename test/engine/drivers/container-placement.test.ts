/**
 * Placement on several hosts: `drivers.<name>.hosts` with labels, `components.<name>.placement.labels`
 * choosing the host. The second host is simulated by a second `podman system service` with its own
 * storage root (what a remote machine's engine would be, reached on its socket); the first is the
 * local podman.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Component, ContainerDriverSpec } from '../../../core/topology/types.js';
import { createContainerDriver } from '../../../engine/drivers/container-driver.js';
import type { ComponentCallContext, DriverCallOptions } from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { runCli } from '../../support/cli.js';
import { type PodmanFixture, type PodmanResult, podmanFixture } from '../../support/podman.js';

let fx: PodmanFixture;
let base: string;
let hostB: { url: string; podman(args: string[]): Promise<PodmanResult> };
const environment = () => `${fx.prefix}-place`;
const driver = createContainerDriver();
const call: DriverCallOptions = { signal: new AbortController().signal, log: () => {} };

beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'build-one');
  hostB = await fx.secondHost([fx.image('1')]);
  base = await mkdtemp(path.join(tmpdir(), 'cutover-container-place-'));
}, 120_000);

afterAll(async () => {
  await fx?.cleanup([environment()]);
  if (base) await rm(base, { recursive: true, force: true });
}, 120_000);

function context(migrationId: string, zone: string): ComponentCallContext {
  const spec: Component = {
    driver: 'ctr',
    version: '1.0.0',
    image: fx.image('1'),
    pull: 'never',
    ports: [{ container: 8080 }],
    env: { VERSION: '1.0.0' },
    replicas: 1,
    volumes: ['data:/data'],
    placement: { labels: { zone } },
    dependsOn: [],
    stateful: false,
  };
  const driverSpec: ContainerDriverSpec = {
    type: 'container',
    engine: 'podman',
    stopTimeout: 2_000,
    hosts: {
      a: { runtime: 'runc', config: fx.config, labels: { zone: 'a' } },
      b: { host: hostB.url, labels: { zone: 'b', disk: 'ssd' } },
    },
  };
  return {
    environment: environment(),
    migrationId,
    component: 'web',
    spec,
    driver: driverSpec,
    baseDir: base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
  };
}

async function names(podman: (args: string[]) => Promise<PodmanResult>): Promise<string[]> {
  const out = await podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${environment()}`,
    '--format',
    '{{.Names}}',
  ]);
  return out.stdout.split('\n').filter((n) => n !== '');
}

async function version(address: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return (await (await fetch(`http://${address}/version`)).text()).trim();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

describe('placement of container components on hosts (two real podman stores)', () => {
  it('runs a component on the host its labels match, and only there; observe, logs, retire and down --volumes follow it', async () => {
    const onB = context('mig_b', 'b');
    const slot = await driver.provision(onB, 'green', call);
    expect(slot.details).toMatchObject({ host: 'b' });
    expect(await names(hostB.podman)).toEqual([`cutover-${environment()}-web-mig_b-0`]);
    expect(await names((args) => fx.podman(args))).toEqual([]);
    expect(await version(slot.addresses[0] as string)).toBe('1.0.0 build-one');
    expect((await driver.observe?.(onB, slot, call))?.map((r) => r.state)).toEqual(['running']);
    expect((await driver.logs?.(onB, slot, 5, call))?.[0]?.lines).toContain(
      'app 1.0.0 (build-one) listening on 8080',
    );

    const onA = context('mig_a', 'a');
    const slotA = await driver.provision(onA, 'green', call);
    expect(slotA.details).toMatchObject({ host: 'a' });
    expect(await names((args) => fx.podman(args))).toEqual([`cutover-${environment()}-web-mig_a-0`]);

    // Retire finds each slot on the host it recorded, whatever the component's labels say now.
    await driver.retire(onA, slot, call);
    expect(await names(hostB.podman)).toEqual([]);
    await driver.retire(onB, slotA, call);
    expect(await names((args) => fx.podman(args))).toEqual([]);
    // Each host kept its slot's volume; down --volumes removes them on every host of the driver.
    expect((await driver.removeVolumes?.(onA, call))?.sort()).toEqual([
      `cutover-${environment()}-web-mig_a-data`,
      `cutover-${environment()}-web-mig_b-data`,
    ]);
  }, 90_000);

  it('refuses labels that match no host, naming the hosts (driver, and topology validation by file:line)', async () => {
    await expect(driver.provision(context('mig_none', 'c'), 'green', call)).rejects.toThrow(
      'driver ctr: no host matches placement labels {"zone":"c"} (hosts: a {zone: a}, b {disk: ssd, zone: b}); change the component\'s placement.labels or a host\'s labels',
    );
    const file = path.join(base, 'topology.yaml');
    await writeFile(
      file,
      `apiVersion: cutover/v1
kind: Topology
metadata: { name: place }
drivers:
  ctr:
    type: container
    engine: podman
    host: unix:///run/a.sock
    hosts:
      a: { labels: { zone: a } }
      b: { host: "unix:///run/b.sock", runtime: runc, labels: { zone: b } }
components:
  web:
    driver: ctr
    version: "1"
    image: app:1
    placement: { labels: { zone: c } }
`,
    );
    const result = await runCli(['topology', 'validate', '-f', file]);
    expect(result.code).toBe(1);
    expect(result.stderr + result.stdout).toContain(
      'drivers.ctr.host: cannot go beside hosts: give each host its engine URL in hosts.<host>.host, or leave hosts out',
    );
    expect(result.stderr + result.stdout).toMatch(
      /topology\.yaml:11:.*drivers\.ctr\.hosts\.b\.runtime: is a remote podman, where runtime runc cannot be chosen/,
    );
    expect(result.stderr + result.stdout).toMatch(
      /topology\.yaml:17:.*components\.web\.placement\.labels: match no host of driver ctr \(hosts: a \{zone: a\}, b \{zone: b\}\)/,
    );
  }, 60_000);
});
