import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Component, ContainerDriverSpec } from '../../../core/topology/types.js';
import { createContainerDriver } from '../../../engine/drivers/container-driver.js';
import { PortPool } from '../../../engine/drivers/port-pool.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { runCli } from '../../support/cli.js';
import { freePort, killRunners } from '../../support/migrations.js';
import { type PodmanFixture, podmanFixture } from '../../support/podman.js';

let fx: PodmanFixture;
let base: string;
const environment = () => `${fx.prefix}-drv`;

beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'build-one');
  base = await mkdtemp(path.join(tmpdir(), 'cutover-container-'));
}, 120_000);

afterAll(async () => {
  await fx?.cleanup([environment()]);
  if (base) await rm(base, { recursive: true, force: true });
}, 120_000);

function spec(overrides: Partial<Component> = {}): Component {
  return {
    driver: 'ctr',
    version: '1.0.0',
    image: fx.image('1'),
    pull: 'never',
    ports: [{ container: 8080 }],
    env: { VERSION: '1.0.0' },
    replicas: 1,
    placement: { labels: {} },
    dependsOn: [],
    stateful: false,
    ...overrides,
  };
}

function context(component: Component, migrationId = 'mig_a', name = 'web'): ComponentCallContext {
  const driver: ContainerDriverSpec = { ...fx.driver };
  return {
    environment: environment(),
    migrationId,
    component: name,
    spec: component,
    driver,
    baseDir: base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
  };
}

const lines: string[] = [];
const call: DriverCallOptions = { signal: new AbortController().signal, log: (l) => lines.push(l) };

async function get(address: string, pathname: string): Promise<string> {
  const response = await fetch(`http://${address}${pathname}`, { signal: AbortSignal.timeout(5_000) });
  return (await response.text()).trim();
}

/** Fetches until the replica answers: httpd binds just after the container reports running. */
async function getWhenUp(address: string, pathname: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await get(address, pathname);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function containersOf(
  slotId: string,
  component = 'web',
): Promise<{ name: string; labels: Record<string, string> }[]> {
  const out = await fx.podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${environment()}`,
    '--filter',
    `label=dev.cutover.component=${component}`,
    '--filter',
    `label=dev.cutover.slot=${slotId}`,
    '--format',
    'json',
  ]);
  const list = JSON.parse(out.stdout || '[]') as { Names: string[]; Labels: Record<string, string> }[];
  return list
    .map((c) => ({ name: c.Names[0] as string, labels: c.Labels }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

// First and alone: it takes podman off the PATH of this process.
describe('container driver without an engine', () => {
  const driver = createContainerDriver();

  it('refuses a missing engine binary with one line saying what to install', async () => {
    const ctx = context(spec(), 'mig_noengine');
    const savedPath = process.env.PATH;
    process.env.PATH = base; // no podman, no docker here
    try {
      const noDefault = { ...ctx, driver: { type: 'container', stopTimeout: 1_000 } as ContainerDriverSpec };
      const error = await driver.provision(noDefault, 'green', call).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PermanentDriverError);
      expect((error as Error).message).toBe(
        'driver ctr: no container engine found: neither podman nor docker is on the PATH; install one, or set drivers.ctr.engine',
      );
    } finally {
      process.env.PATH = savedPath;
    }
  });
});

// The driver's cases run at once (each on containers of a slot of its own; most of their time is
// podman's), and beside the migration through the CLI below (an environment of its own).
describe.concurrent('container driver (real podman)', () => {
  const driver = createContainerDriver();

  it.concurrent('provisions replicas named and labelled per slot, serving on published loopback ports; retire removes them, twice', async () => {
    const ctx = context(spec({ replicas: 2 }), 'mig_one');
    const slot = await driver.provision(ctx, 'green', call);
    expect(slot.addresses).toHaveLength(2);
    for (const address of slot.addresses) {
      expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(await getWhenUp(address, '/version')).toBe('1.0.0 build-one');
    }
    const containers = await containersOf('mig_one');
    expect(containers.map((c) => c.name)).toEqual([
      `cutover-${environment()}-web-mig_one-0`,
      `cutover-${environment()}-web-mig_one-1`,
    ]);
    expect(containers[0]?.labels).toMatchObject({
      'dev.cutover.environment': environment(),
      'dev.cutover.component': 'web',
      'dev.cutover.slot': 'mig_one',
      'dev.cutover.version': '1.0.0',
      'dev.cutover.migration': 'mig_one',
    });
    expect((await driver.observe?.(ctx, slot, call))?.map((r) => r.state)).toEqual(['running', 'running']);

    await driver.retire(ctx, slot, call);
    expect(await containersOf('mig_one')).toEqual([]);
    await driver.retire(ctx, slot, call);
  }, 60_000);

  it.concurrent('a chosen host port another program takes before podman binds it: the replica starts on other ports', async () => {
    // Deterministic: the first choice is a port this test listens on (in a run, another test's
    // process took one between the pool's choice and podman's bind: ci84, "address already in use").
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const busy = (taken.address() as AddressInfo).port;
    class FirstChoiceTaken extends PortPool {
      private first = true;
      override async take(count: number, reserved?: ReadonlySet<number>): Promise<number[]> {
        if (!this.first) return super.take(count, reserved);
        this.first = false;
        return [busy];
      }
    }
    try {
      const ctx = context(spec(), 'mig_taken');
      const said: string[] = [];
      const slot = await createContainerDriver({ ports: new FirstChoiceTaken() }).provision(ctx, 'green', {
        ...call,
        log: (line) => said.push(line),
      });
      expect(said.join('\n')).toMatch(/address already in use; starting it again on other host ports/);
      expect(slot.addresses).toHaveLength(1);
      expect(slot.addresses[0]).not.toBe(`127.0.0.1:${busy}`);
      expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe('1.0.0 build-one');
      expect((await containersOf('mig_taken')).map((c) => c.name)).toEqual([
        `cutover-${environment()}-web-mig_taken-0`,
      ]);
      await driver.retire(ctx, slot, call);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 60_000);

  it.concurrent('provisioning the same slot again replaces the earlier attempt; another slot of the component stays', async () => {
    const blue = await driver.provision(context(spec(), 'mig_blue'), 'blue', call);
    const first = await driver.provision(context(spec(), 'mig_green'), 'green', call);
    const firstId = (
      await fx.podman(['inspect', '--format', '{{.Id}}', `cutover-${environment()}-web-mig_green-0`])
    ).stdout;
    const said: string[] = [];
    const again = await driver.provision(context(spec({ env: { VERSION: '1.0.1' } }), 'mig_green'), 'green', {
      ...call,
      log: (l) => said.push(l),
    });
    expect(said.some((l) => l.includes('an earlier attempt left'))).toBe(true);
    const againId = (
      await fx.podman(['inspect', '--format', '{{.Id}}', `cutover-${environment()}-web-mig_green-0`])
    ).stdout;
    expect(againId).not.toBe(firstId);
    expect(await containersOf('mig_green')).toHaveLength(1);
    expect(await getWhenUp(again.addresses[0] as string, '/version')).toBe('1.0.1 build-one');
    expect(await getWhenUp(blue.addresses[0] as string, '/version')).toBe('1.0.0 build-one');
    expect(first.addresses).toHaveLength(1);
    await driver.retire(context(spec(), 'mig_green'), again, call);
    await driver.retire(context(spec(), 'mig_blue'), blue, call);
  }, 60_000);

  it.concurrent('observes a container stopped or removed by hand as not running (drift)', async () => {
    const ctx = context(spec({ replicas: 2 }), 'mig_drift');
    const slot = await driver.provision(ctx, 'green', call);
    await getWhenUp(slot.addresses[1] as string, '/health');
    const [zero, one] = [0, 1].map((i) => `cutover-${environment()}-web-mig_drift-${i}`);
    expect((await fx.podman(['rm', '-f', '-t', '0', zero as string])).code).toBe(0);
    expect((await fx.podman(['stop', '-t', '5', one as string])).code).toBe(0);
    const seen = (await driver.observe?.(ctx, slot, call)) ?? [];
    expect(seen.map((r) => [r.state, r.detail])).toEqual([
      ['not_running', `container ${zero} is gone`],
      ['not_running', expect.stringMatching(new RegExp(`^container ${one} exited`))],
    ]);
    await driver.retire(ctx, slot, call);
    expect(await containersOf('mig_drift')).toEqual([]);
  }, 60_000);

  it.concurrent('fails provision permanently, quoting the log, when the image command exits; leaves nothing behind', async () => {
    const ctx = context(
      spec({ command: ['sh', '-c', 'echo "config file /etc/app.conf missing" >&2; exit 3'] }),
      'mig_broken',
    );
    const error = await driver.provision(ctx, 'green', call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toMatch(/container cutover-.*-web-mig_broken-0 exited with code 3/);
    expect((error as Error).message).toContain('config file /etc/app.conf missing');
    expect(await containersOf('mig_broken')).toEqual([]);
  }, 60_000);

  it.concurrent('refuses a missing image with pull: never, naming it and what to do', async () => {
    const missing = `localhost/${fx.prefix}-absent:9`;
    const error = await driver
      .provision(context(spec({ image: missing }), 'mig_absent'), 'green', call)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toBe(
      `component web: image ${missing} is not in driver ctr (podman)'s store and pull is never; build or pull it (podman pull ${missing}), or set pull: missing`,
    );
  }, 60_000);

  it.concurrent('drives the docker CLI too, against a remote engine given as host (the API socket of this podman)', async () => {
    const socket = await fx.dockerSocket();
    const ctx = context(spec({ replicas: 2 }), 'mig_docker');
    ctx.driver = { type: 'container', engine: 'docker', host: `unix://${socket}`, stopTimeout: 2_000 };
    const slot = await driver.provision(ctx, 'green', call);
    expect(slot.details).toMatchObject({ engine: 'docker' });
    expect(await getWhenUp(slot.addresses[1] as string, '/version')).toBe('1.0.0 build-one');
    expect((await containersOf('mig_docker')).map((c) => c.name)).toEqual([
      `cutover-${environment()}-web-mig_docker-0`,
      `cutover-${environment()}-web-mig_docker-1`,
    ]);
    expect((await driver.observe?.(ctx, slot, call))?.map((r) => r.state)).toEqual(['running', 'running']);
    await driver.retire(ctx, slot, call);
    expect(await containersOf('mig_docker')).toEqual([]);

    // podman itself as a remote client (podman --url): the service's runtime applies, none may be chosen.
    const remote = context(spec(), 'mig_remote');
    remote.driver = { type: 'container', engine: 'podman', host: `unix://${socket}`, stopTimeout: 2_000 };
    const served = await driver.provision(remote, 'green', call);
    expect(await getWhenUp(served.addresses[0] as string, '/version')).toBe('1.0.0 build-one');
    await driver.retire(remote, served, call);
    expect(await containersOf('mig_remote')).toEqual([]);
    remote.driver = { ...remote.driver, runtime: 'runc' };
    await expect(driver.provision(remote, 'green', call)).rejects.toThrow(
      `driver ctr: runtime runc cannot be chosen for a remote podman (host unix://${socket}): the remote service uses its own runtime; set it in that machine's containers.conf ([engine] runtime) and leave drivers.ctr.runtime out`,
    );
  }, 60_000);

  it.concurrent("passes env (secrets' values) to the container without putting them on the engine's command line", async () => {
    const ctx = context(spec({ env: { VERSION: { secret: 'WEB_VERSION' } } }), 'mig_secret');
    ctx.env = { VERSION: 'v-from-secret-77' };
    const slot = await driver.provision(ctx, 'green', call);
    expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe('v-from-secret-77 build-one');
    // podman records the command that created a container (inspect .Config.CreateCommand): no value there.
    const created = await fx.podman([
      'inspect',
      '--format',
      '{{.Config.CreateCommand}}',
      `cutover-${environment()}-web-mig_secret-0`,
    ]);
    expect(created.stdout).toContain('--env-file ');
    expect(created.stdout).not.toContain('v-from-secret-77');
    await driver.retire(ctx, slot, call);
  }, 60_000);

  it.concurrent("writes a reference to a dependency into the container's env, with the dependency's address", async () => {
    const ctx = context(
      spec({
        network: 'host',
        dependsOn: ['db'],
        env: { VERSION: { ref: 'db', format: 'db at http://{host}:{port}/' } },
      }),
      'mig_ref',
    );
    // What the runner gives a call of green (core/migration/dependency-slots.ts), here by hand.
    ctx.dependencies = { db: { slot: 'green', addresses: ['127.0.0.1:5999'] } };
    const slot = await driver.provision(ctx, 'green', call);
    expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe(
      'db at http://127.0.0.1:5999/ build-one',
    );
    await driver.retire(ctx, slot, call);
  }, 60_000);

  it.concurrent('on the host network gives the container its host port in PORT', async () => {
    const ctx = context(spec({ network: 'host' }), 'mig_host');
    const slot: SlotInfo = await driver.provision(ctx, 'green', call);
    expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe('1.0.0 build-one');
    await driver.retire(ctx, slot, call);
  }, 60_000);
});

describe.concurrent('a migration of container components through the router (real podman, the CLI)', () => {
  const e2e = () => `${fx.prefix}-e2e`;
  let dir: string;
  let file: string;
  let listen: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cutover-container-e2e-'));
    file = path.join(dir, 'topology.yaml');
    listen = `127.0.0.1:${await freePort()}`;
    await fx.build('e2e', 'build-one');
  }, 120_000);

  afterAll(async () => {
    killRunners(path.join(dir, '.cutover'));
    await fx.cleanup([e2e()]);
    await rm(dir, { recursive: true, force: true });
  }, 120_000);

  const topology = (version: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${e2e()} }
drivers:
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(fx.config)}, stopTimeout: 2s }
components:
  web:
    driver: ctr
    version: "${version}"
    image: ${fx.image('e2e')}
    pull: never
    replicas: 2
    ports: [{ container: 8080 }]
    env: { VERSION: "${version}" }
    volumes: [data:/data]
    health: { http: { path: /health }, interval: 100ms, deadline: 30s }
routes:
  public: { listen: "${listen}", to: web }
`;

  async function cli(args: string[]) {
    const result = await runCli(args, { cwd: dir });
    if (result.code !== 0)
      throw new Error(`cutover ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return result;
  }

  const volumes = async () =>
    (
      await fx.podman([
        'volume',
        'ls',
        '--filter',
        `label=dev.cutover.environment=${e2e()}`,
        '--format',
        '{{.Name}}',
      ])
    ).stdout
      .split('\n')
      .filter((n) => n !== '')
      .sort();

  it('migrates, replaces the component when its tag moves to a new build, and down --volumes removes it all', async () => {
    await writeFile(file, topology('1'));
    await cli(['topology', 'migrate', '-f', file, '--yes']);
    expect(await get(listen, '/version')).toBe('1 build-one');

    // A replica removed by hand is drift, seen by the plan through the containers' labels.
    const [first] = await containersOfEnvironment(e2e());
    expect((await fx.podman(['rm', '-f', '-t', '0', first as string])).code).toBe(0);
    const drifted = JSON.parse((await cli(['topology', 'plan', '-f', file, '--json'])).stdout) as {
      drift?: { name: string; reason: string }[];
    };
    expect(drifted.drift).toEqual([
      { kind: 'component', name: 'web', reason: '1 of 2 replicas not running' },
    ]);

    // Same file, same tag, a new build behind it: a change the plan shows, with both image ids.
    const rebuilt = await fx.build('e2e', 'build-two');
    const plan = JSON.parse((await cli(['topology', 'plan', '-f', file, '--json'])).stdout) as {
      resources: { name: string; change: string; changes: { path: string; after: string }[] }[];
    };
    const web = plan.resources.find((r) => r.name === 'web');
    expect(web?.change).toBe('replace');
    expect(web?.changes).toEqual([
      expect.objectContaining({
        path: 'image',
        after: `${fx.image('e2e')} (${rebuilt.slice(0, 'sha256:'.length + 12)})`,
      }),
    ]);
    await cli(['topology', 'migrate', '-f', file, '--yes']);
    expect(await get(listen, '/version')).toBe('1 build-two');
    // Blue was retired: only green's two replicas are left; the two slots' volumes stay until down --volumes.
    expect((await containersOfEnvironment(e2e())).length).toBe(2);
    expect(await volumes()).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`^cutover-${e2e()}-web-mig_[0-9a-z]+-data$`)),
      ]),
    );
    expect(await volumes()).toHaveLength(2);

    const down = await cli(['topology', 'down', '-f', file, '--yes', '--volumes']);
    expect(down.stdout).toBe(`${e2e()}: stopped 1 component and 1 route\n`);
    expect(await containersOfEnvironment(e2e())).toEqual([]);
    expect(await volumes()).toEqual([]);
  }, 120_000);
});

async function containersOfEnvironment(env: string): Promise<string[]> {
  const out = await fx.podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${env}`,
    '--format',
    '{{.Names}}',
  ]);
  return out.stdout.split('\n').filter((n) => n !== '');
}
