/**
 * A Temporal namespace without cutover's search attributes (issue 16, item 13): every command, the
 * worker and the server end with exit 1 and one line naming the missing attributes and the
 * `temporal operator search-attribute create` command that adds them; that command, run as printed,
 * is the whole fix. Real dev server (the run's shared one), real namespaces made for the test.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli, tempDir } from '../support/cli.js';
import { ServerHarness } from '../support/server.js';
import { installHint, temporalBinary } from '../support/temporal.js';
import { sharedTemporal, uniqueName } from './robustness-helpers.js';

const servers = new ServerHarness();
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await servers.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
}, 30_000);

/** The `temporal` CLI: it sets the namespaces up, and its command printed by cutover is run as is. */
async function temporal(args: string[]): Promise<string> {
  const binary = temporalBinary();
  if (!binary) throw new Error(installHint);
  return (await promisify(execFile)(binary, args)).stdout;
}

/** A namespace of its own with only `attributes` of cutover's three; deleted after the file. */
async function namespaceWith(address: string, attributes: string[]): Promise<string> {
  const namespace = uniqueName('cutover-sa');
  const where = ['--address', address, '--namespace', namespace];
  await temporal(['operator', 'namespace', 'create', ...where]);
  cleanups.push(() => temporal(['operator', 'namespace', 'delete', ...where, '--yes']).then(() => undefined));
  // A new namespace reaches the frontend's cache a moment later, and so do its attributes.
  const deadline = Date.now() + 20_000;
  for (const name of attributes)
    await until(deadline, () =>
      temporal(['operator', 'search-attribute', 'create', ...where, '--name', name, '--type', 'Keyword']),
    );
  await until(deadline, async () => {
    const listed = await temporal(['operator', 'search-attribute', 'list', ...where]);
    if (!attributes.every((name) => listed.includes(name))) throw new Error(`not all listed:\n${listed}`);
  });
  return namespace;
}

/** Retries `attempt` until it resolves; rejects with its last error after `deadline`. */
async function until(deadline: number, attempt: () => Promise<unknown>): Promise<void> {
  for (;;) {
    try {
      await attempt();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await sleep(200);
  }
}

async function topologyFile(): Promise<string> {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const file = path.join(dir, 'topology.yaml');
  const text = readFileSync(path.join(repoRoot, 'examples', 'exec-demo', 'topology.yaml'), 'utf8');
  writeFileSync(file, text.replace('name: exec-demo', `name: ${uniqueName('sa')}`));
  return file;
}

async function worker(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  const { dir, cleanup } = await tempDir('cutover-worker-');
  cleanups.push(cleanup);
  return runCli(['worker', '--state-dir', dir], { env });
}

function expectOneLine(result: { code: number | null; stderr: string }, line: string): void {
  expect(result.stderr).toBe(`${line}\n`);
  expect(result.code).toBe(1);
}

const createCommand = (address: string, namespace: string, names: string[]) =>
  names
    .map(
      (name) =>
        `temporal operator search-attribute create --address ${address} --namespace ${namespace} --name ${name} --type Keyword`,
    )
    .join(' && ');

describe('a Temporal namespace without cutover search attributes', () => {
  it('lacking one: commands, the worker and the server name it and the command that adds it', async () => {
    const address = sharedTemporal();
    const namespace = await namespaceWith(address, ['CutoverEnvironment', 'CutoverMigrationId']);
    const env = {
      WORKFLOW_HOST: address,
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_TASK_QUEUE: uniqueName('sa'),
    };
    const file = await topologyFile();
    const command = createCommand(address, namespace, ['CutoverState']);
    const line = `cutover: Temporal namespace ${namespace} (WORKFLOW_HOST=${address}) lacks the search attribute CutoverState that cutover needs; add it: ${command}`;

    const results = await Promise.all([
      runCli(['topology', 'migrate', '--yes', '-f', file], { env }),
      runCli(['topology', 'migration', 'list', '-f', file], { env }),
      runCli(['topology', 'migration', 'show', 'mig_01', '-f', file], { env }),
      worker(env),
    ]);
    for (const result of results) expectOneLine(result, line);
    const server = await servers.startRefused({ stateDir: await servers.stateDir(), env });
    expect(server.listening).toBe(false);
    expectOneLine(server, line);

    // The command as printed is the fix.
    await temporal(command.split(' ').slice(1));
    let listed = await runCli(['topology', 'migration', 'list', '-f', file], { env });
    // The attribute reaches the frontend's cache a moment after the command returns.
    for (let attempt = 0; attempt < 50 && listed.code !== 0; attempt++) {
      await sleep(200);
      listed = await runCli(['topology', 'migration', 'list', '-f', file], { env });
    }
    expect(listed.stderr).toBe('');
    expect(listed.stdout).toBe(`No migrations on WORKFLOW_HOST=${env.WORKFLOW_HOST}.\n`);
    expect(listed.code).toBe(0);
  }, 60_000);

  it('lacking all three: one line naming each, one command adding them', async () => {
    const address = sharedTemporal();
    const namespace = await namespaceWith(address, []);
    const env = { WORKFLOW_HOST: address, TEMPORAL_NAMESPACE: namespace };
    const names = ['CutoverEnvironment', 'CutoverMigrationId', 'CutoverState'];
    const result = await runCli(['topology', 'migration', 'list', '-f', await topologyFile()], { env });
    expectOneLine(
      result,
      `cutover: Temporal namespace ${namespace} (WORKFLOW_HOST=${address}) lacks the search attributes ${names.join(', ')} that cutover needs; add them: ${createCommand(address, namespace, names)}`,
    );
  }, 60_000);
});
