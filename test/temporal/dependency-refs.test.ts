/**
 * References to dependencies in Temporal mode: each driver call is an activity that gets only its
 * view of the migration's state (commandView); the worker must still find the slots of the
 * component's dependencies there. api knows db only through DATABASE_URL (test/fixtures/refs):
 * after a migration that replaces db alone, every answer through the route comes from the new db,
 * so api's green was given db's green address by the worker.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runBinary } from '../support/cli.js';
import { killRunners, killSlots, type Workspace, workspace } from '../support/migrations.js';
import { startWorker, type TestWorker } from '../support/temporal-worker.js';
import { sharedTemporal, temporalEnv, uniqueName } from './robustness-helpers.js';

interface Answer {
  api: { version: string; slotId: string };
  db: { version: string; slotId: string; port: number };
  dbAddresses: string;
}

let ws: Workspace | undefined;
let worker: TestWorker | undefined;
afterEach(async () => {
  if (worker) {
    killSlots(worker.stateDir);
    killRunners(worker.stateDir);
    await worker.stop();
  }
  await ws?.cleanup();
  ws = undefined;
  worker = undefined;
});

const generation = (slotId: string) => slotId.slice(slotId.indexOf('-') + 1);

describe('references to dependencies in Temporal mode', () => {
  it("the worker gives green api green db's address: after db alone is replaced, api answers from the new db", async () => {
    const environment = uniqueName('refs');
    ws = await workspace('test/fixtures/refs', (text) =>
      text.replace('name: refs', `name: ${environment}`).replace(/shift: .*/, 'shift: [100]'),
    );
    const t = { address: sharedTemporal(), taskQueue: uniqueName('refs') };
    worker = await startWorker(t);
    const file = ws.file;
    const cli = (args: string[]) =>
      runBinary([...args, '-f', file], {
        env: { ...temporalEnv(t), CUTOVER_STATE_DIR: (worker as TestWorker).stateDir },
      });
    const route = `http://${/listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(file, 'utf8'))?.[1]}/`;
    const ask = async (n: number): Promise<Answer[]> => {
      const answers: Answer[] = [];
      for (let i = 0; i < n; i++) {
        const response = await fetch(route, { signal: AbortSignal.timeout(5_000) });
        const body = await response.text();
        expect(response.status, body).toBe(200);
        answers.push(JSON.parse(body) as Answer);
      }
      return answers;
    };

    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, first.stderr).toBe(0);
    const before = await ask(4);
    for (const a of before) expect(generation(a.db.slotId)).toBe(generation(a.api.slotId));

    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.replace(/(\n {2}db:\n(?: {4}.*\n)*? {4}version: )"[^"]*"/, '$1"2.0.0"'));
    const plan = await cli(['topology', 'plan']);
    expect(plan.stdout).toContain(
      'because: dependency db is replaced (env DATABASE_URL, DB_ADDRESSES refer to it)',
    );
    const second = await cli(['topology', 'migrate', '--yes']);
    expect(second.code, second.stderr).toBe(0);
    const after = await ask(10);
    for (const a of after) {
      expect(a.db.version).toBe('2.0.0');
      expect(generation(a.db.slotId), JSON.stringify(a)).toBe(generation(a.api.slotId));
      expect(generation(a.db.slotId)).not.toBe(generation(before[0]?.db.slotId as string));
      expect(a.dbAddresses.split(',')).toContain(`127.0.0.1:${a.db.port}`);
    }
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, down.stdout + down.stderr).toBe(0);
  }, 180_000);
});
