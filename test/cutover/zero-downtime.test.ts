/**
 * The promise: no maintenance window. Real app processes, the real router, real load (≥ 500
 * requests/s over keep-alive) through every kind of cutover, and not one failed request.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, type TestContext } from 'vitest';
import { routerClient } from '../../router/client.js';
import { readRouterRecord } from '../../router/router-record.js';
// Migrations under load run in their own process (runBinary), as a user runs them: in-process they
// would share this process's CPU with the load, which would then not keep its rate.
import { runBinary, runCli } from '../support/cli.js';
import { loadAnswers, minSentShare, sentRate, startTestLoad } from '../support/load.js';
import {
  freePort,
  liveWorkspace,
  migrateDetached,
  setFileVersion,
  type Workspace,
  waitFor,
} from '../support/migrations.js';
import { running } from '../support/processes.js';
import { eventually } from '../support/wait.js';

type Live = Workspace & { url: string };

/** The live demo migrated to 1.0.0, in a workspace of its own taken down when the test `t` ends. */
async function live(t: TestContext, edit?: (yaml: string) => string): Promise<Live> {
  const w = await liveWorkspace(edit);
  t.onTestFinished(() => w.cleanup());
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  // Said in full when it fails: a first deployment failed once on a loaded CI run, unexplained.
  expect(first.code, first.stdout + first.stderr).toBe(0);
  return w;
}

const rate = 500;

interface Run {
  records: {
    version?: string;
    status: number;
    error?: string;
    sentAt: number;
    doneAt?: number;
    slot?: string;
  }[];
  failed: number;
  /** The first few failed requests, as the load saw them. */
  failures?: unknown[];
  rate: number;
  /** Epoch ms of the load's start: record times are relative to it. */
  startedAt: number;
}

/**
 * Answers before the change (the load flows: its process takes 0.2-0.4 s to start at load 14, where
 * the fixed 500 ms waited here before saw 40-150 answers) and after it (a test wants 100 after).
 */
const answersBefore = 50;
const answersAfter = 150;

async function withLoad(url: string, during: () => Promise<void>): Promise<Run> {
  const startedAt = Date.now();
  const load = startTestLoad({ url, rate });
  await loadAnswers(load, answersBefore);
  await during();
  await loadAnswers(load, answersAfter, Date.now() + 50);
  const result = await load.stop();
  return { ...result, startedAt };
}

/** What the failed requests of `run` were (its first few): the reason a zero-failed check gives. */
function failuresOf(run: Run): string {
  return `${run.failed} of ${run.records.length} failed; the first: ${JSON.stringify(run.failures ?? [])}`;
}

function logOf(w: Workspace, id: string): { at: number; kind: string; message: string }[] {
  const file = path.join(w.stateDir, 'environments', 'live-demo', 'migrations', id, 'log.ndjson');
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

// The tests under load run one at a time (each is 500 requests/s through a router on the same
// cores); the four between them, which wait on their own processes, run at once. Each load is sent
// from a process of its own (`ownProcess`: a session of its own, scheduled as its own group), not
// from this one: beside two CPU hogs an in-process generator fell 889 ms behind and its 256
// requests in flight counted as failed.
describe('zero-downtime cutover through the router', () => {
  it('v1 → v2 under load: zero failed; v2 only after its gate passed; all v2 after the cutover', async (t) => {
    const w = await live(t);
    setFileVersion(w, '1.0.0', '2.0.0');
    let id = '';
    let endedAt = 0;
    const run = await withLoad(w.url, async () => {
      const result = await runBinary(['topology', 'migrate', '-f', w.file, '--yes']);
      expect(result.code).toBe(0);
      endedAt = Date.now();
      id = /^(mig_[0-9a-z]+): completed$/m.exec(result.stdout)?.[1] as string;
    });
    expect(run.failed, failuresOf(run)).toBe(0);
    // The load was really sent (the generator shares 2 cores with the run: 424-445 of 500/s seen),
    // judged on when the requests went out, not when the last answer came (test/support/load.ts).
    expect(sentRate(run)).toBeGreaterThanOrEqual(rate * minSentShare);
    const gatePassed = logOf(w, id).find((l) => l.kind === 'gate_passed')?.at as number;
    const at = (r: Run['records'][number]) => run.startedAt + (r.doneAt ?? 0);
    expect(run.records.filter((r) => r.version === '2.0.0' && at(r) < gatePassed)).toEqual([]);
    const after = run.records.filter((r) => at(r) > endedAt + 50);
    expect(after.length).toBeGreaterThan(100);
    expect(new Set(after.map((r) => r.version))).toEqual(new Set(['2.0.0']));
    expect(run.records.some((r) => r.version === '1.0.0')).toBe(true);
  });

  it('rollback after the cutover, under load: zero failed; all v1 afterwards', async (t) => {
    const w = await live(t);
    setFileVersion(w, '1.0.0', '2.0.0', (y) => `${y}strategy: { commit: manual }\n`);
    const id = await migrateDetached(w);
    await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');
    let endedAt = 0;
    const run = await withLoad(w.url, async () => {
      expect((await runBinary(['topology', 'migration', 'rollback', id, '-f', w.file])).code).toBe(0);
      expect((await waitFor(w, id, (s) => s.lifecycle === 'rolled_back')).lifecycle).toBe('rolled_back');
      endedAt = Date.now();
    });
    expect(run.failed, failuresOf(run)).toBe(0);
    expect(run.records.some((r) => r.version === '2.0.0')).toBe(true);
    const after = run.records.filter((r) => run.startedAt + (r.doneAt ?? 0) > endedAt + 50);
    expect(new Set(after.map((r) => r.version))).toEqual(new Set(['1.0.0']));
  });

  it('a broken green: zero failed, and no request reached green', async (t) => {
    const w = await live(t);
    setFileVersion(w, '1.0.0', '2.0.0', (y) =>
      y.replace('    replicas: 2\n', '    replicas: 2\n    env: { UNHEALTHY: "1" }\n'),
    );
    const run = await withLoad(w.url, async () => {
      const result = await runBinary(['topology', 'migrate', '-f', w.file, '--yes']);
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/failed: health gate failed for web: .* GET \/healthz → 503/);
    });
    expect(run.failed, failuresOf(run)).toBe(0);
    expect(new Set(run.records.map((r) => r.version))).toEqual(new Set(['1.0.0']));
    expect(run.records.filter((r) => r.slot === 'green')).toEqual([]);
  });

  it.concurrent('the health gate checks green through the preview listener before real traffic moves', async (t) => {
    const previewPort = await freePort();
    const w = await live(t, (y) =>
      y.replace('    to: web\n', `    to: web\n    preview: 127.0.0.1:${previewPort}\n`),
    );
    setFileVersion(w, '1.0.0', '2.0.0');
    const migrate = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(migrate.code).toBe(0);
    const lines = migrate.stderr.split('\n');
    const preview = lines.findIndex((l) =>
      l.includes(
        `answers through the preview listener of route www (http://127.0.0.1:${previewPort}/healthz)`,
      ),
    );
    const shift = lines.findIndex((l) => l.includes('route www: 90% blue, 10% green'));
    expect(preview).toBeGreaterThan(-1);
    expect(preview).toBeLessThan(shift);
    // After the commit the preview listener serves the live slot.
    expect(
      ((await (await fetch(`http://127.0.0.1:${previewPort}/`)).json()) as { version: string }).version,
    ).toBe('2.0.0');
  });

  it.concurrent('drain: a 3 s request begun on blue before the cutover completes with 200', async (t) => {
    const w = await live(t);
    setFileVersion(w, '1.0.0', '2.0.0');
    const slow = fetch(`${w.url}slow?ms=3000`).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { version: string },
    }));
    await inFlightToBlue(w);
    const started = Date.now();
    const migrate = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(migrate.code).toBe(0);
    const answer = await slow;
    expect(answer).toEqual({
      status: 200,
      body: expect.objectContaining({ version: '1.0.0', slowMs: 3000 }),
    });
    // The drain waited for it: blue was not retired under it.
    expect(Date.now() - started).toBeGreaterThan(2_500);
  });

  it.concurrent('the drain timeout bounds the wait for a long request', async (t) => {
    // The commit then stops blue with the request still in flight: after stopTimeout, 1 s here (the
    // live demo's 5 s would be waited out by every run, and is not what this test is about).
    const w = await live(t, (y) =>
      y
        .replace('drain: { timeout: 10s }', 'drain: { timeout: 1s }')
        .replace('{ type: process, stopTimeout: 5s }', '{ type: process, stopTimeout: 1s }'),
    );
    setFileVersion(w, '1.0.0', '2.0.0');
    // Still in flight when the migration reaches the drain: beside two CPU hogs it took 5.3-8 s to
    // get there (load 28-34), and a 4 s request had ended (nothing in flight, the drain at once).
    // Longer costs nothing: the commit stops blue after its stopTimeout anyway.
    void fetch(`${w.url}slow?ms=12000`).catch(() => undefined);
    await inFlightToBlue(w);
    const migrate = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(migrate.code).toBe(0);
    expect(migrate.stderr).toContain('1 requests still in flight to blue web after the drain timeout');
    const id = /^(mig_[0-9a-z]+): completed$/m.exec(migrate.stdout)?.[1] as string;
    const log = logOf(w, id);
    const began = log.find((l) => l.kind === 'action_started' && l.message.startsWith('drain_blue:web'))
      ?.at as number;
    const ended = log.find((l) => l.kind === 'action_succeeded' && l.message.startsWith('drain_blue:web'))
      ?.at as number;
    expect(ended - began).toBeGreaterThanOrEqual(900);
    expect(ended - began).toBeLessThan(3_000);
  });

  it.concurrent('a router killed with SIGKILL comes back, from its table, on the right slot', async (t) => {
    const w = await live(t);
    setFileVersion(w, '1.0.0', '2.0.0');
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const record = readRouterRecord(w.stateDir);
    process.kill(record?.pid as number, 'SIGKILL');
    await eventually(() => !running(record?.pid as number)); // dead: its port is free
    const proxy = runBinary(['proxy', '-f', w.file]);
    void proxy;
    await waitForAnswer(w.url);
    const body = (await (await fetch(w.url)).json()) as { version: string };
    expect(body.version).toBe('2.0.0');
  });

  it('the engine killed with SIGKILL mid-migration: traffic keeps flowing, and the migration resumes', async (t) => {
    const w = await live(t, (y) => y.replace('successThreshold: 2', 'successThreshold: 8'));
    setFileVersion(w, '1.0.0', '2.0.0');
    const run = await withLoad(w.url, async () => {
      const id = await migrateDetached(w);
      const inFlight = await waitFor(w, id, (s) => s.status.includes('health_gate'));
      process.kill(inFlight.runnerPid as number, 'SIGKILL');
      await eventually(() => !running(inFlight.runnerPid as number));
      expect((await runBinary(['topology', 'migration', 'resume', id, '-f', w.file])).code).toBe(0);
      expect(
        (await waitFor(w, id, (s) => ['completed', 'failed', 'rolled_back'].includes(s.lifecycle))).lifecycle,
      ).toBe('completed');
    });
    expect(run.failed, failuresOf(run)).toBe(0);
    expect(run.records.at(-1)?.version).toBe('2.0.0');
  });
});

/** Resolves once the router counts one request in flight to blue: the slow request reached it. */
async function inFlightToBlue(w: Workspace): Promise<void> {
  const client = routerClient(w.stateDir);
  await eventually(async () =>
    Object.values((await client.routes()).routes).some((r) => r.inFlight.blue === 1),
  );
}

async function waitForAnswer(url: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not yet
    }
    await sleep(50);
  }
  throw new Error(`${url} does not answer`);
}
