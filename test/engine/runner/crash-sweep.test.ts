/**
 * The crash sweep of the local runner, in process: a migration of three components (a → b → c, a
 * stateful, one driver call at a time) is stopped inside each driver call it makes, forward and
 * while rolling back — the call never returns and the runner stops driving, with the journal as the
 * crash leaves it — and a new runner is started from the same state directory, as `migration
 * resume` does. The drivers are a recording set (test/support/recording-drivers.ts): what is
 * tested is the runner and its journal. Each case then checks what DESIGN.md §4 promises: the
 * migration ends where it would have ended, the journal is whole, the layout serial moved exactly
 * once (or not at all after a rollback), the interrupted call ran again, blue is never touched
 * before the commit, green slots of a rollback are retired. Real SIGKILLs of the runner process
 * (health-gate and commit boundaries, mid-script kills, rollbacks, orphaned scripts, a torn line,
 * a paused runner) stay in test/e2e/crash.test.ts.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { describeCommand } from '../../../core/migration/queries.js';
import { replay } from '../../../core/migration/step.js';
import type { MigrationEvent, MigrationState } from '../../../core/migration/types.js';
import { readJournal } from '../../../engine/runner/journal.js';
import { LocalRunner } from '../../../engine/runner/local-runner.js';
import { noSecrets } from '../../../engine/secrets/secret-source.js';
import { createMigration } from '../../../engine/services/migrations.js';
import { topologySource } from '../../../engine/sources/topology-source.js';
import { readCurrentLayout } from '../../../engine/store/layout-store.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { tempDir } from '../../support/cli.js';
import {
  type CallName,
  callName,
  type RecordedCall,
  RecordingDrivers,
} from '../../support/recording-drivers.js';
import { eventually } from '../../support/wait.js';

const environment = 'crash';
const components = ['a', 'b', 'c'] as const;

/** test/fixtures/slow-exec's topology without its health script (the drivers are recorded here). */
function topology(version: string, parallelism = 1): string {
  const component = (name: string, extra: string) =>
    `  ${name}:\n    driver: infra\n    version: "${version}"\n${extra}`;
  return [
    'apiVersion: cutover/v1',
    'kind: Topology',
    'metadata:',
    `  name: ${environment}`,
    'drivers:',
    '  infra:',
    '    type: exec',
    '    dir: ./infra',
    'components:',
    component('a', '    stateful: true\n'),
    component('b', '    dependsOn: [a]\n'),
    component('c', '    dependsOn: [b]\n'),
    'strategy:',
    `  parallelism: ${parallelism}`,
    '',
  ].join('\n');
}

/**
 * What the runner has in flight after each journal event of an uninterrupted run: after event k
 * (k = 1 is `created`) it runs sequence[k - 1], and the driver call it makes (null: none, the
 * health gate without a probe and recording the layout).
 */
const sequence: [string, CallName | null][] = [
  ['provision green a', 'provision:a:green'],
  ['provision green b', 'provision:b:green'],
  ['provision green c', 'provision:c:green'],
  ['replicate a', 'replicate:a:green'],
  ['health check of green a', null],
  ['health check of green b', null],
  ['health check of green c', null],
  ['drain blue c', 'drain:c:blue'],
  ['drain blue b', 'drain:b:blue'],
  ['drain blue a', 'drain:a:blue'],
  ['record the new layout', null],
  ['retire blue c', 'retire:c:blue'],
  ['retire blue b', 'retire:b:blue'],
  ['retire blue a', 'retire:a:blue'],
];
const totalEvents = sequence.length + 1;

/** One case's world: a state directory with the base layout live, and the drivers' record. */
interface World {
  stateDir: StateDir;
  dir: string;
  drivers: RecordingDrivers;
  baseSerial: number;
  blue: Record<string, string>;
  /** Runners started, so that none outlives the case. */
  runners: LocalRunner[];
}

/**
 * A new state directory where base (version "1") has been migrated to completion; removed, its
 * runners stopped, when the test ends.
 */
async function world(ctx: TestContext): Promise<World> {
  const { dir, cleanup } = await tempDir('cutover-crash-sweep-');
  const w: World = {
    stateDir: StateDir.at(path.join(dir, 'state')),
    dir,
    drivers: new RecordingDrivers(),
    baseSerial: 0,
    blue: {},
    runners: [],
  };
  ctx.onTestFinished(async () => {
    for (const runner of w.runners) runner.detach();
    await cleanup();
  });
  mkdirSync(path.join(dir, 'infra'));
  writeFileSync(path.join(dir, 'base.yaml'), topology('1'));
  writeFileSync(path.join(dir, 'topology.yaml'), topology('2'));
  writeFileSync(path.join(dir, 'parallel.yaml'), topology('2', 4));
  const base = await start(w, 'base.yaml', 0);
  expect((await base.runner.done()).lifecycle).toBe('completed');
  const layout = await readCurrentLayout(w.stateDir, environment);
  w.baseSerial = layout.serial;
  for (const c of components) w.blue[c] = String(layout.slots?.[c]?.details?.slotId);
  w.drivers.calls.length = 0;
  return w;
}

/** Creates a migration of `file` and starts a runner for it, as `migrate` does. */
async function start(
  w: World,
  file: string,
  generation: number,
): Promise<{ id: string; runner: LocalRunner }> {
  const topology = path.join(w.dir, file);
  const created = await createMigration({
    source: topologySource({ text: readFileSync(topology, 'utf8'), file: topology }),
    stateDir: w.stateDir,
    secrets: noSecrets,
  });
  if (!created.created) throw new Error(`${file}: nothing to migrate`);
  const id = created.spec.id;
  return { id, runner: resume(w, id, generation) };
}

/** A new runner from the journal, as `migration resume` starts one. */
function resume(w: World, id: string, generation: number): LocalRunner {
  const runner = LocalRunner.recover(w.stateDir, environment, id, {
    stateDir: w.stateDir,
    drivers: w.drivers.driverSet(generation),
    secrets: noSecrets,
  });
  w.runners.push(runner);
  return runner;
}

function journalOf(w: World, id: string): MigrationEvent[] {
  return readJournal(w.stateDir.migration(environment, id).journal).events;
}

/** Waits until `count` calls hang, then stops the runner there: a crash inside those calls. */
async function crashWhenHanging(w: World, runner: LocalRunner, count = 1): Promise<MigrationState> {
  await eventually(
    () => w.drivers.hanging.length >= count,
    10_000,
    () => JSON.stringify(w.drivers.calls),
  );
  runner.detach();
  return runner.current;
}

/** Every line is whole JSON, one created event, each result once. */
function checkJournal(w: World, id: string): MigrationEvent[] {
  const text = readFileSync(w.stateDir.migration(environment, id).journal, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  const events = text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as MigrationEvent);
  expect(events.filter((e) => e.type === 'created')).toHaveLength(1);
  const results = events.flatMap((e) => ('commandId' in e ? [e.commandId] : []));
  expect(new Set(results).size).toBe(results.length);
  return events;
}

async function layoutHistoryOf(w: World): Promise<number[]> {
  const dir = path.join(w.stateDir.root, 'environments', environment, 'layouts');
  const { readdirSync } = await import('node:fs');
  return readdirSync(dir)
    .filter((f) => /^\d+\.json$/.test(f))
    .map((f) => Number.parseInt(f, 10))
    .sort((x, y) => x - y);
}

function activeClaimExists(w: World): boolean {
  return existsSync(w.stateDir.activeFile(environment));
}

/** Completed: the layout moved once to green, blue drained and retired after green was up. */
async function checkCompleted(w: World, id: string, final: MigrationState): Promise<void> {
  expect(final.lifecycle).toBe('completed');
  expect(activeClaimExists(w)).toBe(false);
  const events = checkJournal(w, id);
  const extra = events.filter((e) => e.type === 'operator' || e.type === 'command_cancelled');
  expect(events).toHaveLength(totalEvents + extra.length);
  const layout = await readCurrentLayout(w.stateDir, environment);
  expect(layout.serial).toBe(w.baseSerial + 1);
  expect(layout.migrationId).toBe(id);
  expect(await layoutHistoryOf(w)).toEqual([w.baseSerial, w.baseSerial + 1]);
  const { calls, markers } = w.drivers;
  const lastGreen = calls.findLastIndex((c) => c.slot === 'green' && c.phase === 'end');
  for (const c of components) {
    const green = `${c}-${id}`;
    const blue = w.blue[c] as string;
    expect(layout.slots?.[c]).toMatchObject({ version: '2', details: { slotId: green } });
    expect([...(markers.get(green) ?? [])].sort()).toEqual(
      c === 'a' ? ['provisioned', `replicated-from-${blue}`, 'version 2'] : ['provisioned', 'version 2'],
    );
    expect(calls.filter((x) => x.slotId === green && (x.stage === 'drain' || x.stage === 'retire'))).toEqual(
      [],
    );
    expect(w.drivers.hasMarker(blue, 'drained')).toBe(true);
    expect(w.drivers.hasMarker(blue, 'retired')).toBe(true);
    const blueCalls = calls.filter((x) => x.slotId === blue);
    expect(blueCalls.every((x) => x.stage === 'drain' || x.stage === 'retire')).toBe(true);
    expect(calls.findIndex((x) => x.slotId === blue)).toBeGreaterThan(lastGreen);
  }
}

/** Rolled back or failed: the layout did not move, every green slot retired, blue untouched. */
async function checkRolledBack(
  w: World,
  id: string,
  final: MigrationState,
  lifecycle: 'failed' | 'rolled_back',
): Promise<void> {
  expect(final.lifecycle).toBe(lifecycle);
  expect(activeClaimExists(w)).toBe(false);
  checkJournal(w, id);
  expect((await readCurrentLayout(w.stateDir, environment)).serial).toBe(w.baseSerial);
  expect(await layoutHistoryOf(w)).toEqual([w.baseSerial]);
  expect(final.provisioned.length).toBeGreaterThan(0);
  for (const c of final.provisioned) {
    expect({ c, retired: w.drivers.hasMarker(`${c}-${id}`, 'retired') }).toEqual({ c, retired: true });
  }
  for (const c of components) expect(w.drivers.calls.filter((x) => x.slotId === w.blue[c])).toEqual([]);
}

describe.concurrent('a crash inside each driver call, then a new runner from the journal', () => {
  it('an uninterrupted run makes the calls of the sequence, one after another', async (ctx) => {
    const w = await world(ctx);
    const { id, runner } = await start(w, 'topology.yaml', 1);
    await checkCompleted(w, id, await runner.done());
    const journal = journalOf(w, id);
    const replayed = journal.map((_, k) => replay(journal.slice(0, k + 1)));
    expect(replayed.slice(0, -1).map((s) => (s.inflight[0] ? describeCommand(s.inflight[0]) : null))).toEqual(
      sequence.map(([what]) => what),
    );
    const starts = w.drivers.calls.filter((c) => c.phase === 'start').map(callName);
    expect(starts).toEqual(sequence.flatMap(([, call]) => (call ? [call] : [])));
  });

  for (const [k, [what, call]] of sequence.entries()) {
    if (call === null) continue;
    const events = k + 1;
    it(`after event ${events} of ${totalEvents} (${what} in flight) it completes, the call made again`, async (ctx) => {
      const w = await world(ctx);
      w.drivers.hang.add(call);
      const { id, runner } = await start(w, 'topology.yaml', 1);
      const atCrash = await crashWhenHanging(w, runner);
      // The crash lands on the boundary: the journal holds `events` lines, the call in flight.
      const journal = journalOf(w, id);
      expect(journal).toHaveLength(events);
      const replayed = replay(journal);
      expect(replayed.inflight.map(describeCommand)).toEqual([what]);
      expect(replayed.lifecycle).toBe(atCrash.lifecycle);
      expect(replayed.layoutRecorded).toBe(k > 10);
      const final = await resume(w, id, 2).done();
      await checkCompleted(w, id, final);
      const made = w.drivers.started(call);
      expect(made.map((c: RecordedCall) => c.runner)).toEqual([1, 2]);
    });
  }

  it('a crash in the first call (a foreground migrate interrupted): its log tells the start once', async (ctx) => {
    const w = await world(ctx);
    w.drivers.hang.add('provision:a:green');
    const { id, runner } = await start(w, 'topology.yaml', 1);
    await crashWhenHanging(w, runner);
    expect(journalOf(w, id)).toHaveLength(1);
    await checkCompleted(w, id, await resume(w, id, 2).done());
    const lines = readFileSync(w.stateDir.migration(environment, id).log, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { kind: string; message: string });
    // The first runner told it before the crash; the second runner's journal had only `created`.
    expect(lines.filter((line) => line.kind === 'migration_started')).toHaveLength(1);
    expect(
      lines.filter((line) => line.kind === 'stage_entered' && line.message === 'stage provision_green'),
    ).toHaveLength(1);
  });

  it('with several calls in flight, every one is made again, and it completes', async (ctx) => {
    const w = await world(ctx);
    const inFlight: CallName[] = ['provision:b:green', 'replicate:a:green'];
    for (const call of inFlight) w.drivers.hang.add(call);
    const { id, runner } = await start(w, 'parallel.yaml', 1);
    await crashWhenHanging(w, runner, 2);
    expect(replay(journalOf(w, id)).inflight.map(describeCommand).sort()).toEqual([
      'provision green b',
      'replicate a',
    ]);
    await checkCompleted(w, id, await resume(w, id, 2).done());
    for (const call of inFlight) expect(w.drivers.started(call).map((c) => c.runner)).toEqual([1, 2]);
  });
});

describe.concurrent('a crash inside a rollback, then a new runner from the journal', () => {
  it('a failed provision, crashed while retiring green b, still ends failed with green retired', async (ctx) => {
    const w = await world(ctx);
    w.drivers.fail.add('provision:c:green');
    w.drivers.hang.add('retire:b:green');
    const { id, runner } = await start(w, 'topology.yaml', 1);
    const atCrash = await crashWhenHanging(w, runner);
    expect(atCrash.lifecycle).toBe('rolling_back');
    expect(replay(journalOf(w, id)).ending?.outcome).toBe('failed');
    const final = await resume(w, id, 2).done();
    await checkRolledBack(w, id, final, 'failed');
    expect(final.ending?.reason).toMatch(/provision:c:green failed/);
    expect(w.drivers.started('retire:b:green').map((c) => c.runner)).toEqual([1, 2]);
  });

  it('an operator rollback during drain_blue, crashed while retiring green, ends rolled back', async (ctx) => {
    const w = await world(ctx);
    w.drivers.hang.add('drain:b:blue');
    const { id, runner } = await start(w, 'topology.yaml', 1);
    await eventually(() => w.drivers.hanging.length === 1, 10_000);
    w.drivers.hang.add('retire:b:green');
    expect(runner.verb('rollback', 'test').ok).toBe(true);
    await crashWhenHanging(w, runner, 2);
    expect(replay(journalOf(w, id)).ending?.outcome).toBe('rolled_back');
    const final = await resume(w, id, 2).done();
    expect(final.lifecycle).toBe('rolled_back');
    expect(activeClaimExists(w)).toBe(false);
    expect((await readCurrentLayout(w.stateDir, environment)).serial).toBe(w.baseSerial);
    for (const c of components) expect(w.drivers.hasMarker(`${c}-${id}`, 'retired')).toBe(true);
    // Blue was drained (the rollback came during drain_blue), never retired.
    for (const c of components) expect(w.drivers.hasMarker(w.blue[c] as string, 'retired')).toBe(false);
  });
});
