/**
 * A real Podman for the container driver's tests, isolated by name: every image, container and
 * volume a test file makes carries its own random prefix, and cleanup removes those by name (and
 * by the environment label it chose), never by a broad pattern.
 *
 * This machine's quirks are settings of the driver, as a user would write them: crun fails here
 * ("cgroups in hybrid mode not supported") → `runtime: runc`; podman's default ulimits need
 * CAP_SYS_RESOURCE → a containers.conf of the test's own with `default_ulimits = []` (`config:`).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inject } from 'vitest';

export const busyboxPath = '/bin/busybox';

/**
 * The test app: busybox httpd on $PORT (8080 when unset) serving /version ($VERSION, then the
 * image's own mark), / (the same as JSON `{"version", "mark"}`, what bench/load.js reads) and
 * /health; SIGTERM ends it at once (as PID 1 a shell has no default handler). Two ways to fail or
 * hold its health check: an image built with a mark containing `unhealthy` never serves /health
 * (404: a broken build); with HOLD_FILE set, /health appears only once that file exists (a gate
 * the test holds and releases).
 */
const appScript = `#!/bin/sh
mkdir -p /www
mark="$(cat /image-mark)"
echo "\${VERSION:-none} $mark" > /www/version
echo "{\\"version\\":\\"\${VERSION:-none}\\",\\"mark\\":\\"$mark\\"}" > /www/index.html
echo "app \${VERSION:-none} ($mark) listening on \${PORT:-8080}"
case "$mark" in
  *unhealthy*) echo "no /health: this build cannot reach its database" >&2 ;;
  *) if [ -n "$HOLD_FILE" ]; then
       ( while [ ! -e "$HOLD_FILE" ]; do sleep 0.1; done; echo ok > /www/health ) &
     else
       echo ok > /www/health
     fi ;;
esac
httpd -f -p "\${PORT:-8080}" -h /www &
trap 'kill $! 2>/dev/null; exit 0' TERM INT
wait
`;

export interface PodmanResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface PodmanFixture {
  /** Unique per test file run: `ctest<hex>`, a valid environment name and name prefix. */
  prefix: string;
  dir: string;
  /** The containers.conf the driver settings name. */
  config: string;
  /** `drivers.<name>` for the tests' topologies and contexts. */
  driver: { type: 'container'; engine: 'podman'; runtime: string; config: string; stopTimeout: number };
  /**
   * `localhost/<prefix>-app:<tag>` with `mark` in /image-mark; returns the image id. In the infra
   * project the run's own build of that mark is tagged (built once per run); a mark it did not
   * build is built here.
   */
  build(tag: string, mark: string): Promise<string>;
  image(tag: string): string;
  /** `podman` with the fixture's runtime and config. */
  podman(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /**
   * Serves this Podman's API on a unix socket in the fixture's directory (`podman system service`),
   * for the docker CLI: the driver's `engine: docker` with `host: unix://…`. Stopped by cleanup.
   */
  dockerSocket(): Promise<string>;
  /**
   * A second engine, as a second host would be: `podman system service` on its own socket with its
   * own storage root, run root and tmpdir (vfs storage: no overlay mount left behind), holding
   * copies of `images`. `podman(args)` talks to it. Stopped and removed by cleanup.
   */
  secondHost(images: string[]): Promise<{ url: string; podman(args: string[]): Promise<PodmanResult> }>;
  /** Removes this run's containers (by the environments' labels), volumes and images; then the dir. */
  cleanup(environments: string[]): Promise<void>;
}

/**
 * Writes a build context for the test app into `dir` (the Containerfile, busybox, app.sh) and the
 * containers.conf the tests' Podman uses; returns that config's path.
 */
export async function writeBuildContext(dir: string): Promise<string> {
  const config = path.join(dir, 'containers.conf');
  await writeFile(config, '[containers]\ndefault_ulimits = []\n');
  await copyFile(busyboxPath, path.join(dir, 'busybox'));
  await writeFile(path.join(dir, 'app.sh'), appScript, { mode: 0o755 });
  await writeFile(
    path.join(dir, 'Containerfile'),
    [
      'FROM scratch',
      'COPY busybox /bin/busybox',
      'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
      'COPY app.sh /app.sh',
      'COPY image-mark /image-mark',
      'CMD ["/app.sh"]',
      '',
    ].join('\n'),
  );
  return config;
}

/** `podman` (with runc and `config`, or remote with `local` false), never throwing: its result. */
export function runPodman(args: string[], config: string, local = true): Promise<PodmanResult> {
  // podman --url (a remote client) takes no --runtime: the service runs its own.
  return new Promise<PodmanResult>((resolve) => {
    execFile(
      'podman',
      [...(local ? ['--runtime', 'runc'] : []), ...args],
      { env: { ...process.env, CONTAINERS_CONF: config }, timeout: 120_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Builds `name` from the context in `dir` with `mark` in /image-mark; its image id (`sha256:…`). */
export async function buildImage(dir: string, config: string, name: string, mark: string): Promise<string> {
  await writeFile(path.join(dir, 'image-mark'), `${mark}\n`);
  const built = await runPodman(['build', '-q', '-t', name, dir], config);
  if (built.code !== 0) throw new Error(`podman build of ${name} failed: ${built.stderr}`);
  const id = await runPodman(['image', 'inspect', '--format', '{{.Id}}', name], config);
  if (id.code !== 0) throw new Error(`podman image inspect ${name} failed: ${id.stderr}`);
  return `sha256:${id.stdout.trim()}`;
}

/**
 * The images test/support/podman-global-setup.ts built once for the run, by mark: what
 * `fixture.build(tag, mark)` tags instead of building again. Empty outside the infra project.
 */
function prebuiltImages(): Record<string, { name: string; id: string }> {
  try {
    return inject('podmanImages') ?? {};
  } catch {
    return {};
  }
}

export async function podmanFixture(): Promise<PodmanFixture> {
  const prefix = `ctest${randomBytes(4).toString('hex')}`;
  const dir = await mkdtemp(path.join(tmpdir(), `cutover-${prefix}-`));
  const config = await writeBuildContext(dir);
  const images = new Set<string>();
  const ids = new Set<string>();
  const podman = (args: string[], local = true) => runPodman(args, config, local);
  const image = (tag: string) => `localhost/${prefix}-app:${tag}`;
  const services: ChildProcess[] = [];
  const secondHosts: ((args: string[]) => Promise<PodmanResult>)[] = [];
  return {
    prefix,
    dir,
    config,
    driver: { type: 'container', engine: 'podman', runtime: 'runc', config, stopTimeout: 5_000 },
    image,
    podman,
    async build(tag, mark) {
      const prebuilt = prebuiltImages()[mark];
      if (prebuilt) {
        // The run's build of this mark, under this fixture's name: the same image id.
        const tagged = await podman(['tag', prebuilt.name, image(tag)]);
        if (tagged.code !== 0) throw new Error(`podman tag ${prebuilt.name} failed: ${tagged.stderr}`);
        images.add(image(tag));
        return prebuilt.id;
      }
      const id = await buildImage(dir, config, image(tag), mark);
      images.add(image(tag));
      ids.add(id);
      return id;
    },
    async dockerSocket() {
      const socket = path.join(dir, 'podman.sock');
      const service = spawn(
        'podman',
        ['--runtime', 'runc', 'system', 'service', '--time=0', `unix://${socket}`],
        {
          env: { ...process.env, CONTAINERS_CONF: config },
          stdio: 'ignore',
        },
      );
      services.push(service);
      const deadline = Date.now() + 20_000;
      while (!existsSync(socket)) {
        if (Date.now() > deadline || service.exitCode !== null)
          throw new Error('podman system service did not start');
        await sleep(20);
      }
      return socket;
    },
    async secondHost(names) {
      const root = path.join(dir, 'host-b');
      const socket = path.join(root, 'b.sock');
      const storage = [
        '--root',
        path.join(root, 'root'),
        '--runroot',
        path.join(root, 'run'),
        '--tmpdir',
        path.join(root, 'tmp'),
        '--storage-driver',
        'vfs',
      ];
      const service = spawn(
        'podman',
        ['--runtime', 'runc', ...storage, 'system', 'service', '--time=0', `unix://${socket}`],
        {
          env: { ...process.env, CONTAINERS_CONF: config },
          stdio: 'ignore',
        },
      );
      services.push(service);
      const deadline = Date.now() + 20_000;
      while (!existsSync(socket)) {
        if (Date.now() > deadline || service.exitCode !== null)
          throw new Error('second podman service did not start');
        await sleep(20);
      }
      const url = `unix://${socket}`;
      const remote = (args: string[]) => podman(['--url', url, ...args], false);
      for (const name of names) {
        const archive = path.join(root, 'image.tar');
        const saved = await podman(['save', '-o', archive, name]);
        if (saved.code !== 0) throw new Error(`podman save ${name} failed: ${saved.stderr}`);
        const loaded = await remote(['load', '-i', archive]);
        if (loaded.code !== 0) throw new Error(`podman load into the second host failed: ${loaded.stderr}`);
        await rm(archive, { force: true });
      }
      // The host's store is this fixture's alone: cleanup empties all of it.
      secondHosts.push(remote);
      return { url, podman: remote };
    },
    async cleanup(environments) {
      for (const environment of environments) {
        const filter = ['--filter', `label=dev.cutover.environment=${environment}`];
        const names = (await podman(['ps', '-a', ...filter, '--format', '{{.Names}}'])).stdout
          .split('\n')
          .filter((n) => n.startsWith(`cutover-${environment}-`));
        if (names.length > 0) await podman(['rm', '-f', '-t', '0', ...names]);
        const volumes = (await podman(['volume', 'ls', ...filter, '--format', '{{.Name}}'])).stdout
          .split('\n')
          .filter((n) => n.startsWith(`cutover-${environment}-`));
        if (volumes.length > 0) await podman(['volume', 'rm', '-f', ...volumes]);
      }
      // This fixture's names (`untag <name> <name>` removes that name only: a run's shared build
      // keeps its own), then the images it built itself, now nameless (a rebuilt tag leaves its
      // earlier image untagged).
      for (const name of images) await podman(['untag', name, name]);
      // Not forced: an image another run also has (the same content, the same id) keeps its names.
      for (const id of ids) await podman(['rmi', id]);
      for (const remote of secondHosts) {
        await remote(['rm', '-f', '-t', '0', '--all']);
        await remote(['volume', 'rm', '-f', '--all']);
      }
      for (const service of services) {
        if (service.exitCode !== null) continue;
        const gone = new Promise((resolve) => service.once('exit', resolve));
        service.kill('SIGTERM');
        await gone;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
