/**
 * Temporal mode, a hold with analysis: the hold's window runs as an activity on the worker (which
 * reads the router's per-slot counters), and a failing green (5 % of its answers 500, under a load
 * of 300 requests/s) is rolled back at its first step with the rate in the reason, as in local mode.
 * A real dev server, a real `cutover worker`, real app processes behind the real router.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoad } from '../../bench/load.js';
import { runCli } from '../support/cli.js';
import { killSlots, type Workspace, workspace } from '../support/migrations.js';
import {
  startWorkerProcess,
  temporalAddress,
  uniqueTaskQueue,
  type WorkerProcess,
} from '../support/temporal-worker.js';

let worker: WorkerProcess;
let w: Workspace;

beforeAll(async () => {
  worker = await startWorkerProcess({
    address: temporalAddress(),
    taskQueue: uniqueTaskQueue('progressive'),
  });
  w = await workspace('test/fixtures/canary', (yaml) =>
    yaml.replace(/name: canary/, `name: canary-${process.pid}-${Date.now().toString(36)}`),
  );
}, 30_000);

afterAll(async () => {
  await cli('topology', 'down', '--yes').catch(() => undefined);
  killSlots(worker.stateDir);
  await worker?.stop();
  await w?.cleanup();
}, 60_000);

const cli = (...args: string[]) => runCli([...args, '-f', w.file], { env: worker.env });

interface Shown {
  summary: { id: string; lifecycle: string; reason: string | null };
  state: { analyses?: { outcome: string; weight: number }[] };
}

describe('Temporal mode: a hold with analysis', () => {
  it('rolls a failing green back at its first step, the rate in the reason', {
    timeout: 90_000,
  }, async () => {
    const first = await cli('topology', 'migrate', '--yes');
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(
      w.file,
      readFileSync(w.file, 'utf8')
        .replace('version: "1.0.0"', 'version: "2.0.0"')
        .replace('FAIL_EVERY: "0"', 'FAIL_EVERY: "20"')
        .replace(
          /shift: .*/,
          'shift: [{ weight: 10, hold: 4s, analysis: { successRate: { min: 99 }, minRequests: 40 } }, 50, 100]',
        ),
    );
    const listen = /listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(w.file, 'utf8'))?.[1] as string;
    const load = startLoad({ url: `http://${listen}/`, rate: 300 });
    const migrate = await cli('topology', 'migrate', '--yes', '--json').finally(() => load.stop());
    expect(migrate.code, migrate.stderr).toBe(1);
    const { summary } = JSON.parse(migrate.stdout) as Shown;
    expect(summary.lifecycle).toBe('rolled_back');
    expect(summary.reason).toMatch(
      /^analysis failed: green 5xx [\d.]+ % > 1 % over \d+ requests at the 10 % step$/,
    );
    const shown = JSON.parse(
      (await cli('topology', 'migration', 'show', summary.id, '--json')).stdout,
    ) as Shown;
    expect(shown.state.analyses).toEqual([expect.objectContaining({ outcome: 'breach', weight: 10 })]);
  });
});
