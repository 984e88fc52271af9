import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenerPorts, PortPool } from '../../engine/drivers/port-pool.js';
import { unrecordedReplicas } from '../../engine/drivers/process-strays.js';
import type { ProcessIdentity } from '../../platform/process-identity.js';
import { repoRoot, runCli, tempDir } from './cli.js';
import { killRecorded } from './processes.js';

export interface Workspace {
  dir: string;
  file: string;
  stateDir: string;
  cleanup: () => Promise<void>;
}

/**
 * Copies an example or fixture without the state a user's own run left in it (`.cutover/`, the
 * project's tool folders): tests start from the files as committed.
 */
export function copyFixture(from: string, to: string): void {
  const skipped = new Set(['.cutover', 'node_modules', '.tools']);
  cpSync(from, to, { recursive: true, filter: (source) => !skipped.has(path.basename(source)) });
}

/** A copy of a fixture in a temp dir; its cleanup kills every runner the test left and removes it. */
export async function workspace(
  fixture = 'test/fixtures/gated',
  edit?: (yaml: string) => string,
): Promise<Workspace> {
  const { dir, cleanup } = await tempDir();
  copyFixture(path.join(repoRoot, fixture), dir);
  const file = path.join(dir, 'topology.yaml');
  // Tests run side by side: every route listens on a port of its own, found free just now.
  let text = readFileSync(file, 'utf8');
  for (const port of new Set([...text.matchAll(/127\.0\.0\.1:(18\d\d\d)/g)].map((m) => m[1] as string))) {
    text = text.replaceAll(`127.0.0.1:${port}`, `127.0.0.1:${await freePort()}`);
  }
  writeFileSync(file, edit ? edit(text) : text);
  const stateDir = path.join(dir, '.cutover');
  return {
    dir,
    file,
    stateDir,
    cleanup: async () => {
      // The replicas too: a test that failed half way leaves them (ci26: router-supervised's two).
      killSlots(stateDir);
      killRunners(stateDir);
      await cleanup();
    },
  };
}

/** The URL of the workspace's first route (its `listen` address, found free by `workspace`). */
export function routeUrl(ws: Workspace): string {
  return `http://${/listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(ws.file, 'utf8'))?.[1]}/`;
}

/** A port nothing listens on now (bound, read and closed). */
export async function freePort(): Promise<number> {
  const [port] = await routePortPool.take(1);
  return port as number;
}

/**
 * Cache: the ports handed to tests lately (each held a minute), chosen from the 8,000 just below
 * the drivers' range (engine/drivers/port-pool.ts listenerPorts): not from bind(0)'s ephemeral
 * range, where another test's outgoing connection could take one before its route binds it, and
 * not from the drivers' range, where another test's replica could (seen: EADDRINUSE on a route).
 */
const routePortPool = new PortPool(belowDriverPorts());

function belowDriverPorts(): { low: number; high: number } | undefined {
  const drivers = listenerPorts();
  if (drivers === undefined || drivers.low <= 9_024) return undefined;
  return { low: drivers.low - 8_000, high: drivers.low - 1 };
}

/**
 * Kills, by pid, every runner and the router recorded in a state directory (detached runners and
 * the router outlive the CLI that started them). Not this process: a foreground `migrate` run
 * in-process (runCli) drives its migration here, and has returned by now.
 */
export function killRunners(stateDir: string): void {
  killRecordedRunners(stateDir);
  // The router last: a runner still alive supervises it, and would start it again.
  const router = path.join(stateDir, 'router', 'router.json');
  if (existsSync(router)) {
    try {
      killRecorded(JSON.parse(readFileSync(router, 'utf8')) as ProcessIdentity);
    } catch {
      // unreadable: nothing to kill
    }
  }
}

function killRecordedRunners(stateDir: string): void {
  const envs = path.join(stateDir, 'environments');
  if (!existsSync(envs)) return;
  for (const env of readdirSync(envs)) {
    const migrations = path.join(envs, env, 'migrations');
    if (!existsSync(migrations)) continue;
    for (const id of readdirSync(migrations)) {
      const runner = path.join(migrations, id, 'runner.json');
      if (!existsSync(runner)) continue;
      try {
        killRecorded((JSON.parse(readFileSync(runner, 'utf8')) as { process: ProcessIdentity }).process);
      } catch {
        // unreadable: nothing to kill
      }
    }
  }
}

export function setVersion(ws: Workspace, component: string, version: string): void {
  const text = readFileSync(ws.file, 'utf8');
  const re = new RegExp(`(  ${component}:\\n(?:    .*\\n)*?    version: )"[^"]*"`);
  writeFileSync(ws.file, text.replace(re, `$1"${version}"`));
}

export async function migrateDetached(ws: Workspace, extra: string[] = []): Promise<string> {
  const result = await runCli(['topology', 'migrate', '-f', ws.file, '--yes', '--detach', ...extra]);
  if (result.code !== 0) throw new Error(`migrate --detach failed: ${result.stderr}`);
  return result.stdout.trim();
}

export interface Summary {
  id: string;
  lifecycle: string;
  status: string;
  reason: string | null;
  runnerPid: number | null;
}

export async function show(ws: Workspace, id: string): Promise<Summary> {
  const result = await runCli(['topology', 'migration', 'show', id, '-f', ws.file, '--json']);
  // With --json the CLI writes its error on stdout: both, or the failure reads as empty.
  if (result.code !== 0)
    throw new Error(`show failed (exit ${result.code}): ${result.stdout}${result.stderr}`);
  return (JSON.parse(result.stdout) as { summary: Summary }).summary;
}

/** Polls `migration show` until the predicate holds (bounded). */
export async function waitFor(
  ws: Workspace,
  id: string,
  predicate: (s: Summary) => boolean,
  timeoutMs = 20_000,
): Promise<Summary> {
  const deadline = Date.now() + timeoutMs;
  let last: Summary | undefined;
  while (Date.now() < deadline) {
    last = await show(ws, id);
    if (predicate(last)) return last;
    await sleep(100);
  }
  throw new Error(`timed out waiting; last state: ${JSON.stringify(last)}`);
}

export const isFinal = (s: Summary) =>
  ['completed', 'rolled_back', 'cancelled', 'failed'].includes(s.lifecycle);

export function releaseGate(ws: Workspace): void {
  mkdirSync(ws.stateDir, { recursive: true });
  writeFileSync(path.join(ws.stateDir, 'release-gate'), '');
}

export function slotDirs(ws: Workspace): string[] {
  const dir = path.join(ws.stateDir, 'slots');
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}

/**
 * A scratch copy of an example served by examples/app behind the router (examples/live-demo by
 * default), its route moved to a free port; `url` is the route's address.
 */
export async function liveWorkspace(
  edit?: (yaml: string) => string,
  example: { name: string; listen: string } = { name: 'live-demo', listen: '127.0.0.1:18600' },
): Promise<Workspace & { url: string }> {
  const { dir, cleanup } = await tempDir();
  copyFixture(path.join(repoRoot, 'examples', example.name), path.join(dir, example.name));
  copyFixture(path.join(repoRoot, 'examples', 'app'), path.join(dir, 'app'));
  const file = path.join(dir, example.name, 'topology.yaml');
  const port = await freePort();
  const text = readFileSync(file, 'utf8').replaceAll(example.listen, `127.0.0.1:${port}`);
  writeFileSync(file, edit ? edit(text) : text);
  const stateDir = path.join(dir, example.name, '.cutover');
  return {
    dir,
    file,
    stateDir,
    url: `http://127.0.0.1:${port}/`,
    cleanup: async () => {
      await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
      killSlots(stateDir);
      killRunners(stateDir);
      await cleanup();
    },
  };
}

/**
 * Kills, by pid, every replica the process driver recorded (a test that failed half way), and the
 * replicas a runner stopped between spawn and record left unrecorded (found as the driver finds
 * them: process-strays.ts).
 */
export function killSlots(stateDir: string): void {
  const envs = path.join(stateDir, 'environments');
  if (!existsSync(envs)) return;
  for (const env of readdirSync(envs)) {
    const slots = path.join(envs, env, 'slots');
    if (!existsSync(slots)) continue;
    for (const slot of readdirSync(slots)) {
      try {
        const record = JSON.parse(readFileSync(path.join(slots, slot, 'slot.json'), 'utf8')) as {
          replicas: ProcessIdentity[];
        };
        for (const replica of record.replicas) killRecorded(replica, { group: true });
      } catch {
        // no record
      }
      const slotDir = path.join(slots, slot);
      for (const stray of unrecordedReplicas(slotDir, new Set())) killRecorded(stray, { group: true });
    }
  }
}

export function setFileVersion(
  w: Workspace,
  from: string,
  to: string,
  extra?: (yaml: string) => string,
): void {
  const text = readFileSync(w.file, 'utf8').replace(`version: "${from}"`, `version: "${to}"`);
  writeFileSync(w.file, extra ? extra(text) : text);
}
