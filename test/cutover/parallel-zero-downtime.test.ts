/**
 * Zero failed requests with several components and several routes, the plan run as a graph (calls
 * in flight side by side). Three real process components, db ← api and db ← web, behind the real
 * router on two routes (`public` → web, `api` → api), each route under its own steady load; every
 * response is checked: 200, from the component the route points to (the app answers
 * `<component>@<version>`), and at the end from the right version.
 *
 * One layout serves the scenarios in order, each starting where the one before ended (1.0.0):
 * migrate to 2.0.0, roll back to the previous layout, a failing gate in one component while
 * another's is held in flight, one that fails after another passed (its route may have moved),
 * then SIGKILL of the runner with two gates in flight and `resume`. Linux: processes are looked up
 * in /proc.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeCommand } from '../../core/migration/queries.js';
import type { MigrationState } from '../../core/migration/types.js';
import { procStat } from '../../platform/process-identity.js';
// Migrations under load run in their own process (runBinary), as a user runs them: in-process they
// would share this process's CPU with the load, which would then not keep its rate.
import { repoRoot, runBinary, runCli, tempDir } from '../support/cli.js';
import { loadAnswers, startTestLoad } from '../support/load.js';
import {
  copyFixture,
  freePort,
  killRunners,
  killSlots,
  migrateDetached,
  type Summary,
  waitFor,
} from '../support/migrations.js';
import { eventually } from '../support/wait.js';

/** Requests per second on each route: what two loaded cores sustain beside the suite. */
const ratePerRoute = 150;
/**
 * Answers on each route before the operation under test (the load flows: its process takes 0.2-0.4 s
 * to start at load 14, most of the 400 ms waited here before) and after it (`expectServed` wants
 * more than 10), so both ends of it are seen under load.
 */
const answersBefore = 15;
const answersAfter = 20;
/** Responses finished this long after an operation ended must all come from its outcome. */
const settleMs = 50;
const environment = 'parallel-load';
/** Every scenario moves between these two versions (blue and green, one way or the other). */
const versions = ['1.0.0', '2.0.0'];
const routes = { public: 'web', api: 'api' } as const;
type Route = keyof typeof routes;

interface Options {
  version: string;
  /** Extra environment of a component's replicas (e.g. UNHEALTHY, HOLD_FILE). */
  env?: Partial<Record<'db' | 'api' | 'web', Record<string, string>>>;
  /** Failed probes in a row that fail a component's gate (default 3). */
  failureThreshold?: Partial<Record<'db' | 'api' | 'web', number>>;
}

let dir = '';
let file = '';
let stateDir = '';
let removeDir: () => Promise<void> = async () => undefined;
const appDir = () => path.join(dir, 'app');
const ports = {} as Record<Route, number>;
const url = (route: Route) => `http://127.0.0.1:${ports[route]}/`;

function topology({ version, env = {}, failureThreshold = {} }: Options): string {
  const component = (name: 'db' | 'api' | 'web', replicas: number, dependsOn: string[]) => {
    const extra = Object.entries(env[name] ?? {})
      .map(([k, v]) => `${k}: ${JSON.stringify(v)}`)
      .join(', ');
    return `  ${name}:
    driver: apps
    version: "${version}"
    run: { command: [node, hold.mjs], cwd: ../app }
    replicas: ${replicas}
    dependsOn: [${dependsOn.join(', ')}]
    env: { ${extra} }
    health: # deadline: a held replica refuses connections, not counted within 10 % of it (12 s)
      http: { path: /healthz }
      interval: 200ms
      successThreshold: 2
      failureThreshold: ${failureThreshold[name] ?? 3}
      deadline: 2m
`;
  };
  const route = (name: Route) => `  ${name}:
    listen: 127.0.0.1:${ports[name]}
    to: ${routes[name]}
    shift: [10, 50, 100]
    drain: { timeout: 10s }
`;
  return `apiVersion: cutover/v1
kind: Topology
metadata:
  name: ${environment}
drivers:
  apps: { type: process, stopTimeout: 5s }
components:
${component('db', 1, [])}${component('api', 2, ['db'])}${component('web', 2, ['db'])}routes:
${route('public')}${route('api')}`;
}

function write(options: Options): void {
  writeFileSync(file, topology(options));
}

const envDir = () => path.join(stateDir, 'environments', environment);

interface Load {
  route: Route;
  records: { status: number; error?: string; version?: string; doneAt?: number }[];
  failed: number;
  /** Requests per second the generator kept up. */
  rate: number;
  origin: number;
}

/** Steady load on every route around `during`; what each route's requests got. */
async function underLoad(during: () => Promise<void>): Promise<Load[]> {
  const loads = (Object.keys(routes) as Route[]).map((route) => ({
    route,
    load: startTestLoad({ url: url(route), rate: ratePerRoute }),
  }));
  const stopAll = () =>
    Promise.all(
      loads.map(async ({ route, load }) => ({ route, origin: load.origin, ...(await load.stop()) })),
    );
  try {
    // Each route's load answered before the change, and again after it (awaited, not slept).
    await Promise.all(loads.map(({ load }) => loadAnswers(load, answersBefore)));
    await during();
    const endedAt = Date.now();
    await Promise.all(loads.map(({ load }) => loadAnswers(load, answersAfter, endedAt + settleMs)));
  } catch (error) {
    await stopAll();
    throw error;
  }
  return stopAll();
}

/**
 * Responses that failed, or came from another component than the route's or another version than
 * the migration's two (none, for a pass).
 */
function wrong(load: Load): Load['records'] {
  const served = new Set(versions.map((v) => `${routes[load.route]}@${v}`));
  return load.records.filter((r) => r.error || r.status !== 200 || !served.has(r.version ?? ''));
}

/** The versions each route served after `endedAt` (epoch ms), with how many responses that was. */
function servedAfter(loads: Load[], endedAt: number): Record<Route, { versions: string[]; count: number }> {
  const out = {} as Record<Route, { versions: string[]; count: number }>;
  for (const load of loads) {
    const after = load.records.filter((r) => load.origin + (r.doneAt ?? 0) > endedAt + settleMs);
    out[load.route] = {
      versions: [...new Set(after.map((r) => r.version ?? '?'))].sort(),
      count: after.length,
    };
  }
  return out;
}

function expectNoFailures(loads: Load[]): void {
  for (const load of loads) {
    // A load that stalled would prove little: it kept (most of) its rate.
    expect(load.rate, load.route).toBeGreaterThanOrEqual(ratePerRoute * 0.9);
    expect({ route: load.route, wrong: wrong(load).slice(0, 5) }).toEqual({ route: load.route, wrong: [] });
    expect(load.failed).toBe(0);
  }
}

function expectServed(loads: Load[], endedAt: number, version: string): void {
  const served = servedAfter(loads, endedAt);
  for (const route of Object.keys(routes) as Route[]) {
    expect(served[route].versions, route).toEqual([`${routes[route]}@${version}`]);
    expect(served[route].count, route).toBeGreaterThan(10);
  }
}

interface Slot {
  slotId: string;
  pids: number[];
}

/** Every slot the process driver recorded, with the pids of its replicas. */
function slots(): Slot[] {
  const root = path.join(envDir(), 'slots');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((slotId) => {
    const record = path.join(root, slotId, 'slot.json');
    if (!existsSync(record)) return [];
    const { replicas } = JSON.parse(readFileSync(record, 'utf8')) as { replicas: { pid: number }[] };
    return [{ slotId, pids: replicas.map((r) => r.pid) }];
  });
}

/** The live slot of each component, from the recorded layout. */
function liveSlots(): string[] {
  const layout = JSON.parse(readFileSync(path.join(envDir(), 'layout.json'), 'utf8')) as {
    slots: Record<string, { details: { slotId: string } }>;
  };
  return Object.values(layout.slots).map((s) => s.details.slotId);
}

/** Whether a process runs (an exited one that nobody reaped yet, a zombie, does not). */
function running(pid: number): boolean {
  const state = procStat(pid)?.[0];
  return state !== undefined && state !== 'Z' && state !== 'X';
}

/** Running processes whose working directory is `cwd` or whose command line contains `text`. */
function processes(match: { cwd?: string; text?: string }): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        if (match.cwd !== undefined && readlinkSync(`/proc/${pid}/cwd`) !== match.cwd) return false;
        if (match.text !== undefined && !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(match.text))
          return false;
      } catch {
        return false; // gone, or not ours
      }
      return running(pid);
    });
}

/**
 * No orphans: the app processes that run (found by their working directory, recorded or not) are
 * exactly the replicas of the live slots, and no process runs the migration `id` (its runners).
 * Each retirement waits for its processes, so this holds once the migration has ended; the runner
 * exits just after its last journal line, hence the wait for it.
 */
async function expectNoOrphans(id: string): Promise<void> {
  const live = new Set(liveSlots());
  expect(live.size).toBe(3);
  const expected = slots()
    .filter((s) => live.has(s.slotId))
    .flatMap((s) => s.pids)
    .sort();
  expect(expected.length).toBe(5);
  expect(processes({ cwd: appDir() }).sort()).toEqual(expected);
  await eventually(
    () => processes({ text: id }).length === 0,
    10_000,
    () => `runners of ${id} still run`,
  );
  // One router serves the state directory (two routes created at once each made sure one ran).
  expect(processes({ text: `proxy\0--state-dir\0${stateDir}\0` })).toHaveLength(1);
}

function journalKinds(id: string): { type: string; commandId?: string }[] {
  return readFileSync(path.join(envDir(), 'migrations', id, 'journal.ndjson'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

const ws = () => ({ dir, file, stateDir, cleanup: async () => undefined });

async function showState(id: string): Promise<{ summary: Summary; state: MigrationState }> {
  const result = await runCli(['topology', 'migration', 'show', id, '-f', file, '--json']);
  if (result.code !== 0) throw new Error(`show ${id}: ${result.stderr}`);
  return JSON.parse(result.stdout) as { summary: Summary; state: MigrationState };
}

const completedId = (stdout: string) => /^(mig_[0-9a-z]+): completed$/m.exec(stdout)?.[1];

beforeAll(async () => {
  ({ dir, cleanup: removeDir } = await tempDir());
  copyFixture(path.join(repoRoot, 'examples', 'app'), path.join(dir, 'app'));
  copyFixture(path.join(repoRoot, 'test', 'fixtures', 'held-app'), path.join(dir, 'app'));
  const envHome = path.join(dir, 'env');
  mkdirSync(envHome);
  file = path.join(envHome, 'topology.yaml');
  stateDir = path.join(envHome, '.cutover');
  ports.public = await freePort();
  ports.api = await freePort();
  write({ version: '1.0.0' });
  const first = await runCli(['topology', 'migrate', '-f', file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  if (!file) return;
  await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
  killSlots(stateDir);
  killRunners(stateDir);
  await removeDir();
}, 60_000);

describe('several components and routes under load, calls in flight side by side', () => {
  it('migrates all three at once: zero failed, every route ends on green', async () => {
    write({ version: '2.0.0' });
    let endedAt = 0;
    let stdout = '';
    const loads = await underLoad(async () => {
      const result = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
      endedAt = Date.now();
      expect(result.code, result.stderr).toBe(0);
      stdout = result.stdout;
    });
    const id = completedId(stdout) as string;
    expect(id).toBeDefined();
    expectNoFailures(loads);
    expectServed(loads, endedAt, '2.0.0');
    for (const load of loads) expect(load.records.some((r) => r.version?.endsWith('@1.0.0'))).toBe(true);
    await expectNoOrphans(id);
  }, 60_000);

  it('rolls back after the cutover (--to previous): zero failed, every route back on 1.0.0', async () => {
    let endedAt = 0;
    let id = '';
    const loads = await underLoad(async () => {
      const result = await runBinary(['topology', 'rollback', '--to', 'previous', '-f', file, '--yes']);
      endedAt = Date.now();
      expect(result.code, result.stderr).toBe(0);
      id = completedId(result.stdout) as string;
    });
    expect(id).toBeDefined();
    expectNoFailures(loads);
    expectServed(loads, endedAt, '1.0.0');
    await expectNoOrphans(id);
  }, 60_000);

  it("a failing gate in web while api's is in flight: rolled back, zero failed, blue served, green gone", async () => {
    const hold = path.join(dir, 'hold-gate');
    write({ version: '2.0.0', env: { web: { UNHEALTHY: '1' }, api: { HOLD_FILE: hold } } });
    const before = new Set(slots().map((s) => s.slotId));
    let endedAt = 0;
    let stdout = '';
    const loads = await underLoad(async () => {
      const result = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
      endedAt = Date.now();
      expect(result.code).toBe(1);
      stdout = result.stdout;
    });
    writeFileSync(hold, ''); // lets any held replica go (none should be left to)
    expect(stdout).toMatch(/^mig_\w+: failed: health gate failed for web: .*GET \/healthz → 503/m);
    const id = /^(mig_\w+): failed/m.exec(stdout)?.[1] as string;
    expectNoFailures(loads);
    // No route moved: every response came from blue, before and after.
    for (const load of loads) {
      expect(new Set(load.records.map((r) => r.version))).toEqual(new Set([`${routes[load.route]}@1.0.0`]));
    }
    expectServed(loads, endedAt, '1.0.0');
    // Green db passed its gate and api's was in flight (held) when web's failed: all three green
    // slots were started, and all are gone; api's gate was cancelled, not waited out.
    const green = slots().filter((s) => !before.has(s.slotId));
    expect(green.map((s) => s.slotId).sort()).toEqual([`api-${id}`, `db-${id}`, `web-${id}`]);
    expect(green.flatMap((s) => s.pids).filter(running)).toEqual([]);
    expect(journalKinds(id).some((e) => e.type === 'command_cancelled')).toBe(true);
    await expectNoOrphans(id);
  }, 60_000);

  it("a gate that fails late in web, after api's passed (and its route may have moved): zero failed, every route back on blue", async () => {
    // 15 failures in a row at 200 ms: api's gate passes well before web's fails. A runner that
    // shifts each route once its own component passed has moved route api to green by then.
    write({ version: '2.0.0', env: { web: { UNHEALTHY: '1' } }, failureThreshold: { web: 15 } });
    let endedAt = 0;
    let stdout = '';
    const loads = await underLoad(async () => {
      const result = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
      endedAt = Date.now();
      expect(result.code).toBe(1);
      stdout = result.stdout;
    });
    expect(stdout).toMatch(/^mig_\w+: failed: health gate failed for web: .*\(15 failures in a row\)/m);
    const id = /^(mig_\w+): failed/m.exec(stdout)?.[1] as string;
    expectNoFailures(loads);
    expect(loads.find((l) => l.route === 'public')?.records.some((r) => r.version === 'web@2.0.0')).toBe(
      false,
    );
    expectServed(loads, endedAt, '1.0.0');
    expect(
      slots()
        .filter((s) => s.slotId.endsWith(id))
        .flatMap((s) => s.pids)
        .filter(running),
    ).toEqual([]);
    await expectNoOrphans(id);
  }, 60_000);

  it('SIGKILL of the runner with the gates of api and web in flight, then resume: zero failed, ends on green', async () => {
    const hold = path.join(dir, 'hold-crash');
    write({ version: '2.0.0', env: { web: { HOLD_FILE: hold }, api: { HOLD_FILE: hold } } });
    let endedAt = 0;
    let id = '';
    let inflightAtKill: string[] = [];
    const loads = await underLoad(async () => {
      id = await migrateDetached(ws());
      // The event: both gates are in flight together (the journal's state), and all four of their
      // replicas are held (each wrote its marker beside the hold file).
      let runnerPid = 0;
      let inflight: MigrationState['inflight'] = [];
      await eventually(async () => {
        const { summary, state } = await showState(id);
        runnerPid = summary.runnerPid ?? 0;
        inflight = state.inflight;
        const what = inflight.map(describeCommand).sort().join();
        const held = readdirSync(dir).filter((f) => f.startsWith(`${path.basename(hold)}.`));
        return (
          what === 'health check of green api,health check of green web' && runnerPid > 0 && held.length === 4
        );
      }, 30_000);
      inflightAtKill = inflight.map((c) => c.id);
      process.kill(runnerPid, 'SIGKILL');
      await eventually(() => !running(runnerPid), 10_000);
      writeFileSync(hold, '');
      const resumed = await runBinary(['topology', 'migration', 'resume', id, '-f', file]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stderr).toContain(`${id} had no running process; a new one picked it up.`);
      const final = await waitFor(
        ws(),
        id,
        (s) => ['completed', 'failed', 'rolled_back'].includes(s.lifecycle),
        40_000,
      );
      endedAt = Date.now();
      expect(final.lifecycle).toBe('completed');
    });
    expectNoFailures(loads);
    expectServed(loads, endedAt, '2.0.0');
    // Both gates in flight at the kill ran again under the new runner (the killed one recorded
    // no result for them); it left nothing running.
    const succeeded = journalKinds(id).flatMap((e) => (e.type === 'command_succeeded' ? [e.commandId] : []));
    expect(succeeded).toEqual(expect.arrayContaining(inflightAtKill));
    await expectNoOrphans(id);
  }, 90_000);
});
