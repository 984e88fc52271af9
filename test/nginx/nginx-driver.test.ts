/**
 * The nginx route driver against a real nginx (Debian's package): nginx runs in the foreground as a
 * child of the test, with its own prefix, pid file and error log in a temp dir, and includes the
 * file the driver generates. Upstreams are small HTTP servers that answer their slot as the
 * examples' app does (`{"version": …}`), so bench/load.js can tell who answered.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../../core/topology/types.js';
import { configTestArgv, createNginxDriver, mainServers } from '../../engine/drivers/nginx-driver.js';
import {
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type SlotInfo,
} from '../../engine/drivers/types.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { eventually, freeListen, resourcesPerTest, send, stateDirFor } from '../router/support.js';
import { startTestLoad } from '../support/load.js';
import { runNginx } from '../support/nginx.js';

const resources = resourcesPerTest();

const loadRatePerSecond = 500;

interface LoadRecord {
  sentAt: number;
  status: number;
  version?: string;
  error?: string;
}
interface LoadResult {
  requests: number;
  failed: number;
  failures: LoadRecord[];
  records: LoadRecord[];
  versions: Record<string, number>;
}

beforeAll(() => {
  const probe = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(
      'these tests run a real nginx, and `nginx` is not on PATH: install it with ' +
        '`apt-get install -y nginx` (.ci/run does)',
    );
});

interface TestNginx {
  dir: string;
  ctx: RouteCallContext;
  errorLog: () => Promise<string>;
}

/** nginx in the foreground, with everything under a temp dir; stopped (by pid) in afterEach. */
async function startNginx(): Promise<TestNginx> {
  const dir = await stateDirFor(resources);
  await writeFile(path.join(dir, 'routes.conf'), '');
  const { argv, errorLog } = await runNginx(resources, { dir, workers: 2, errorLogLevel: 'notice' });
  const ctx: RouteCallContext = {
    environment: 'test',
    migrationId: 'mig_test',
    stateDir: StateDir.at(dir),
    baseDir: dir,
    driver: { type: 'nginx', configFile: 'routes.conf', reload: [...argv, '-s', 'reload'] },
  };
  return { dir, ctx, errorLog: () => readFile(errorLog, 'utf8') };
}

/** An upstream replica of a slot: answers `{"version": slot, "replica": name}`. */
async function startReplica(slot: string, name: string): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ version: slot, replica: name }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  resources.add(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** A blue replica that holds every request until `release()`; `received` resolves on the first. */
async function startHeldReplica(): Promise<{
  address: string;
  received: Promise<void>;
  release: () => void;
}> {
  let receive = () => {};
  let release = () => {};
  const received = new Promise<void>((resolve) => {
    receive = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = createServer((req, res) => {
    req.resume();
    receive();
    void released.then(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ version: 'blue', replica: 'held' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  resources.add(async () => {
    release();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { address: `127.0.0.1:${(server.address() as { port: number }).port}`, received, release };
}

async function startSlot(slot: 'blue' | 'green'): Promise<SlotInfo> {
  const addresses = [await startReplica(slot, `${slot}-1`), await startReplica(slot, `${slot}-2`)];
  return { component: 'web', slot, version: slot, addresses };
}

function routeSpec(listen: string, extra: Partial<Route> = {}): Route {
  return { listen, to: 'web', shift: [10, 50, 100], drain: { timeout: 10_000 }, ...extra } as Route;
}

function callOptions(log: string[] = []): DriverCallOptions {
  return { signal: new AbortController().signal, log: (line) => log.push(line) };
}

async function versionsOf(listen: string, count: number): Promise<Record<string, number>> {
  const versions: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const answer = await send(listen);
    expect(answer.status).toBe(200);
    const version = (JSON.parse(answer.body) as { version: string }).version;
    versions[version] = (versions[version] ?? 0) + 1;
  }
  return versions;
}

/** Versions of the requests sent after `afterMs` (load time), and how many failed overall. */
function answeredAfter(result: LoadResult, afterMs: number): Record<string, number> {
  const versions: Record<string, number> = {};
  for (const r of result.records)
    if (r.sentAt >= afterMs && !r.error) versions[r.version ?? '?'] = (versions[r.version ?? '?'] ?? 0) + 1;
  return versions;
}

describe('nginx route driver (real nginx)', () => {
  it('serves 100% blue, with a generated file and sidecar', async () => {
    const nginx = await startNginx();
    const blue = await startSlot('blue');
    const listen = await freeListen();
    const log: string[] = [];
    await createNginxDriver().apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(listen), blue, green: null, greenPercent: 0 },
      callOptions(log),
    );

    expect(await versionsOf(listen, 20)).toEqual({ blue: 20 });
    expect((await send(listen)).slot).toBe('blue');
    const config = await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8');
    expect(config).toMatch(/^# Generated by cutover/);
    expect(config).toContain('upstream cutover_test_www {');
    expect(config).toContain(`server ${blue.addresses[0]} weight=1; # blue`);
    const sidecar = JSON.parse(await readFile(path.join(nginx.dir, 'routes.conf.cutover.json'), 'utf8'));
    expect(Object.keys(sidecar.routes)).toEqual(['test/www']);
    expect(log.at(-1)).toMatch(/100% blue, 0% green, live/);
  });

  it('loses no request while traffic moves 10% → 50% → 100% green under load', async () => {
    const nginx = await startNginx();
    const [blue, green] = [await startSlot('blue'), await startSlot('green')];
    const listen = await freeListen();
    const driver = createNginxDriver();
    const split = (greenPercent: number, slots = { blue, green }) =>
      driver.apply(
        nginx.ctx,
        { route: 'www', spec: routeSpec(listen), ...slots, greenPercent },
        callOptions(),
      );
    await split(0, { blue, green: null } as never);

    const load = startTestLoad({ url: `http://${listen}/`, rate: loadRatePerSecond });
    const loadStarted = performance.now();
    await sleep(500);
    for (const percent of [10, 50, 100]) {
      await split(percent);
      await sleep(700);
    }
    const allGreenAt = performance.now() - loadStarted;
    await sleep(700);
    const result = (await load.stop()) as LoadResult;

    expect(result.failures).toEqual([]);
    expect(result.failed).toBe(0);
    expect(result.requests).toBeGreaterThan(loadRatePerSecond * 3);
    expect(result.versions.blue).toBeGreaterThan(0);
    expect(result.versions.green).toBeGreaterThan(0);
    // Every request sent after the 100% apply returned went to green.
    expect(answeredAfter(result, allGreenAt)).toEqual({ green: expect.any(Number) });
  });

  it('drains blue: waits until the request nginx still carries to blue is answered', async () => {
    const nginx = await startNginx();
    const held = await startHeldReplica();
    const blue: SlotInfo = { component: 'web', slot: 'blue', version: 'blue', addresses: [held.address] };
    const green = await startSlot('green');
    const listen = await freeListen();
    const driver = createNginxDriver();
    const spec = routeSpec(listen);
    await driver.apply(nginx.ctx, { route: 'www', spec, blue, green: null, greenPercent: 0 }, callOptions());
    const answer = send(listen);
    await held.received;
    await driver.apply(nginx.ctx, { route: 'www', spec, blue, green, greenPercent: 100 }, callOptions());

    // Traffic is on green, but a worker of the old configuration still carries blue's request.
    const early = await driver.drain(nginx.ctx, 'www', blue.addresses, 300, callOptions());
    expect(early).toMatchObject({ drained: false, unit: 'old nginx workers' });
    expect(early?.inFlight).toBeGreaterThanOrEqual(1);
    held.release();
    const drained = await driver.drain(nginx.ctx, 'www', blue.addresses, 10_000, callOptions());
    expect(drained).toEqual({ drained: true, inFlight: 0, unit: 'old nginx workers' });
    const answered = await answer;
    expect(answered.status).toBe(200);
    expect(JSON.parse(answered.body)).toMatchObject({ version: 'blue' });
  });

  it('rolls back to blue under load without losing a request', async () => {
    const nginx = await startNginx();
    const [blue, green] = [await startSlot('blue'), await startSlot('green')];
    const listen = await freeListen();
    const driver = createNginxDriver();
    const apply = (greenPercent: number, withGreen = true) =>
      driver.apply(
        nginx.ctx,
        { route: 'www', spec: routeSpec(listen), blue, green: withGreen ? green : null, greenPercent },
        callOptions(),
      );
    await apply(0, false);

    const load = startTestLoad({ url: `http://${listen}/`, rate: loadRatePerSecond });
    const loadStarted = performance.now();
    await sleep(500);
    await apply(10);
    await sleep(500);
    await apply(50);
    await sleep(500);
    await apply(0, false); // the undo: everything on blue, green out of the route
    const rolledBackAt = performance.now() - loadStarted;
    await sleep(1_000);
    const result = (await load.stop()) as LoadResult;

    expect(result.failures).toEqual([]);
    expect(result.failed).toBe(0);
    expect(result.versions.green).toBeGreaterThan(0);
    expect(answeredAfter(result, rolledBackAt)).toEqual({ blue: expect.any(Number) });
  });

  it('serves green on the preview listener and 503 where a route has no replica', async () => {
    const nginx = await startNginx();
    const [blue, green] = [await startSlot('blue'), await startSlot('green')];
    const [listen, preview] = [await freeListen(), await freeListen()];
    const driver = createNginxDriver();
    await driver.apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(listen, { preview }), blue, green, greenPercent: 0 },
      callOptions(),
    );
    expect(await versionsOf(listen, 10)).toEqual({ blue: 10 });
    expect(await versionsOf(preview, 10)).toEqual({ green: 10 });

    const empty = await freeListen();
    await driver.apply(
      nginx.ctx,
      { route: 'empty', spec: routeSpec(empty), blue: null, green: null, greenPercent: 0 },
      callOptions(),
    );
    expect((await send(empty)).status).toBe(503);
    expect(await versionsOf(listen, 4)).toEqual({ blue: 4 }); // the other route of the file is intact
  });

  it('answers 504 for an upstream silent longer than the route upstreamTimeout (proxy_read_timeout)', async () => {
    const nginx = await startNginx();
    const silent = createServer(() => undefined); // accepts, never answers
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    resources.add(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const address = `127.0.0.1:${(silent.address() as { port: number }).port}`;
    const listen = await freeListen();
    const blue: SlotInfo = { component: 'web', slot: 'blue', version: 'blue', addresses: [address] };
    await createNginxDriver().apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(listen, { upstreamTimeout: 500 }), blue, green: null, greenPercent: 0 },
      callOptions(),
    );
    expect(await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8')).toContain(
      'proxy_read_timeout 500ms;',
    );
    expect((await send(listen)).status).toBe(504);
  });

  it('closes on a client silent mid-body longer than the route bodyTimeout (client_body_timeout: nginx logs 408, sends nothing)', async () => {
    const nginx = await startNginx();
    let requests = 0;
    const app = createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    app.listen(0, '127.0.0.1');
    await once(app, 'listening');
    resources.add(() => {
      app.closeAllConnections();
      app.close();
    });
    const address = `127.0.0.1:${(app.address() as { port: number }).port}`;
    const listen = await freeListen();
    const blue: SlotInfo = { component: 'web', slot: 'blue', version: 'blue', addresses: [address] };
    await createNginxDriver().apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(listen, { bodyTimeout: 500 }), blue, green: null, greenPercent: 0 },
      callOptions(),
    );
    expect(await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8')).toContain(
      'client_body_timeout 500ms;',
    );
    const [host, port] = listen.split(':') as [string, string];
    const client = connect(Number(port), host);
    resources.add(() => {
      client.destroy();
    });
    let received = '';
    client.on('data', (data: Buffer) => {
      received += data.toString('latin1');
    });
    client.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc');
    let closed = false;
    client.on('close', () => {
      closed = true;
    });
    await eventually(() => closed, 5_000);
    expect([received, requests]).toEqual(['', 0]);
  });

  it('sets several routes in one call: one file, one reload, both live in the same generation', async () => {
    const nginx = await startNginx();
    const [blue, green] = [await startSlot('blue'), await startSlot('green')];
    const [one, two] = [await freeListen(), await freeListen()];
    // The reload command, wrapped to record each time it runs (the config test runs through it too).
    const calls = path.join(nginx.dir, 'reload-calls');
    const reload = (nginx.ctx.driver as { reload: string[] }).reload;
    const wrapped = ['sh', '-c', `echo "$*" >> ${calls}; exec "$@"`, 'sh', ...reload];
    const ctx: RouteCallContext = {
      ...nginx.ctx,
      driver: { type: 'nginx', configFile: 'routes.conf', reload: wrapped },
    };
    const log: string[] = [];
    const states = (greenPercent: number) =>
      [
        ['one', one],
        ['two', two],
      ].map(([route, listen]) => ({
        route: route as string,
        spec: routeSpec(listen as string),
        blue,
        green,
        greenPercent,
      }));
    const driver = createNginxDriver();
    await driver.applyAll?.(ctx, states(50), callOptions(log));

    const reloads = (await readFile(calls, 'utf8')).split('\n').filter((line) => line.endsWith('-s reload'));
    expect(reloads).toHaveLength(1);
    const live = log.filter((line) => /live \(generation \w+\)/.test(line));
    expect(live.map((line) => line.split(':')[0])).toEqual(['route one', 'route two']);
    const generations = live.map((line) => /live \(generation (\w+)\)/.exec(line)?.[1]);
    expect(generations[1]).toBe(generations[0]);
    // Both at 50 %: each answers from blue and from green (nginx's workers each keep their own rotation).
    for (const listen of [one, two])
      expect(Object.keys(await versionsOf(listen, 12)).sort()).toEqual(['blue', 'green']);
  });

  it('removes a route: its listener closes, the other routes of the file stay', async () => {
    const nginx = await startNginx();
    const blue = await startSlot('blue');
    const [one, two] = [await freeListen(), await freeListen()];
    const driver = createNginxDriver();
    for (const [route, listen] of [
      ['one', one],
      ['two', two],
    ] as const)
      await driver.apply(
        nginx.ctx,
        { route, spec: routeSpec(listen), blue, green: null, greenPercent: 0 },
        callOptions(),
      );

    await driver.remove(nginx.ctx, 'one', callOptions());
    await expect(send(one)).rejects.toThrow(/ECONNREFUSED/);
    expect(await versionsOf(two, 4)).toEqual({ blue: 4 });
    const config = await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8');
    expect(config).not.toContain('cutover_test_one');
    // Idempotent: removing it again succeeds.
    await driver.remove(nginx.ctx, 'one', callOptions());
  });

  it('refuses a configuration nginx rejects, puts the previous file back and keeps serving', async () => {
    const nginx = await startNginx();
    const blue = await startSlot('blue');
    const listen = await freeListen();
    const driver = createNginxDriver();
    await driver.apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(listen), blue, green: null, greenPercent: 0 },
      callOptions(),
    );
    const before = await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8');

    const bad = driver.apply(
      nginx.ctx,
      { route: 'bad', spec: routeSpec('no-such-host.invalid:8080'), blue, green: null, greenPercent: 0 },
      callOptions(),
    );
    await expect(bad).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(bad).rejects.toThrow(/nginx rejected .*\n.*no-such-host\.invalid/);
    expect(await readFile(path.join(nginx.dir, 'routes.conf'), 'utf8')).toBe(before);
    expect(await versionsOf(listen, 4)).toEqual({ blue: 4 });
  });

  it('fails when nginx signalled a reload it then did not apply (listen port taken)', async () => {
    const nginx = await startNginx();
    const blue = await startSlot('blue');
    const taken = await startReplica('squatter', 'squatter'); // holds the port nginx wants
    const driver = createNginxDriver({ liveTimeoutMs: 1_000 });
    const apply = driver.apply(
      nginx.ctx,
      { route: 'www', spec: routeSpec(taken), blue, green: null, greenPercent: 0 },
      callOptions(),
    );
    await expect(apply).rejects.toThrow(/did not put the new configuration live/);
    await eventually(async () => /Address already in use/.test(await nginx.errorLog()));
  });
});

describe('nginx driver, without nginx', () => {
  it('spreads each slot’s share over its replicas as the smallest exact integers', () => {
    const weights = (blue: number, green: number, greenPercent: number) =>
      mainServers({
        blue: Array.from({ length: blue }, (_, i) => `b${i}`),
        green: Array.from({ length: green }, (_, i) => `g${i}`),
        greenPercent,
      }).map((s) => `${s.address}=${s.weight}`);
    expect(weights(2, 2, 10)).toEqual(['b0=9', 'b1=9', 'g0=1', 'g1=1']);
    expect(weights(2, 3, 10)).toEqual(['b0=27', 'b1=27', 'g0=2', 'g1=2', 'g2=2']);
    expect(weights(2, 2, 50)).toEqual(['b0=1', 'b1=1', 'g0=1', 'g1=1']);
    expect(weights(2, 2, 100)).toEqual(['g0=1', 'g1=1']);
    expect(weights(2, 2, 0)).toEqual(['b0=1', 'b1=1']);
    // 100% green before green has replicas: what exists serves.
    expect(weights(2, 0, 100)).toEqual(['b0=1', 'b1=1']);
    expect(weights(0, 0, 0)).toEqual([]);
  });

  it("tests the configuration with the reload command's own binary and arguments", () => {
    expect(configTestArgv(['nginx', '-s', 'reload'])).toEqual(['nginx', '-t', '-q']);
    expect(configTestArgv(['/usr/sbin/nginx', '-p', '/srv', '-s', 'reload', '-g', 'pid x;'])).toEqual([
      '/usr/sbin/nginx',
      '-p',
      '/srv',
      '-g',
      'pid x;',
      '-t',
      '-q',
    ]);
    expect(configTestArgv(['systemctl', 'reload', 'nginx'])).toBeNull();
  });
});
