/**
 * A router per host (issue 30) and a stateful switch: the switch's write hold holds every route at
 * once, which routes on two hosts' routers cannot do, so such a migration is refused before it
 * starts, naming the component and the hosts; the first deployment (no switch) runs.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { freePort, setVersion, workspace } from '../support/migrations.js';
import { startWorkerProcess, temporalAddress, uniqueTaskQueue } from '../support/temporal-worker.js';

describe('a stateful switch over routes on two hosts', () => {
  it('is refused when the migration would switch, naming the component and the hosts', async ({
    onTestFinished,
  }) => {
    const environment = `hostswitch-${process.pid}-${Date.now().toString(36)}`;
    const second = await freePort();
    const w = await workspace('test/fixtures/stateful-kv', (y) =>
      y
        .replace('name: kv', `name: ${environment}`)
        .replace(
          'apps: { type: process, stopTimeout: 3s }',
          'apps: { type: process, stopTimeout: 3s, runsOn: a }\n  edgea: { type: router, runsOn: a }\n  edgeb: { type: router, runsOn: b }',
        )
        .replace('    to: store\n', '    to: store\n    driver: edgea\n')
        .replace(
          'strategy:',
          `  www2: { listen: "127.0.0.1:${second}", to: store, driver: edgeb, shift: [100] }\nstrategy:`,
        ),
    );
    onTestFinished(() => w.cleanup());
    const taskQueue = uniqueTaskQueue('hostswitch');
    const env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: taskQueue };
    for (const host of ['a', 'b']) {
      const worker = await startWorkerProcess({ address: env.WORKFLOW_HOST, taskQueue, host });
      onTestFinished(() => worker.stop());
    }
    const cli = (args: string[]) => runCli([...args, '-f', w.file], { env });
    onTestFinished(async () => {
      await cli(['topology', 'down', '--yes']);
    });

    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, `${first.stdout}${first.stderr}`).toBe(0);
    setVersion(w, 'store', '2.0.0');
    const refused = await cli(['topology', 'migrate', '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'store switches under a write hold, which holds every route at once, and the routes run on hosts a, b: put the routes on one host',
    );
    const none = await cli(['topology', 'migration', 'list', '--environment', environment, '--json']);
    expect(
      (JSON.parse(none.stdout) as { items: { lifecycle: string }[] }).items.map((m) => m.lifecycle),
    ).toEqual(['completed']);
  }, 120_000);
});
