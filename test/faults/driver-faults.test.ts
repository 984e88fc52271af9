/**
 * A fault of the machine inside a driver's own work (here the route table the router driver
 * writes) fails the step with the cause and what to do, as every other environment fault reads,
 * not with Node's raw error text. Real CLI, real router and replicas, the fault injected by the
 * preload of the fault suite (EACCES: the tests run as root, where chmod does not refuse).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runBinary, runCli } from '../support/cli.js';
import { liveWorkspace, show, type Workspace } from '../support/migrations.js';
import { preload } from './support.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

describe('an environment fault inside a driver', () => {
  it('fails the step naming the file, the cause and the next step', async () => {
    const w = await liveWorkspace();
    spaces.push(w);
    const fired = path.join(w.dir, 'fault-fired');
    const fault = { op: 'open', path: 'router/routes\\.json\\.\\d+\\.tmp$', nth: 1, fault: 'EACCES' };
    // The binary: the fault is injected into its process by a preload.
    const result = await runBinary(['topology', 'migrate', '-f', w.file, '--yes'], {
      env: {
        NODE_OPTIONS: `--import ${preload}`,
        CUTOVER_TEST_FAULT: JSON.stringify(fault),
        CUTOVER_TEST_FAULT_FIRED: fired,
      },
    });
    expect(existsSync(fired) && readFileSync(fired, 'utf8')).toBeTruthy();
    // The one refused write is retried (the step is idempotent) and the migration goes on; the
    // operator reads the failed attempt in the log.
    expect(result.code, result.stdout + result.stderr).toBe(0);
    const id = /(mig_[0-9a-z]+)/.exec(result.stdout + result.stderr)?.[1] as string;
    expect((await show(w, id)).lifecycle).toBe('completed');
    const logs = await runCli(['topology', 'migration', 'logs', id, '-f', w.file]);
    expect(logs.stdout).toMatch(
      /routes\.json\.\d+\.tmp: permission denied \(EACCES\); check the owner and mode, or run as a user that may/,
    );
    expect(logs.stdout).not.toMatch(/EACCES: permission denied, open/);
  });
});
