/**
 * `cutover topology rollback --to` in Temporal mode: the earlier layouts are kept by the
 * environment's workflow, and going back is an ordinary migration workflow. Real dev server, a real
 * `cutover worker`, real app processes behind the router.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { liveWorkspace, setFileVersion, type Workspace } from '../support/migrations.js';
import {
  startWorker,
  type TestWorker,
  temporalAddress,
  uniqueTaskQueue,
} from '../support/temporal-worker.js';

let worker: TestWorker;
const spaces: (Workspace & { down: () => Promise<unknown> })[] = [];

beforeAll(async () => {
  worker = await startWorker({ address: temporalAddress(), taskQueue: uniqueTaskQueue('rollback') });
}, 30_000);

afterEach(async () => {
  // The worker ran the replicas and the router: it takes them down, then the files go.
  // (The test takes it down itself and checks that; this is for a test that failed before.)
  for (const w of spaces.splice(0)) {
    await w.down();
    await w.cleanup();
  }
}, 60_000);

afterAll(async () => {
  await worker?.stop();
}, 15_000);

describe('cutover topology rollback in Temporal mode', () => {
  it('--to previous after a commit: a migration workflow back to 1.0.0, recorded as a new serial', async () => {
    const environment = `rollback-${process.pid}-${Date.now().toString(36)}`;
    const w = await liveWorkspace((y) => y.replace('name: live-demo', `name: ${environment}`));
    const cli = (args: string[]) => runCli([...args, '-f', w.file], { env: worker.env });
    // --yes: without a terminal, down is refused without it (and the replicas were left running).
    spaces.push({ ...w, down: () => cli(['topology', 'down', '--yes']) });
    expect((await cli(['topology', 'migrate', '--yes'])).code).toBe(0);
    setFileVersion(w, '1.0.0', '2.0.0');
    expect((await cli(['topology', 'migrate', '--yes'])).code).toBe(0);
    const served = async () => ((await (await fetch(w.url)).json()) as { version: string }).version;
    expect(await served()).toBe('2.0.0');

    const back = await cli(['topology', 'rollback', '--to', 'previous', '--yes']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stderr).toContain(`Rolling ${environment} back from serial 2 to the layout of serial 1`);
    expect(back.stdout).toMatch(/^mig_[0-9a-z]+: completed$/m);
    expect(await served()).toBe('1.0.0');
    // The file still says 2.0.0: planned against serial 3, which runs 1.0.0 again.
    const plan = await cli(['topology', 'plan']);
    expect(plan.stdout).toContain('against the live layout of ');
    expect(plan.stdout).toContain(', serial 3');
    expect(plan.stdout).toContain('version 1.0.0 → 2.0.0');

    const none = await cli(['topology', 'rollback', '--to', 'serial:7', '--yes']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`${environment}: there is no serial 7; the current layout is serial 3`);

    // Down takes the rolled-back layout's replicas and route away: nothing answers any more.
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, down.stdout + down.stderr).toBe(0);
    await expect(served()).rejects.toThrow();
  }, 120_000);
});
