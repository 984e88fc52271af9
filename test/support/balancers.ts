/**
 * For the route drivers' tests against a real load balancer (nginx, haproxy, Caddy): the program
 * checked once per file, upstream replicas that answer their slot (`{"version": …}`) so a load
 * generator can tell who answered, a replica that holds its requests, routes and call options.
 */
import { spawnSync } from 'node:child_process';
import { type Agent, createServer } from 'node:http';
import { expect } from 'vitest';
import type { Load, LoadResult } from '../../bench/load.js';
import type { DriverSpec, Route } from '../../core/topology/types.js';
import type { DriverCallOptions, RouteCallContext, SlotInfo } from '../../engine/drivers/types.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { send } from '../router/support.js';
import { loadAnswers } from './load.js';
import type { Resources } from './resources.js';

/** Fails the file, saying how to install it, when `program` (run with `versionArgs`) is not on PATH. */
export function requireProgram(program: string, versionArgs: readonly string[], what: string): void {
  const probe = spawnSync(program, versionArgs, { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(
      `these tests run a real ${what}, and \`${program}\` is not on PATH: install it with \`apt-get install -y ${program}\` (npm run test:deps does, through scripts/test-deps.mjs)`,
    );
}

/** An upstream replica of a slot: answers `{"version": slot, "replica": name}`. */
export async function startReplica(resources: Resources, slot: string, name: string): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ version: slot, replica: name }));
    });
  });
  return resources.listen(server);
}

export async function startSlot(
  resources: Resources,
  slot: 'blue' | 'green',
  replicas = 2,
): Promise<SlotInfo> {
  const addresses: string[] = [];
  for (let i = 1; i <= replicas; i++) addresses.push(await startReplica(resources, slot, `${slot}-${i}`));
  return { component: 'web', slot, version: slot, addresses };
}

/** A blue replica that holds every request until `release()`; `received` resolves on the first. */
export async function startHeldReplica(
  resources: Resources,
): Promise<{ address: string; received: Promise<void>; release: () => void }> {
  let receive = () => {};
  let release = () => {};
  const received = new Promise<void>((resolve) => {
    receive = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = createServer((req, res) => {
    req.resume();
    receive();
    void released.then(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ version: 'blue', replica: 'held' }));
    });
  });
  resources.add(release);
  return { address: await resources.listen(server), received, release };
}

/** A route call of environment `test` whose state directory (and base directory) is `dir`. */
export function balancerContext(dir: string, driver: DriverSpec): RouteCallContext {
  return { environment: 'test', migrationId: 'mig_test', stateDir: StateDir.at(dir), baseDir: dir, driver };
}

/** A route to `web` on `listen`, shifting 10 → 50 → 100 %. */
export function routeSpec(listen: string, extra: Partial<Route> = {}): Route {
  return { listen, to: 'web', shift: [10, 50, 100], drain: { timeout: 10_000 }, ...extra } as Route;
}

/** Options of a driver call that is never aborted; its lines go to `log`. */
export function callOptions(log: string[] = []): DriverCallOptions {
  return { signal: new AbortController().signal, log: (line) => log.push(line) };
}

/** Sends `count` requests one after another (each must answer 200) and counts the versions that answered. */
export async function versionsOf(
  listen: string,
  count: number,
  agent?: Agent,
): Promise<Record<string, number>> {
  const versions: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const answer = await send(listen, agent ? { agent } : {});
    expect(answer.status).toBe(200);
    const version = (JSON.parse(answer.body) as { version: string }).version;
    versions[version] = (versions[version] ?? 0) + 1;
  }
  return versions;
}

/** Versions of the load's requests sent after `afterMs` (load time) that got an answer. */
export function answeredAfter(result: Pick<LoadResult, 'records'>, afterMs: number): Record<string, number> {
  return answeredBetween(result, afterMs, Number.POSITIVE_INFINITY);
}

/** Versions of the load's requests sent from `fromMs` until before `toMs` (load time) that got an answer. */
export function answeredBetween(
  result: Pick<LoadResult, 'records'>,
  fromMs: number,
  toMs: number,
): Record<string, number> {
  const versions: Record<string, number> = {};
  for (const r of result.records)
    if (r.sentAt >= fromMs && r.sentAt < toMs && !r.error)
      versions[r.version ?? '?'] = (versions[r.version ?? '?'] ?? 0) + 1;
  return versions;
}

/** Answers a split must have had before the next change: ~0.6 s of a 500 requests/s load. */
export const answersPerSplit = 300;

/**
 * Under `load`, waits for `answers` answers, then makes each change in turn and waits after each
 * for `answers` answers that came after it returned: every split has carried traffic before the
 * next one. When each change returned (load time), for `answeredBetween`.
 */
export async function changesUnderLoad(
  load: Pick<Load, 'origin' | 'records'>,
  changes: readonly (() => Promise<unknown>)[],
  answers = answersPerSplit,
): Promise<number[]> {
  await loadAnswers(load, answers);
  const returnedAt: number[] = [];
  for (const change of changes) {
    await change();
    const now = Date.now();
    returnedAt.push(now - load.origin);
    await loadAnswers(load, answers, now);
  }
  return returnedAt;
}

/**
 * A driver's `mainServers` for a split of `blue` and `green` replicas (named b0, b1, …, g0, …) at
 * `greenPercent`, as `address=weight`: the weights a driver sets, checked without its balancer.
 */
export function splitWeights(
  mainServers: (entry: { blue: string[]; green: string[]; greenPercent: number }) => {
    address: string;
    weight: number;
  }[],
  blue: number,
  green: number,
  greenPercent: number,
): string[] {
  return mainServers({
    blue: Array.from({ length: blue }, (_, i) => `b${i}`),
    green: Array.from({ length: green }, (_, i) => `g${i}`),
    greenPercent,
  }).map((s) => `${s.address}=${s.weight}`);
}
