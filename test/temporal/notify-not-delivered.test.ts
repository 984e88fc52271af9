/**
 * Temporal mode does not deliver `notify:` targets yet: a migration with targets still starts, and
 * whoever started it is told so, from the CLI in Temporal mode, from a server in Temporal mode (its
 * apply answer), and from the CLI through that server. No worker: only the start is looked at.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli, tempDir } from '../support/cli.js';
import { Api, demoPath, demoTopology, ServerHarness, type ServerProcess } from '../support/server.js';
import { temporalAddress, uniqueTaskQueue } from '../support/temporal-worker.js';

const servers = new ServerHarness();
const temporal = () => ({
  WORKFLOW_HOST: temporalAddress(),
  TEMPORAL_TASK_QUEUE: taskQueue,
  TEMPORAL_NAMESPACE: 'default',
});
const taskQueue = uniqueTaskQueue('cutover-notify-temporal');
const warning = /notify targets \(chat\) are not delivered in Temporal mode yet/;
let server: ServerProcess;
let dir: { dir: string; cleanup: () => Promise<void> };

/** The demo topology in a fresh environment, with one Slack-compatible target. */
function topology(prefix: string): string {
  const name = `${prefix}-${process.pid}-${Date.now().toString(36)}`;
  return `${demoTopology({ name })}\nnotify:\n  chat: { type: slack, url: "http://127.0.0.1:9/hook" }\n`;
}

beforeAll(async () => {
  dir = await tempDir('cutover-notify-temporal-');
  server = await servers.start({
    stateDir: await servers.stateDir(),
    args: ['--no-worker'],
    env: temporal(),
  });
}, 60_000);
afterAll(async () => {
  await servers.cleanup();
  await dir?.cleanup();
}, 30_000);

it('a server in Temporal mode starts the migration and says its notify targets are not delivered', async () => {
  const api = await Api.connect(server.url);
  const apply = await api.post('/v1/apply', { topology: topology('notify-api'), path: demoPath });
  expect(apply.status).toBe(202);
  expect(apply.json.notice).toMatch(warning);
}, 60_000);

it('the CLI says so, in Temporal mode and through a server in Temporal mode', async () => {
  const file = path.join(dir.dir, 'topology.yaml');
  for (const [what, env] of [
    ['temporal', temporal()],
    ['server', { CUTOVER_SERVER: server.url }],
  ] as const) {
    writeFileSync(file, topology(`notify-cli-${what}`));
    const result = await runCli(['topology', 'migrate', '-f', file, '--yes', '--detach'], {
      env: { ...env, CUTOVER_STATE_DIR: dir.dir },
    });
    expect(result.code, `${what}: ${result.stderr}`).toBe(0);
    expect(result.stderr, what).toMatch(warning);
  }
}, 60_000);
