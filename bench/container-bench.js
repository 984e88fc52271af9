/**
 * Container bench: time from provision to healthy for one container, and cutover's overhead over
 * `podman run` alone, side by side in one run on the same image (a FROM scratch busybox image built
 * here: no registry is needed). Each case starts a container, polls GET /health on its published
 * loopback port every 10 ms until it answers 200, and removes it; the median of the runs is kept.
 *
 * - podman run: `podman run -d -p 127.0.0.1:<port>:8080 <image>` → healthy.
 * - cutover driver: the container driver's provision (image check, run, its start-up grace and
 *   inspect) → healthy; retire afterwards (not timed).
 * - cutover migrate: `cutover topology migrate` of a one-replica container component behind the
 *   router, a first deploy, the CLI's start to its exit (planning, journal, health gate, route);
 *   `topology down` afterwards (not timed).
 *
 * Needs podman and busybox-static; the runtime and containers.conf are this VM's (runc,
 * `default_ulimits = []`), as settings of the driver. Everything it makes carries its own prefix.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createContainerDriver } from '../dist/engine/drivers/container-driver.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import { freePort, median, runNode, withTempDir } from './support.js';

export const name = 'container';
export const title = 'Containers: provision to healthy, cutover vs podman run alone (real podman, runc)';
export const columns = [
  { key: 'case', label: 'case' },
  { key: 'runs', label: 'runs' },
  { key: 'medianMs', label: 'median ms', format: (v) => v.toFixed(0) },
  { key: 'minMs', label: 'min ms', format: (v) => v.toFixed(0) },
  { key: 'maxMs', label: 'max ms', format: (v) => v.toFixed(0) },
  { key: 'ratio', label: 'vs podman run', format: (v) => `×${v.toFixed(2)}` },
];

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const cliPath = join(repoRoot, 'bin', 'cutover.js');
/** How often a case asks GET /health. */
const pollMs = 10;
/** A container not healthy this long after its start fails the bench. */
const healthyWithinMs = 30_000;

const appScript = `#!/bin/sh
mkdir -p /www
echo ok > /www/health
httpd -f -p "\${PORT:-8080}" -h /www &
trap 'kill $! 2>/dev/null; exit 0' TERM INT
wait
`;

function podman(config, args) {
  return new Promise((resolve) => {
    execFile(
      'podman',
      ['--runtime', 'runc', ...args],
      { env: { ...process.env, CONTAINERS_CONF: config }, timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function ok(config, args) {
  const r = await podman(config, args);
  if (r.code !== 0) throw new Error(`podman ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** Resolves with the time GET /health first answered 200, polling every `pollMs`. */
async function healthyAt(address) {
  const deadline = performance.now() + healthyWithinMs;
  for (;;) {
    try {
      const response = await fetch(`http://${address}/health`, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      if (response.status === 200) return performance.now();
    } catch {
      // not up yet
    }
    if (performance.now() > deadline) throw new Error(`${address} not healthy within ${healthyWithinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

function row(label, times, base) {
  const m = median(times);
  return {
    case: label,
    runs: times.length,
    medianMs: m,
    minMs: Math.min(...times),
    maxMs: Math.max(...times),
    ratio: base === undefined ? 1 : m / base,
  };
}

export async function run({ quick, log }) {
  const runs = quick ? 3 : 7;
  const prefix = `cbench${randomBytes(3).toString('hex')}`;
  const image = `localhost/${prefix}-app:1`;
  return withTempDir('container', async (dir) => {
    const config = join(dir, 'containers.conf');
    await writeFile(config, '[containers]\ndefault_ulimits = []\n');
    await copyFile('/bin/busybox', join(dir, 'busybox'));
    await writeFile(join(dir, 'app.sh'), appScript, { mode: 0o755 });
    await writeFile(
      join(dir, 'Containerfile'),
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nCOPY app.sh /app.sh\nCMD ["/app.sh"]\n',
    );
    const environment = `${prefix}-env`;
    try {
      log(`building ${image}`);
      await ok(config, ['build', '-q', '-t', image, dir]);

      const plain = [];
      for (let i = 0; i < runs; i++) {
        const port = await freePort();
        const name = `${prefix}-plain-${i}`;
        const started = performance.now();
        await ok(config, ['run', '-d', '--name', name, '-p', `127.0.0.1:${port}:8080`, image]);
        plain.push((await healthyAt(`127.0.0.1:${port}`)) - started);
        await podman(config, ['rm', '-f', '-t', '0', name]);
      }
      log(`podman run → healthy: median ${median(plain).toFixed(0)} ms`);

      const driver = createContainerDriver();
      const viaDriver = [];
      for (let i = 0; i < runs; i++) {
        const ctx = {
          environment,
          migrationId: `mig_b${i}`,
          component: 'web',
          spec: {
            driver: 'ctr',
            version: '1',
            image,
            pull: 'never',
            ports: [{ container: 8080 }],
            env: {},
            replicas: 1,
            placement: { labels: {} },
            dependsOn: [],
            stateful: false,
          },
          driver: { type: 'container', engine: 'podman', runtime: 'runc', config, stopTimeout: 1_000 },
          baseDir: dir,
          stateDir: StateDir.at(join(dir, '.cutover')),
        };
        const call = { signal: new AbortController().signal, log: () => {} };
        const started = performance.now();
        const slot = await driver.provision(ctx, 'green', call);
        viaDriver.push((await healthyAt(slot.addresses[0])) - started);
        await driver.retire(ctx, slot, call);
      }
      log(`cutover driver provision → healthy: median ${median(viaDriver).toFixed(0)} ms`);

      const viaMigrate = [];
      for (let i = 0; i < runs; i++) {
        const listen = `127.0.0.1:${await freePort()}`;
        const file = join(dir, `topology-${i}.yaml`);
        await writeFile(
          file,
          `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${environment}-m${i} }
drivers:
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(config)}, stopTimeout: 1s }
components:
  web:
    driver: ctr
    version: "1"
    image: ${image}
    pull: never
    ports: [{ container: 8080 }]
    health: { http: { path: /health }, interval: 50ms, successThreshold: 1 }
routes:
  public: { listen: "${listen}", to: web }
`,
        );
        const migrated = await runNode([cliPath, 'topology', 'migrate', '-f', file, '--yes'], { cwd: dir });
        if (migrated.code !== 0)
          throw new Error(`migrate exited ${migrated.code}: ${migrated.stderr.slice(0, 500)}`);
        viaMigrate.push(migrated.wallMs);
        const down = await runNode([cliPath, 'topology', 'down', '-f', file, '--yes'], { cwd: dir });
        if (down.code !== 0) throw new Error(`down exited ${down.code}: ${down.stderr.slice(0, 500)}`);
      }
      log(`cutover topology migrate (first deploy) → live: median ${median(viaMigrate).toFixed(0)} ms`);

      const base = median(plain);
      return {
        rows: [
          row('podman run -d → GET /health 200', plain),
          row('cutover container driver: provision → GET /health 200', viaDriver, base),
          row('cutover topology migrate (first deploy, router, gate) → exit', viaMigrate, base),
        ],
        notes: [
          `median of ${runs} runs each, one replica of a FROM scratch busybox httpd image, polled every ${pollMs} ms`,
          "the driver's provision includes its start-up grace (500 ms: a replica must still run then) and an image inspect",
          'migrate: a whole CLI process (node start, plan, journal, health gate every 50 ms, router start and route)',
        ],
      };
    } finally {
      const names = (await podman(config, ['ps', '-a', '--format', '{{.Names}}'])).stdout
        .split('\n')
        .filter((n) => n.startsWith(`${prefix}-`) || n.startsWith(`cutover-${environment}`));
      if (names.length > 0) await podman(config, ['rm', '-f', '-t', '0', ...names]);
      await podman(config, ['rmi', '-f', image]);
    }
  });
}
