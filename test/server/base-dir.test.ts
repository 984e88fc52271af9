/**
 * Where a topology's relative paths resolve on a server: against its `--workdir`, for a plan as
 * for an apply (one rule, engine/sources/topology-source.ts). A server whose working directory is
 * not its workdir once planned against the former and applied against the latter: here the
 * working directory is a Git work tree holding the secrets file, which a topology there must not
 * use, while the workdir is no work tree; `/v1/plan` refused what `/v1/apply` started.
 */
import { chmod, cp, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { type Api, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let api: Api | undefined;
const started: string[] = [];
afterAll(() => harness.cancelThenCleanup(api, started), 60_000);

/** examples/exec-demo with a secret in its api's environment, and a long bake (it stays in flight). */
function topology(): string {
  return `apiVersion: cutover/v1
kind: Topology
metadata:
  name: base-dir
drivers:
  infra:
    type: exec
    dir: ./infra
    timeout: 1m
components:
  api:
    driver: infra
    version: "1"
    env:
      TOKEN: { secret: TOKEN }
strategy:
  bake: 10m
  commit: auto
`;
}

describe('the directory relative paths resolve against, on a server', () => {
  it('is the --workdir for /v1/plan as for /v1/apply when the server runs elsewhere', async () => {
    const checkout = await harness.tempDir('cutover-cwd-');
    await mkdir(path.join(checkout, '.git'));
    const secrets = path.join(checkout, 'secrets.env');
    await writeFile(secrets, 'TOKEN=t0ken\n');
    await chmod(secrets, 0o600);
    const workdir = await harness.tempDir('cutover-workdir-');
    await cp(path.join(repoRoot, 'examples', 'exec-demo', 'infra'), path.join(workdir, 'infra'), {
      recursive: true,
    });
    const served = await harness.serve({
      cwd: checkout,
      workdir,
      env: { CUTOVER_SECRETS_FILE: secrets },
      args: ['--rate-limit', '0'],
    });
    api = served.api;
    const request = { topology: topology(), path: 'topology.yaml' };

    const planned = await api.post('/v1/plan', request);
    expect(planned.status, planned.text).toBe(200);
    const planId = (planned.json as { planId: string }).planId;
    const applied = await api.post('/v1/apply', request);
    expect(applied.status, applied.text).toBe(202);
    const body = applied.json as { planId: string; summary: { id: string } };
    started.push(body.summary.id);
    expect(body.planId).toBe(planId);
  }, 60_000);
});
