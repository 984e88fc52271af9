/**
 * Dead replicas, end to end with real processes and the real router (issue 18's acceptance): every
 * replica of a live component is killed behind cutover's back; `topology status` shows them not
 * running (text and JSON), the server answers the same at GET /v1/environments/{name}, and
 * `cutover watch --self-heal` repairs it without a person: the route answers 200 again.
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EnvironmentStatus } from '../../core/environment-status.js';
import { runCli } from '../support/cli.js';
import { CliProcess, cleanUp, git, startServer, startWatch, trackStateDir } from '../support/git.js';
import { liveWorkspace, type Workspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';
import { eventually } from '../support/wait.js';

let ws: (Workspace & { url: string }) | null = null;
afterEach(async () => {
  await cleanUp();
  await ws?.cleanup();
  ws = null;
});

/** Traffic moves at once and health passes after one probe: the test is about what happens after. */
const quick = (yaml: string) =>
  yaml.replace('shift: [10, 50, 100]', 'shift: [100]').replace('successThreshold: 2', 'successThreshold: 1');

async function status(file: string, extra: string[] = []): Promise<EnvironmentStatus> {
  const result = await runCli(['topology', 'status', '-f', file, '--json', ...extra]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as EnvironmentStatus;
}

/** The route's answer, or 0 when nothing answers. */
async function answer(url: string): Promise<number> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

/** What two looks at the same environment share (the time of the look and live counters aside). */
function comparable(s: EnvironmentStatus) {
  return {
    ...s,
    observedAt: 'now',
    routes: s.routes.map((r) => ({ ...r, inFlight: r.inFlight === null ? null : 'counted' })),
  };
}

describe('dead replicas', () => {
  it('status shows them, the API says the same, and watch --self-heal repairs them', async () => {
    ws = await liveWorkspace(quick);
    const file = ws.file;
    trackStateDir(ws.stateDir);
    const migrated = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(await answer(ws.url)).toBe(200);

    const healthy = await status(file);
    const web = healthy.components.find((c) => c.name === 'web');
    expect(web?.version).toBe('1.0.0');
    expect(web?.replicas.map((r) => r.state)).toEqual(['running', 'running']);
    expect(web?.replicas.map((r) => r.health.result)).toEqual(['ok', 'ok']);
    expect(healthy.routes).toMatchObject([
      { name: 'www', state: 'served', weights: { blue: 100, green: 0 } },
    ]);
    expect(healthy.drift).toEqual([]);
    expect(healthy.migration).toBeNull();
    expect(healthy.committedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    // `status --watch` off a terminal: a line now, and one more only when something changed.
    const watching = new CliProcess(['topology', 'status', '-f', file, '--watch', '--interval', '200ms']);
    await watching.line(
      /live-demo serial 1; components: web 2\/2; routes: www served 100\/0; migration: none; drift: none$/,
    );

    // Behind cutover's back: every replica killed, by its process group.
    const pids = (web?.replicas ?? []).map((r) => r.pid as number);
    for (const pid of pids) process.kill(-pid, 'SIGKILL');
    for (const pid of pids) await waitGone(pid);
    await eventually(async () => (await answer(ws?.url as string)) !== 200, 10_000);

    await watching.line(/components: web 0\/2; .*drift: component web: 2 of 2 replicas not running$/, {
      timeoutMs: 15_000,
    });
    const lines = watching.out.map((l) => l.text.replace(/^\S+ /, ''));
    expect(lines.filter((line, i) => i > 0 && line === lines[i - 1])).toEqual([]);
    watching.child.kill('SIGINT');
    expect(await watching.exited).toEqual({ code: 0, signal: null });

    const dead = await status(file);
    expect(dead.components.find((c) => c.name === 'web')?.replicas.map((r) => r.state)).toEqual([
      'not_running',
      'not_running',
    ]);
    expect(dead.drift).toEqual([{ kind: 'component', name: 'web', reason: '2 of 2 replicas not running' }]);
    const text = await runCli(['topology', 'status', '-f', file]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('web  1.0.0  slot blue  0/2 running');
    expect(text.stdout).toMatch(/not running/);
    expect(text.stdout).toContain('! component web: 2 of 2 replicas not running');

    // The server on the same state directory answers the same, and 404 for an environment it
    // never saw; `status --server` reads it from there.
    const server = await startServer(ws.stateDir);
    const one = await fetch(`${server.url}/v1/environments/live-demo`);
    expect(one.status).toBe(200);
    expect(comparable((await one.json()) as EnvironmentStatus)).toEqual(comparable(dead));
    const list = (await (await fetch(`${server.url}/v1/environments`)).json()) as { items: unknown[] };
    expect(list.items).toEqual([
      {
        environment: 'live-demo',
        serial: 1,
        committedAt: dead.committedAt,
        components: 1,
        routes: 1,
        migration: null,
        drift: 1,
      },
    ]);
    const unknown = await fetch(`${server.url}/v1/environments/nope`);
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(await unknown.json()).toMatchObject({ status: 404, code: 'ENVIRONMENT_NOT_FOUND' });
    expect(comparable(await status(file, ['--server', server.url]))).toEqual(comparable(dead));
    await server.process.stop();

    // Nobody at the keyboard: the watcher sees the drift and repairs it with a migration of the
    // recorded topology.
    const dir = path.dirname(path.dirname(file));
    await git(dir, 'init', '-q', '-b', 'main');
    await git(dir, 'add', 'live-demo/topology.yaml', 'app');
    await git(dir, 'commit', '-q', '-m', 'live demo');
    const watch = startWatch({
      repo: dir,
      out: path.join(dir, 'plans'),
      stateDir: ws.stateDir,
      extra: ['--file', 'live-demo/topology.yaml', '--self-heal', '--heal-interval', '300ms'],
    });
    const started = await watch.line(
      /self-heal: live-demo: component web: 2 of 2 replicas not running; repairing with migration (mig_\w+)/,
      { timeoutMs: 30_000 },
    );
    const id = started.match[1] as string;
    await watch.line(new RegExp(`self-heal: live-demo: repaired by ${id}`), { timeoutMs: 60_000 });
    expect(await answer(ws.url)).toBe(200);
    const healed = await status(file);
    expect(healed.components[0]?.replicas.map((r) => r.state)).toEqual(['running', 'running']);
    expect(healed.drift).toEqual([]);
    expect(healed.serial).toBe(2);
    // One repair: the next looks find nothing to do.
    expect(watch.matching(/repairing with migration/)).toHaveLength(1);
    await watch.stop();
  }, 180_000);

  it('cutover server --self-heal repairs them too, and logs the repair as an event', async () => {
    ws = await liveWorkspace(quick);
    trackStateDir(ws.stateDir);
    const migrated = await runCli(['topology', 'migrate', '-f', ws.file, '--yes']);
    expect(migrated.code, migrated.stderr).toBe(0);
    const server = new CliProcess([
      'server',
      '--port',
      '0',
      '--state-dir',
      ws.stateDir,
      '--self-heal',
      '--heal-interval',
      '300ms',
    ]);
    const url = (await server.line(/listening on (http:\/\/[0-9.]+:\d+)/, { stream: 'err' }))
      .match[1] as string;
    const pids = (await status(ws.file)).components[0]?.replicas.map((r) => r.pid as number) ?? [];
    for (const pid of pids) process.kill(-pid, 'SIGKILL');
    // The server's log is JSON lines: the repair is one, with the event as its fields.
    const started = await server.line(/"type":"repair_started"/, { timeoutMs: 30_000 });
    const event = (JSON.parse(started.text) as { selfHeal: Record<string, unknown> }).selfHeal;
    expect(event).toMatchObject({
      environment: 'live-demo',
      drift: [{ kind: 'component', name: 'web', reason: '2 of 2 replicas not running' }],
    });
    expect(JSON.parse(started.text).msg).toBe(
      `self-heal: live-demo: component web: 2 of 2 replicas not running; repairing with migration ${event.migrationId}`,
    );
    await server.line(new RegExp(`"type":"repair_completed".*"migrationId":"${event.migrationId}"`), {
      timeoutMs: 60_000,
    });
    expect(await answer(ws.url)).toBe(200);
    const after = (await (await fetch(`${url}/v1/environments/live-demo`)).json()) as EnvironmentStatus;
    expect(after.drift).toEqual([]);
    expect(after.components[0]?.replicas.map((r) => r.state)).toEqual(['running', 'running']);
    await server.stop();
  }, 180_000);

  it('an environment never migrated is an error naming the state directory, exit 1', async () => {
    ws = await liveWorkspace();
    const result = await runCli(['topology', 'status', '-f', ws.file]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^cutover: environment live-demo has no recorded layout in \S+\.cutover: it was never migrated; /,
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });
});
