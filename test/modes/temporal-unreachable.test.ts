/**
 * Temporal mode when Temporal cannot be used: WORKFLOW_HOST at a closed port, at a port that
 * accepts connections and never answers, or a namespace the server does not have. Every command,
 * the worker and the server end with exit 1 and one line naming WORKFLOW_HOST and the address,
 * within a few seconds; none hangs, and the server never starts listening half-working.
 */
import { createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runBinary, runCli, tempDir } from '../support/cli.js';
import { freePort } from '../support/migrations.js';
import { ServerHarness } from '../support/server.js';
import { temporalAddress } from '../support/temporal-worker.js';

const servers = new ServerHarness();
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await servers.cleanup();
  for (const cleanup of cleanups) await cleanup();
}, 20_000);

const topology = 'test/fixtures/gated/topology.yaml';

/** Each of these talks to Temporal first thing. */
const commands: string[][] = [
  ['topology', 'migration', 'list', '-f', topology],
  ['topology', 'migration', 'show', 'mig_01', '-f', topology],
  ['topology', 'migration', 'rollback', 'mig_01', '-f', topology],
  ['topology', 'plan', '-f', topology],
  ['topology', 'migrate', '--yes', '-f', topology],
];

async function worker(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  const { dir, cleanup } = await tempDir('cutover-worker-');
  cleanups.push(cleanup);
  // The binary: a worker is a process of its own (and installs Temporal's one runtime per process).
  return runBinary(['worker', '--state-dir', dir], { env });
}

/** Exit 1 and exactly one line on stderr, matching `line`. */
function expectOneLine(result: { code: number | null; stderr: string }, line: RegExp): void {
  expect(result.stderr).toMatch(line);
  expect(result.stderr.trim().split('\n')).toHaveLength(1);
  expect(result.code).toBe(1);
}

describe.concurrent('Temporal mode, Temporal out of reach', () => {
  it('a closed port: every command, the worker and the server fail at once with one line', async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const env = { WORKFLOW_HOST: address };
    const line = new RegExp(
      `^cutover: cannot reach Temporal at WORKFLOW_HOST=127\\.0\\.0\\.1:${port} \\(namespace default\\): connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\n$`,
    );
    const started = Date.now();
    const results = await Promise.all([...commands.map((args) => runCli(args, { env })), worker(env)]);
    for (const result of results) expectOneLine(result, line);

    const server = await servers.startRefused({ stateDir: await servers.stateDir(), env });
    expect(server.listening).toBe(false);
    expectOneLine(server, line);
    // Refused connections are reported as they happen, not after a connection deadline.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a worker at a closed port says so before it loads the Temporal SDK', async () => {
    const port = await freePort();
    const preload = path.join(repoRoot, 'test/fixtures/preload/report-temporal-sdk.mjs');
    const result = await worker({ WORKFLOW_HOST: `127.0.0.1:${port}`, NODE_OPTIONS: `--import=${preload}` });
    // Loading the SDK first cost ~0.5 CPU-s before the same line (the preload said it was loaded).
    expectOneLine(
      result,
      new RegExp(`^cutover: cannot reach Temporal at WORKFLOW_HOST=127\\.0\\.0\\.1:${port} .*ECONNREFUSED`),
    );
  });

  it('a port that never answers: one line after the connection deadline, no hang', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });
    const { port } = silent.address() as { port: number };
    const env = { WORKFLOW_HOST: `127.0.0.1:${port}` };
    const started = Date.now();
    const result = await runCli(['topology', 'migration', 'list', '-f', topology], { env });
    expectOneLine(
      result,
      new RegExp(
        `^cutover: cannot reach Temporal at WORKFLOW_HOST=127\\.0\\.0\\.1:${port} \\(namespace default\\): .+\\n$`,
      ),
    );
    expect(Date.now() - started).toBeLessThan(12_000);
  });

  it('a namespace the server does not have: one line naming it, from commands, the worker and the server', async () => {
    const address = temporalAddress();
    const env = { WORKFLOW_HOST: address, TEMPORAL_NAMESPACE: 'cutover-no-such-namespace' };
    const escaped = address.replaceAll('.', '\\.');
    const line = new RegExp(
      `^cutover: Temporal at WORKFLOW_HOST=${escaped} has no namespace cutover-no-such-namespace \\(TEMPORAL_NAMESPACE\\)\\n$`,
    );
    const results = await Promise.all([
      runCli(['topology', 'migration', 'list', '-f', topology], { env }),
      runCli(['topology', 'plan', '-f', topology], { env }),
      worker(env),
    ]);
    for (const result of results) expect(result.stderr).toMatch(new RegExp(line.source, 'm'));
    for (const result of results) expect(result.code).toBe(1);
    // Before the fix, the worker and the server reported an internal error and then never exited.
    const server = await servers.startRefused({ stateDir: await servers.stateDir(), env });
    expect(server.listening).toBe(false);
    expect(server.code).toBe(1);
    expect(server.stderr).toMatch(new RegExp(line.source, 'm'));
  });
});
