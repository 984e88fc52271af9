/**
 * Secrets in Temporal mode: the worker reads them where it runs (its environment, its secrets
 * file), records only their keyed hashes, and a plan made on the worker's state directory (whose
 * key hashed them) tells a rotated secret. No value reaches a file or an output.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runBinary, tempDir } from '../support/cli.js';
import { killRunners, killSlots, type Workspace, workspace } from '../support/migrations.js';
import { startWorkerProcess, type WorkerProcess } from '../support/temporal-worker.js';
import { sharedTemporal, temporalEnv, uniqueName } from './robustness-helpers.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const distinct = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;

let ws: Workspace | undefined;
let worker: WorkerProcess | undefined;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  if (worker) {
    killSlots(worker.stateDir);
    killRunners(worker.stateDir);
    await worker.stop();
  }
  await ws?.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
  ws = undefined;
  worker = undefined;
});

describe('secrets in Temporal mode', () => {
  it('the worker reads them, a rotation plans "changed (sensitive)", and no value is left anywhere', async () => {
    const environment = uniqueName('secrets');
    ws = await workspace('test/fixtures/secrets', (text) =>
      text.replace('name: secrets', `name: ${environment}`),
    );
    const { dir, cleanup } = await tempDir('cutover-secrets-');
    cleanups.push(cleanup);
    const secrets = path.join(dir, 'shop.env');
    const [first, second, token] = [distinct('pw'), distinct('pw-rotated'), distinct('token')];
    const writeSecrets = (password: string) =>
      writeFileSync(secrets, `DB_PASSWORD=${password}\nAPI_TOKEN=${token}\n`, { mode: 0o600 });
    writeSecrets(first);
    const t = { address: sharedTemporal(), taskQueue: uniqueName('secrets') };
    worker = await startWorkerProcess({ ...t, env: { CUTOVER_SECRETS_FILE: secrets } });
    const outputs: string[] = [];
    const cli = async (args: string[]) => {
      const reads = args[1] === 'plan' || args[1] === 'migrate';
      // The binary: the plan reads the secrets file from its process's environment.
      const result = await runBinary(
        [...args, '-f', (ws as Workspace).file, ...(reads ? ['--secrets-file', secrets] : [])],
        {
          env: { ...temporalEnv(t), CUTOVER_STATE_DIR: (worker as WorkerProcess).stateDir },
        },
      );
      outputs.push(result.stdout, result.stderr);
      return result;
    };
    const route = `http://${/listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(ws.file, 'utf8'))?.[1]}/secret-sha256`;

    const migrated = await cli(['topology', 'migrate', '--yes']);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(await (await fetch(route)).text()).toBe(sha256(first));
    expect((await cli(['topology', 'plan', '--detailed-exitcode'])).code).toBe(0);

    writeSecrets(second);
    const rotated = await cli(['topology', 'plan', '--detailed-exitcode']);
    expect(rotated.code).toBe(2);
    expect(rotated.stdout).toContain('because: env.DB_PASSWORD changed (sensitive)');
    const remigrated = await cli(['topology', 'migrate', '--yes']);
    expect(remigrated.code, remigrated.stderr).toBe(0);
    expect(await (await fetch(route)).text()).toBe(sha256(second));
    await cli(['topology', 'migration', 'list', '--json']);
    // --yes: without a terminal, down is refused without it (and the replicas were left running).
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, down.stdout + down.stderr).toBe(0);

    const files = readdirSync(worker.stateDir, { recursive: true, encoding: 'utf8' })
      .map((name) => path.join((worker as WorkerProcess).stateDir, name))
      .filter((file) => statSync(file).isFile());
    expect(files.some((f) => /replica-0\.log$/.test(f))).toBe(true);
    for (const value of [first, second, token]) {
      expect(files.filter((f) => readFileSync(f).includes(value))).toEqual([]);
      expect(outputs.filter((o) => o.includes(value))).toEqual([]);
      expect(worker.stderr()).not.toContain(value);
    }
  }, 120_000);
});
