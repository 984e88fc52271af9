/**
 * examples/containers as a user runs it: the topology validates as committed, its build.sh builds
 * the offline image, and the topology migrates 1.0.0 → 2.0.0 behind the router on a real Podman.
 * The test's copy uses its own image name, environment name and port (the file's are fixed ones).
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli, tempDir } from '../support/cli.js';
import { copyFixture, freePort, killRunners } from '../support/migrations.js';
import { type PodmanFixture, podmanFixture } from '../support/podman.js';

const example = path.join(repoRoot, 'examples', 'containers');
let fx: PodmanFixture;
let dir: string;
let removeDir: () => Promise<void>;
let file: string;
let url: string;
const environment = () => `${fx.prefix}-example`;
const image = () => `localhost/${fx.prefix}-example`;

function sh(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { env: { ...process.env, ...env }, timeout: 120_000 }, (error, _stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stderr }),
    );
  });
}

beforeAll(async () => {
  fx = await podmanFixture();
  ({ dir, cleanup: removeDir } = await tempDir());
  copyFixture(example, dir);
  file = path.join(dir, 'topology.yaml');
  const port = await freePort();
  url = `http://127.0.0.1:${port}/`;
  writeFileSync(
    file,
    readFileSync(file, 'utf8')
      .replace('name: containers-demo', `name: ${environment()}`)
      .replaceAll('127.0.0.1:18610', `127.0.0.1:${port}`)
      .replaceAll('localhost/cutover-example-app', image()),
  );
}, 60_000);

afterAll(async () => {
  if (dir) {
    await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
    killRunners(path.join(dir, '.cutover'));
  }
  if (fx) {
    for (const tag of ['1.0.0', '2.0.0']) await fx.podman(['rmi', '-f', `${image()}:${tag}`]);
    await fx.cleanup([environment()]);
  }
  await removeDir?.();
}, 120_000);

describe('examples/containers', () => {
  it('validates as committed', async () => {
    const result = await runCli(['topology', 'validate', '-f', path.join(example, 'topology.yaml')]);
    expect(result.stdout).toBe(
      `${path.join(example, 'topology.yaml')}: valid (environment containers-demo, 1 component, 1 route)\n`,
    );
    expect(result.code).toBe(0);
  });

  it('builds with build.sh offline and migrates 1.0.0 → 2.0.0 behind the router', async () => {
    const env = { IMAGE: image(), CONTAINERS_CONF: fx.config };
    for (const tag of ['1.0.0', '2.0.0']) {
      const built = await sh(path.join(dir, 'build.sh'), [tag, 'podman --runtime runc'], env);
      expect(built.code, built.stderr).toBe(0);
    }
    const first = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(first.code, first.stderr).toBe(0);
    expect(await (await fetch(url)).json()).toEqual({ version: '1.0.0' });

    writeFileSync(file, readFileSync(file, 'utf8').replaceAll('1.0.0', '2.0.0'));
    const second = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(second.code, second.stderr).toBe(0);
    expect(await (await fetch(url)).json()).toEqual({ version: '2.0.0' });
  }, 120_000);
});
