/**
 * `--parallelism` through a cutover server: the CLI's client sends it as `parallelism` in POST
 * /v1/apply, the server's migration runs under it (over the topology's strategy.parallelism), and a
 * bound outside 1..1000 is refused with a 400 naming the field. The server is built in process and
 * listens on loopback; the client is the CLI.
 * (Temporal mode honours it too: test/temporal/parallel-activities.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { type Api, demoApply, demoPath, type InProcessServer, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let server: InProcessServer;
let api: Api;
const started: string[] = [];

beforeAll(async () => {
  ({ server, api } = await harness.serveInProcess({ args: ['--rate-limit', '0'], listen: true }));
}, 30_000);

afterAll(async () => {
  await harness.cancelThenCleanup(api, started);
}, 60_000);

describe('--parallelism through a server', () => {
  it('the migration a client starts with --parallelism 3 runs under 3', async () => {
    // A path inside the server's --workdir (the repository): one outside it is refused.
    const r = await runCli([
      'topology',
      'migrate',
      '-f',
      demoPath,
      '--server',
      server.url as string,
      '--parallelism',
      '3',
      '--yes',
      '--json',
    ]);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const id = (JSON.parse(r.stdout) as { summary: { id: string } }).summary.id;
    started.push(id);
    const shown = await api.get(`/v1/migrations/${id}`);
    expect(shown.json.state.spec.parallelism).toBe(3);
  });

  it('POST /v1/apply takes parallelism 1..1000 and refuses anything else, naming the field', async () => {
    const ok = await api.post('/v1/apply', demoApply({ name: 'par-api' }, { parallelism: 2 }));
    expect(ok.status, ok.text).toBe(202);
    started.push(ok.json.summary.id as string);
    expect((await api.get(`/v1/migrations/${ok.json.summary.id}`)).json.state.spec.parallelism).toBe(2);
    for (const bad of [0, 1001, 1.5, 'ten']) {
      const r = await api.post('/v1/apply', demoApply({ name: 'par-bad' }, { parallelism: bad }));
      expect(r.status).toBe(400);
      expect(r.text).toContain('parallelism');
    }
  });
});
