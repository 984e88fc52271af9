import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Health } from '../../../core/topology/types.js';
import { GreenUnhealthyError, watchGreen, whileGreenHealthy } from '../../../engine/health/watch-health.js';
import { resourcesPerTest } from '../../support/resources.js';

const resources = resourcesPerTest();

const health: Health = {
  http: { path: '/healthz', expectStatus: 200 },
  interval: 50,
  timeout: 500,
  successThreshold: 1,
  failureThreshold: 3,
  deadline: 5000,
};

/** A replica whose /healthz answers `status()` (a real server on 127.0.0.1). */
async function replica(status: () => number): Promise<{ address: string; probes: () => number }> {
  let probes = 0;
  const server = http.createServer((_req, res) => {
    probes += 1;
    res.writeHead(status()).end();
  });
  return { address: await resources.listen(server), probes: () => probes };
}

const slot = (address: string) => ({ component: 'web', health, addresses: [address], cwd: process.cwd() });

describe("watching green's health after its gate", () => {
  it('a hold ends as it would while green stays healthy, having probed it all along', async () => {
    const r = await replica(() => 200);
    const lines: string[] = [];
    const result = await whileGreenHealthy(
      [slot(r.address)],
      'during the hold',
      new AbortController().signal,
      (l) => lines.push(l),
      async (signal) => {
        await sleep(400, undefined, { signal });
        return 'held';
      },
    );
    expect(result).toBe('held');
    expect(r.probes()).toBeGreaterThanOrEqual(4);
    expect(lines[0]).toBe('health: watching green web every 50ms during the hold');
  });

  it('green failing failureThreshold probes in a row ends the hold at once, naming the replica and why', async () => {
    let failing = false;
    const r = await replica(() => (failing ? 503 : 200));
    const started = Date.now();
    setTimeout(() => {
      failing = true;
    }, 200);
    const hold = whileGreenHealthy(
      [slot(r.address)],
      'during the hold',
      new AbortController().signal,
      () => {},
      (signal) => sleep(10_000, undefined, { signal }),
    );
    await expect(hold).rejects.toThrow(GreenUnhealthyError);
    await expect(hold).rejects.toThrow(
      `green web lost its health during the hold: ${r.address} GET /healthz → 503 (3 failures in a row, every 50ms)`,
    );
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('a check passes at once on a well green, and fails after failureThreshold refused connections', async () => {
    const r = await replica(() => 200);
    await watchGreen(
      [slot(r.address)],
      'check',
      'before setting 50 %',
      new AbortController().signal,
      () => {},
    );
    expect(r.probes()).toBe(1);
    const server = http.createServer();
    const gone = await resources.listen(server);
    await new Promise((resolve) => server.close(resolve));
    await expect(
      watchGreen([slot(gone)], 'check', 'before setting 50 %', new AbortController().signal, () => {}),
    ).rejects.toThrow(
      /^green web lost its health before setting 50 %: .* → connection refused \(3 failures in a row/,
    );
  });

  it('a check whose probes pass fails when the driver sees the replicas gone: another process answers', async () => {
    const r = await replica(() => 200);
    const gone = '127.0.0.1:4001 (pid 123) is not running (exited), yet its address answered';
    await expect(
      watchGreen(
        [{ ...slot(r.address), gone: async () => gone }],
        'check',
        'before the drain',
        new AbortController().signal,
        () => {},
      ),
    ).rejects.toThrow(`green web lost its health before the drain: ${gone}`);
    // Its replicas there, the check passes as before.
    await watchGreen(
      [{ ...slot(r.address), gone: async () => undefined }],
      'check',
      'before the drain',
      new AbortController().signal,
      () => {},
    );
  });
});
