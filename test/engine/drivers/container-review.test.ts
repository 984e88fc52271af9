/**
 * The container driver's defects found in review, each against the real Podman: an engine that
 * cannot be reached is never "gone", the component's env never reaches the engine's CLI or its
 * command line, and a `run` that fails after creating its container leaves nothing behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import type { Component, ContainerDriverSpec } from '../../../core/topology/types.js';
import { createContainerDriver } from '../../../engine/drivers/container-driver.js';
import { imageDigestsFor } from '../../../engine/drivers/container-images.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { runCli } from '../../support/cli.js';
import { killRunners } from '../../support/migrations.js';
import { type PodmanFixture, podmanFixture } from '../../support/podman.js';

let fx: PodmanFixture;
let base: string;
const environment = () => `${fx.prefix}-rev`;

beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'build-one');
  base = await mkdtemp(path.join(tmpdir(), 'cutover-container-review-'));
}, 120_000);

afterAll(async () => {
  // Every describe's environment: the CLI ones leave their containers to this one cleanup.
  await fx?.cleanup([environment(), `${fx.prefix}-cli`, `${fx.prefix}-tag`]);
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

function context(component: Component, migrationId: string): ComponentCallContext {
  const driver: ContainerDriverSpec = { ...fx.driver };
  return {
    environment: environment(),
    migrationId,
    component: 'web',
    spec: component,
    driver,
    baseDir: base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
  };
}

const call: DriverCallOptions = { signal: new AbortController().signal, log: () => undefined };

/** Fetches until the replica answers: httpd binds just after the container reports running. */
async function getWhenUp(address: string, pathname: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const response = await fetch(`http://${address}${pathname}`, { signal: AbortSignal.timeout(5_000) });
      return (await response.text()).trim();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function namesOf(slotId: string): Promise<string[]> {
  const out = await fx.podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${environment()}`,
    '--filter',
    `label=dev.cutover.slot=${slotId}`,
    '--format',
    '{{.Names}}',
  ]);
  return out.stdout.split('\n').filter((n) => n !== '');
}

describe('container driver, review fixes (real podman)', () => {
  const driver = createContainerDriver();

  it('observe through an engine nobody answers fails with the engine\'s line (unknown), never "gone"', async () => {
    const ctx = context(spec(), 'mig_unreach');
    const slot = await driver.provision(ctx, 'green', call);
    try {
      const away = context(spec(), 'mig_unreach');
      const socket = path.join(fx.dir, 'nothing.sock');
      away.driver = { type: 'container', engine: 'podman', host: `unix://${socket}`, stopTimeout: 1_000 };
      // observe-layout turns a rejection into `unknown` with this detail; unknown is never drift.
      await expect(driver.observe?.(away, slot, call)).rejects.toThrow(
        new RegExp(`driver ctr \\(podman\\): .*${socket.replace(/[.]/g, '\\.')}`),
      );
      // The containers are still there and still observed as running through the working engine.
      expect((await driver.observe?.(ctx, slot, call))?.map((r) => r.state)).toEqual(['running']);
    } finally {
      await driver.retire(ctx, slot, call);
    }
  }, 60_000);

  it("passes the component's env in a file the engine reads and removes: no value on its command line, none changes the engine", async () => {
    const ctx = context(spec(), 'mig_envfile');
    ctx.env = {
      VERSION: 'a=b  c',
      // Variables the engine's CLI reads itself: as component env they reach only the container.
      CONTAINER_CONNECTION: 'prod',
      CONTAINER_HOST: 'tcp://127.0.0.1:1',
      HTTP_PROXY: 'http://user:proxy-secret-91@127.0.0.1:1',
    };
    const slot = await driver.provision(ctx, 'green', call);
    try {
      expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe('a=b  c build-one');
      const name = `cutover-${environment()}-web-mig_envfile-0`;
      const inside = await fx.podman(['exec', name, 'env']);
      expect(inside.stdout).toContain('CONTAINER_CONNECTION=prod\n');
      expect(inside.stdout).toContain('HTTP_PROXY=http://user:proxy-secret-91@127.0.0.1:1\n');
      // podman records the command that created the container: no value of the component's env there.
      const created = (await fx.podman(['inspect', '--format', '{{json .Config.CreateCommand}}', name]))
        .stdout;
      const argv = JSON.parse(created) as string[];
      expect(argv.join(' ')).not.toContain('proxy-secret-91');
      expect(argv.join(' ')).not.toContain('a=b');
      const file = argv[argv.indexOf('--env-file') + 1] as string;
      expect(argv).toContain('--env-file');
      expect(existsSync(file)).toBe(false);
    } finally {
      await driver.retire(ctx, slot, call);
    }
  }, 60_000);

  it('refuses a value with a line break, naming the variable (the env file cannot carry it)', async () => {
    const ctx = context(spec(), 'mig_newline');
    ctx.env = { VERSION: '1', CERT: 'line one\nline two' };
    const error = await driver.provision(ctx, 'green', call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toMatch(/^component web: env\.CERT has a line break/);
    expect(await namesOf('mig_newline')).toEqual([]);
  }, 60_000);

  it('a run that fails after creating its container (no such command) leaves no container behind', async () => {
    const ctx = context(spec({ command: ['/no/such/program'] }), 'mig_created');
    const error = await driver.provision(ctx, 'green', call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toMatch(/run of cutover-.*-web-mig_created-0 .* failed/);
    expect(await namesOf('mig_created')).toEqual([]);
  }, 60_000);
});

describe('the image the plan resolved is the one that runs (real podman)', () => {
  const driver = createContainerDriver();

  it('provision runs the planned image id even when the tag moved since; refuses one no longer present', async () => {
    const planned = await fx.build('moving', 'build-one');
    await fx.build('moving', 'build-two'); // the tag moves; the planned build stays, untagged
    const ctx = context(spec({ image: fx.image('moving'), pull: 'missing' }), 'mig_planned');
    ctx.plannedImageId = planned;
    const slot = await driver.provision(ctx, 'green', call);
    try {
      expect(await getWhenUp(slot.addresses[0] as string, '/version')).toBe('1.0.0 build-one');
      expect(slot.details).toMatchObject({ imageId: planned });
    } finally {
      await driver.retire(ctx, slot, call);
    }

    const gone = context(spec({ image: fx.image('moving'), pull: 'missing' }), 'mig_gone');
    gone.plannedImageId = `sha256:${'0'.repeat(64)}`;
    const error = await driver.provision(gone, 'green', call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toBe(
      `component web: image ${fx.image('moving')} was sha256:000000000000 when planned, which driver ctr (podman) no longer has (the tag moved since the plan); plan again and review the new image`,
    );
    expect(await namesOf('mig_gone')).toEqual([]);
  }, 60_000);

  it('planning resolves from the local store and never pulls: pull: always is left unknown (pulled at provision)', async () => {
    const id = await fx.build('local', 'build-one');
    const topology = (pull: string) =>
      loadTopology(
        `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${environment()} }
drivers:
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(fx.config)} }
components:
  web: { driver: ctr, version: "1", image: ${fx.image('local')}, pull: ${pull} }
  absent: { driver: ctr, version: "1", image: "localhost/${fx.prefix}-absent:1", pull: ${pull} }
`,
        { file: 'topology.yaml' },
      );
    const missing = topology('missing');
    const always = topology('always');
    if (!missing.ok || !always.ok) throw new Error('topology did not load');
    expect(await imageDigestsFor(missing.topology, base)).toEqual({ web: id });
    expect(await imageDigestsFor(always.topology, base)).toEqual({});
  }, 60_000);
});

describe('container components through the CLI when the engine goes away, or the tag moves (real podman)', () => {
  const e2e = () => `${fx.prefix}-cli`;
  let dir: string;
  let service: ChildProcess | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cutover-container-review-cli-'));
  });

  afterAll(async () => {
    if (service && service.exitCode === null) {
      const gone = new Promise((resolve) => service?.once('exit', resolve));
      service.kill('SIGTERM');
      await gone;
    }
    killRunners(path.join(dir, '.cutover'));
    await rm(dir, { recursive: true, force: true });
  }, 120_000);

  async function cli(args: string[]) {
    const result = await runCli(args, { cwd: dir });
    if (result.code !== 0)
      throw new Error(`cutover ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return result;
  }

  it('an engine that stops answering is unknown in the plan, not drift that replaces the component', async () => {
    // This podman served on a socket of the test's own, so the test can take the engine away.
    const socket = path.join(dir, 'engine.sock');
    service = spawn('podman', ['--runtime', 'runc', 'system', 'service', '--time=0', `unix://${socket}`], {
      env: { ...process.env, CONTAINERS_CONF: fx.config },
      stdio: 'ignore',
    });
    const deadline = Date.now() + 20_000;
    while (!existsSync(socket)) {
      if (Date.now() > deadline || service.exitCode !== null)
        throw new Error('podman system service did not start');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const file = path.join(dir, 'topology.yaml');
    await writeFile(
      file,
      `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${e2e()} }
drivers:
  ctr: { type: container, engine: podman, host: "unix://${socket}", stopTimeout: 2s }
components:
  web:
    driver: ctr
    version: "1"
    image: ${fx.image('1')}
    pull: never
    ports: [{ container: 8080 }]
    env: { VERSION: "1" }
    health: { http: { path: /health }, interval: 100ms, deadline: 30s }
`,
    );
    await cli(['topology', 'migrate', '-f', file, '--yes']);
    const gone = new Promise((resolve) => service?.once('exit', resolve));
    service.kill('SIGTERM');
    await gone;
    const plan = JSON.parse((await cli(['topology', 'plan', '-f', file, '--json'])).stdout) as {
      drift?: unknown[];
      actions: unknown[];
    };
    expect(plan.drift).toBeUndefined();
    expect(plan.actions).toEqual([]);
  }, 120_000);
});

describe('a tag moved during a migration (real podman, the CLI)', () => {
  const e2e = () => `${fx.prefix}-tag`;
  let dir: string;
  let file: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cutover-container-review-tag-'));
    file = path.join(dir, 'topology.yaml');
  });

  afterAll(async () => {
    await runCli(['topology', 'down', '-f', file, '--yes'], { cwd: dir }).catch(() => undefined);
    killRunners(path.join(dir, '.cutover'));
    await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('runs the build the plan resolved, and the next plan shows the newer one as a change', async () => {
    const planned = await fx.build('race', 'build-one');
    const newer = await fx.build('race-next', 'build-two');
    // web waits for `retag`, an exec component whose provision moves web's tag to the newer build:
    // after the migration resolved it, before web's provision.
    await mkdir(path.join(dir, 'retag'));
    await writeFile(
      path.join(dir, 'retag', 'provision'),
      `#!/bin/sh\nexec podman --runtime runc tag ${fx.image('race-next')} ${fx.image('race')} >&2\n`,
      { mode: 0o755 },
    );
    await writeFile(
      file,
      `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${e2e()} }
drivers:
  infra: { type: exec, dir: ./retag }
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(fx.config)}, stopTimeout: 2s }
components:
  retag:
    driver: infra
    version: "1"
    env: { CONTAINERS_CONF: ${JSON.stringify(fx.config)} }
  web:
    driver: ctr
    version: "1"
    image: ${fx.image('race')}
    pull: never
    dependsOn: [retag]
    ports: [{ container: 8080 }]
    env: { VERSION: "1" }
    health: { http: { path: /health }, interval: 100ms, deadline: 30s }
`,
    );
    const migrated = await runCli(['topology', 'migrate', '-f', file, '--yes'], { cwd: dir });
    expect(migrated.code, migrated.stderr).toBe(0);
    const ran = await fx.podman([
      'ps',
      '--filter',
      `label=dev.cutover.environment=${e2e()}`,
      '--format',
      '{{.ImageID}}',
    ]);
    const shown = 'sha256:'.length + 12;
    expect(`sha256:${ran.stdout.trim()}`.slice(0, shown)).toBe(planned.slice(0, shown));
    // The tag names the newer build now: a change to review, not something already live.
    const plan = JSON.parse(
      (await runCli(['topology', 'plan', '-f', file, '--json'], { cwd: dir })).stdout,
    ) as { resources: { name: string; change: string; changes: { path: string; after: string }[] }[] };
    const web = plan.resources.find((r) => r.name === 'web');
    expect(web?.change).toBe('replace');
    expect(web?.changes).toEqual([
      expect.objectContaining({
        path: 'image',
        after: `${fx.image('race')} (${newer.slice(0, 'sha256:'.length + 12)})`,
      }),
    ]);
  }, 120_000);
});
