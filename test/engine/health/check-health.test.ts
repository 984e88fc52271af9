import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Health } from '../../../core/topology/types.js';
import {
  HealthGateFailedError,
  type WaitHealthyOptions,
  waitHealthy,
} from '../../../engine/health/check-health.js';
import { freePort } from '../../support/migrations.js';
import { alive } from '../../support/processes.js';
import { resourcesPerTest } from '../../support/resources.js';
import { waitUntil } from '../../support/wait.js';

const resources = resourcesPerTest();

function health(overrides: Partial<Health>): Health {
  return {
    interval: 50,
    timeout: 1000,
    successThreshold: 1,
    failureThreshold: 3,
    deadline: 5000,
    ...overrides,
  };
}

/** A real HTTP server on 127.0.0.1; the handler gets the 1-based request number. */
async function serve(
  handler: (n: number, res: http.ServerResponse) => void,
): Promise<{ address: string; requests: () => number }> {
  let n = 0;
  const server = http.createServer((_req, res) => handler(++n, res));
  return { address: await resources.listen(server), requests: () => n };
}

/** An address where nothing listens: a port that was free a moment ago. */
async function closedAddress(): Promise<string> {
  return `127.0.0.1:${await freePort()}`;
}

function tempDir(): Promise<string> {
  return resources.tempDir('cutover-health-');
}

function gate(overrides: Partial<WaitHealthyOptions>): { options: WaitHealthyOptions; lines: string[] } {
  const lines: string[] = [];
  const options: WaitHealthyOptions = {
    health: undefined,
    addresses: [],
    cwd: process.cwd(),
    deadlineMs: 5000,
    signal: new AbortController().signal,
    log: (line) => lines.push(line),
    ...overrides,
  };
  return { options, lines };
}

describe('waitHealthy', () => {
  it('resolves at once when no health check is configured', async () => {
    const { options, lines } = gate({});
    await waitHealthy(options);
    expect(lines).toEqual(['no health check configured']);
  });

  it('passes when every replica answers the expected status and body', async () => {
    const a = await serve((_n, res) => res.end('ok: a'));
    const b = await serve((_n, res) => res.end('ok: b'));
    const { options, lines } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200, bodyMatch: '^ok' } }),
      addresses: [a.address, b.address],
    });
    await waitHealthy(options);
    expect(a.requests()).toBe(1);
    expect(b.requests()).toBe(1);
    expect(lines.at(-1)).toBe('health: gate passed (2 replicas healthy)');
  });

  it('fails after failureThreshold answers with the wrong status, naming the replica', async () => {
    const server = await serve((_n, res) => {
      res.statusCode = 503;
      res.end('busy');
    });
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 } }),
      addresses: [server.address],
    });
    const error = await waitHealthy(options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HealthGateFailedError);
    expect((error as Error).message).toBe(`${server.address} GET /healthz → 503 (3 failures in a row)`);
    expect(server.requests()).toBe(3);
  });

  it('fails when the body does not match, quoting the body', async () => {
    const server = await serve((_n, res) => res.end('starting'));
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200, bodyMatch: '^ok' } }),
      addresses: [server.address],
    });
    await expect(waitHealthy(options)).rejects.toThrow(
      `${server.address} GET /healthz → 200, body "starting" does not match /^ok/ (3 failures in a row)`,
    );
  });

  it('needs successThreshold successes in a row: a failure starts the count again', async () => {
    const answers = [200, 200, 503, 200, 200, 200];
    const server = await serve((n, res) => {
      res.statusCode = answers[n - 1] ?? 200;
      res.end();
    });
    const { options } = gate({
      health: health({ http: { path: '/', expectStatus: 200 }, successThreshold: 3 }),
      addresses: [server.address],
    });
    await waitHealthy(options);
    expect(server.requests()).toBe(6);
  });

  it('fails when the deadline passes while nothing listens', async () => {
    const address = await closedAddress();
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 }, failureThreshold: 100 }),
      addresses: [address],
      deadlineMs: 400,
    });
    const started = Date.now();
    await expect(waitHealthy(options)).rejects.toThrow(
      new HealthGateFailedError(`deadline 400ms passed: ${address} not healthy (last: connection refused)`),
    );
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('does not count connection refused in the first 10% of the deadline, and counts it after', async () => {
    const address = await closedAddress();
    const { options, lines } = gate({
      health: health({ tcp: {}, interval: 100, failureThreshold: 2 }),
      addresses: [address],
      deadlineMs: 3000,
    });
    const started = Date.now();
    await expect(waitHealthy(options)).rejects.toThrow(
      `${address} TCP connect → connection refused (2 failures in a row)`,
    );
    // Rounds at 0, 100, 200 ms are within the 300 ms grace; the two after it fail the gate.
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(lines).toContain(`health: ${address} TCP connect → connection refused (not counted: starting up)`);
  });

  it('reports the hanging probe when the deadline passes first', async () => {
    const server = await serve(() => {
      // Never answers.
    });
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 }, timeout: 10_000 }),
      addresses: [server.address],
      deadlineMs: 200,
    });
    await expect(waitHealthy(options)).rejects.toThrow(
      `deadline 200ms passed: ${server.address} not healthy (last: no probe finished)`,
    );
  });

  it('times out a probe after health.timeout', async () => {
    const server = await serve(() => {
      // Never answers.
    });
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 }, timeout: 100, failureThreshold: 1 }),
      addresses: [server.address],
    });
    await expect(waitHealthy(options)).rejects.toThrow(
      `${server.address} GET /healthz → no answer within 100ms (1 failure in a row)`,
    );
  });

  it('refuses http and tcp probes without addresses', async () => {
    const { options } = gate({ health: health({ tcp: {} }), addresses: [] });
    await expect(waitHealthy(options)).rejects.toThrow(
      new HealthGateFailedError('no address to probe: the driver reported none for this slot'),
    );
  });

  it('passes a tcp probe when every replica accepts a connection', async () => {
    const server = net.createServer((socket) => socket.end());
    const address = await resources.listen(server);
    const { options, lines } = gate({ health: health({ tcp: {} }), addresses: [address] });
    await waitHealthy(options);
    expect(lines).toContain(`health: ${address} healthy`);
  });

  it('reads a driver address as the router does: `http://host:port/` is probed, not refused', async () => {
    // The router takes an upstream a driver printed as http://127.0.0.1:port/; the gate before it
    // must take the same address (one host:port parser, core/host-port.ts).
    const server = await serve((_n, res) => res.end('ok'));
    const printed = `http://${server.address}/`;
    const { options, lines } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 } }),
      addresses: [printed],
    });
    await waitHealthy(options);
    expect(server.requests()).toBe(1);
    expect(lines).toContain(`health: ${printed} healthy`);
  });

  it('refuses an address that is not host:port, naming it', async () => {
    const { options } = gate({ health: health({ tcp: {} }), addresses: ['127.0.0.1'] });
    await expect(waitHealthy(options)).rejects.toThrow(
      'cannot probe "127.0.0.1": the driver reported it, but it is not host:port',
    );
  });

  it('runs a command probe once per round in cwd, with the addresses in its environment', async () => {
    const dir = await tempDir();
    const script = path.join(dir, 'check.sh');
    await writeFile(
      script,
      '#!/bin/sh\necho "$CUTOVER_ADDRESS $CUTOVER_ADDRESSES $DEMO" >> probes.log\n[ "$CUTOVER_ADDRESS" = 10.0.0.1:80 ]\n',
      { mode: 0o755 },
    );
    const { options } = gate({
      health: health({ command: ['./check.sh'] }),
      addresses: ['10.0.0.1:80', '10.0.0.2:80'],
      env: { DEMO: 'yes' },
      cwd: dir,
    });
    await waitHealthy(options);
    expect(await readFile(path.join(dir, 'probes.log'), 'utf8')).toBe(
      '10.0.0.1:80 10.0.0.1:80,10.0.0.2:80 yes\n',
    );
  });

  it('fails a command probe that exits non-zero, quoting its last stderr line', async () => {
    const command = [process.execPath, '-e', 'console.error("db not ready"); process.exit(1)'];
    const { options } = gate({ health: health({ command }), addresses: [] });
    await expect(waitHealthy(options)).rejects.toThrow(
      `command ${command.join(' ')} → exit 1: db not ready (3 failures in a row)`,
    );
  });

  it('rejects promptly with an AbortError when aborted, closing its connections', async () => {
    let closed = 0;
    const server = await serve((_n, res) => {
      res.on('close', () => closed++);
    });
    const controller = new AbortController();
    const { options } = gate({
      health: health({ http: { path: '/healthz', expectStatus: 200 }, timeout: 10_000 }),
      addresses: [server.address],
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const error = await waitHealthy(options).catch((e: unknown) => e);
    expect((error as Error).name).toBe('AbortError');
    expect(Date.now() - started).toBeLessThan(400);
    expect(await waitUntil(() => closed === 1, 1000)).toBe(true);
  });

  it('kills a running command probe when aborted', async () => {
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    const controller = new AbortController();
    const { options } = gate({
      health: health({ command: ['sh', '-c', `echo $$ > ${pidFile}; exec sleep 30`], timeout: 60_000 }),
      signal: controller.signal,
      cwd: dir,
    });
    const pending = waitHealthy(options).catch((e: unknown) => e);
    await waitUntil(() => Boolean(readPid(pidFile)), 5000);
    const pid = readPid(pidFile) as number;
    expect(alive(pid)).toBe(true);
    controller.abort(new DOMException('stop', 'AbortError'));
    expect(((await pending) as Error).name).toBe('AbortError');
    expect(await waitUntil(() => !alive(pid), 2000)).toBe(true);
  });
});

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}
