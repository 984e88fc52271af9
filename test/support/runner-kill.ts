/**
 * A real SIGKILL of the local runner process at a chosen point of a stateful switch (issue 28), for
 * test/cutover/stateful-kill*.test.ts: a workspace of test/fixtures/stateful-kv with its store
 * live, and `killThenResume`, which migrates to the next version with a writer on, kills the runner
 * `cutover topology migrate --detach` started the moment the point is reached, checks where the
 * kill landed, resumes with `cutover topology migration resume <id>` and judges the end.
 *
 * The points last milliseconds, and a kill aimed from outside at one (the journal followed, each
 * event folded through the step function) came too late on a loaded machine: the runner had gone
 * on to the next point, or ended, before the signal arrived (ci46, ci50). So the runner kills
 * itself: `migrate --detach` runs with the fault preload (test/fixtures/preload/inject-fault.mjs),
 * which its detached runner inherits, and the runner dies by SIGKILL right after the fsync of the
 * journal line that reaches the point (switch-points.mjs); the test then checks the journal ends
 * there. The store holds 32 MB of earlier data, which blue's fence (a digest) and green's catch-up
 * (a copy) read under the hold; the hold's budget (`writeHold`) is 5 s, so that a resume on a
 * loaded machine still lands within it.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { replay } from '../../core/migration/step.js';
import { isFinal, type MigrationEvent, type MigrationState } from '../../core/migration/types.js';
import { readJournal } from '../../engine/runner/journal.js';
import { routerClient } from '../../router/client.js';
import { type Point, reached } from '../fixtures/preload/switch-points.mjs';
import { repoRoot, runBinary, runCli } from './cli.js';
import { routeUrl, setVersion, type Workspace, workspace } from './migrations.js';
import { running, waitGone } from './processes.js';
import { expectNothingLost, heldRoutes, useGroupCommitStore, type WriteFigures } from './stateful.js';
import { eventually } from './wait.js';
import { startWriter } from './writer.js';

/** The preload that fails or kills a real process at a chosen file-system call. */
const faultPreload = path.join(repoRoot, 'test', 'fixtures', 'preload', 'inject-fault.mjs');

/** The earlier data of the store: read by the fence's digest and copied by the catch-up. */
const ballastBytes = 32 * 1024 * 1024;

export interface RunnerKills {
  w: Workspace;
  /** The route's URL. */
  url: string;
  /** The version the store was last migrated to. */
  version(): string;
  /** The migration's state and events from its journal as it is now. */
  journalState(id: string): { state: MigrationState; events: MigrationEvent[] };
  killThenResume(
    point: Point,
    late?: boolean,
    settle?: (id: string, ended: MigrationState) => Promise<MigrationState>,
  ): Promise<Outcome>;
  cleanup(): Promise<void>;
}

export interface Outcome {
  final: MigrationState;
  figures: WriteFigures;
  line: string;
}

/** A workspace of test/fixtures/stateful-kv, its store live at 1.0.0 with its earlier data. */
export async function startRunnerKills(): Promise<RunnerKills> {
  let version = 1;
  const w = await workspace('test/fixtures/stateful-kv', (yaml) =>
    yaml.replace('writeHold: 2s', 'writeHold: 5s'),
  );
  useGroupCommitStore(w.dir);
  const url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
  const layout = JSON.parse(readFileSync(layoutFile(), 'utf8')) as {
    slots: { store: { details: { slotDir: string } } };
  };
  writeFileSync(
    path.join(layout.slots.store.details.slotDir, 'data', 'ballast.bin'),
    Buffer.alloc(ballastBytes, 7),
  );

  function envDir(): string {
    return path.join(w.stateDir, 'environments', 'kv');
  }

  function layoutFile(): string {
    return path.join(envDir(), 'layout.json');
  }

  function migrationDir(id: string): string {
    return path.join(envDir(), 'migrations', id);
  }

  function runnerPid(id: string): number {
    const record = JSON.parse(readFileSync(path.join(migrationDir(id), 'runner.json'), 'utf8')) as {
      process: { pid: number };
    };
    return record.process.pid;
  }

  interface Kill {
    pid: number;
    /** How many events the journal had when the point was seen (its event is the last of them). */
    events: number;
  }

  interface FaultFiles {
    /** Created by the test when the fault is to count (the rollback is asked for). */
    armed: string;
    /** Gets a line when the fault fired. */
    fired: string;
  }

  function faultFiles(n: number): FaultFiles {
    return { armed: path.join(w.dir, `fault-${n}.armed`), fired: path.join(w.dir, `fault-${n}.fired`) };
  }

  /**
   * Starts the migration with the real CLI and the fault preload (test/fixtures/preload/), which its
   * detached runner inherits; the runner kills itself at `point`:
   * - hold, fence, promote, release: right after the fsync of the journal line that reaches the
   *   point (SIGKILL), so the journal ends with the point's event.
   * - back: in a rollback from awaiting_commit, whose switch back writes the router's table twice
   *   (its hold, then the release): before the second write (SIGKILL_BEFORE); armed by the test
   *   once the migration waits for its commit, before it asks for the rollback.
   * - routed: the release written to the router's table (its first write once the journal has the
   *   promotion), before the runner journals it (SIGKILL).
   */
  async function migrateDetachedWithFault(fault: FaultFiles, point: Point): Promise<string> {
    const atTable =
      point === 'back'
        ? { op: 'rename', path: '/router/routes\\.json$', nth: 2, fault: 'SIGKILL_BEFORE' }
        : { op: 'rename', path: '/router/routes\\.json$', nth: 1, fault: 'SIGKILL' };
    const atJournal = { op: 'fsync', path: '/journal\\.ndjson$', nth: 1, fault: 'SIGKILL' };
    const inJournal = point !== 'back' && point !== 'routed';
    const result = await runBinary(['topology', 'migrate', '-f', w.file, '--yes', '--detach'], {
      env: {
        NODE_OPTIONS: `--import=${faultPreload}`,
        CUTOVER_TEST_FAULT: JSON.stringify(inJournal ? atJournal : atTable),
        ...(point === 'back'
          ? { CUTOVER_TEST_FAULT_ARMED: fault.armed }
          : { CUTOVER_TEST_FAULT_POINT: point }),
        CUTOVER_TEST_FAULT_FIRED: fault.fired,
      },
    });
    if (result.code !== 0) throw new Error(`migrate --detach failed: ${result.stderr}`);
    return result.stdout.trim();
  }

  /** The runner's death by its fault (migrateDetachedWithFault), as a Kill. */
  async function killedByFault(id: string, fault: FaultFiles): Promise<Kill> {
    const pid = runnerPid(id);
    await eventually(
      () => existsSync(fault.fired),
      60_000,
      () => `${id}: the runner's fault did not fire`,
    );
    await waitGone(pid);
    const { events } = journalState(id);
    return { pid, events: events.length };
  }

  /** The migration's state from its journal as it is now. */
  function journalState(id: string): { state: MigrationState; events: MigrationEvent[] } {
    const { events } = readJournal(path.join(migrationDir(id), 'journal.ndjson'));
    return { state: replay(events), events };
  }

  interface SlotRecord {
    slotId: string;
    retired?: boolean;
    replicas: { pid: number }[];
  }

  function slotRecords(): SlotRecord[] {
    const root = path.join(envDir(), 'slots');
    return readdirSync(root).map(
      (slot) => JSON.parse(readFileSync(path.join(root, slot, 'slot.json'), 'utf8')) as SlotRecord,
    );
  }

  /** Every replica of a retired slot is gone; the one slot not retired is the live one, running. */
  function expectOnlyLiveReplicas(): void {
    const live = (
      JSON.parse(readFileSync(layoutFile(), 'utf8')) as { slots: { store: { details: { slotId: string } } } }
    ).slots.store.details.slotId;
    const records = slotRecords();
    const serving = records.filter((r) => !r.retired).map((r) => r.slotId);
    expect(serving).toEqual([live]);
    const left = records
      .filter((r) => r.retired)
      .flatMap((r) =>
        r.replicas.filter((replica) => running(replica.pid)).map((replica) => `${r.slotId}: ${replica.pid}`),
      );
    expect(left).toEqual([]);
    for (const r of records.filter((r) => !r.retired))
      for (const replica of r.replicas)
        expect(running(replica.pid), `live replica ${replica.pid}`).toBe(true);
  }

  const lastOf = (events: readonly MigrationEvent[]): string => {
    const last = events.at(-1);
    return last ? `${last.type}${'commandId' in last ? ` ${last.commandId}` : ''}` : 'nothing';
  };

  /** The router's holds of this switch (its hold id ends with the switch's `heldAt`) that it has let go. */
  async function releasedHolds(state: MigrationState): Promise<{ id?: string; releasedTo?: string }[]> {
    const snapshot = (await routerClient(w.stateDir).routes()) as unknown as {
      routes: Record<string, { lastHold?: { id?: string; releasedTo?: string } }>;
    };
    return Object.values(snapshot.routes)
      .map((r) => r.lastHold)
      .filter(
        (h): h is { id?: string; releasedTo?: string } =>
          h?.id?.endsWith(`@${state.switch?.heldAt}`) === true,
      );
  }

  /**
   * Migrates to the next version with the writer on, SIGKILLs the runner at `point`, checks where the
   * kill landed, resumes the migration with `migration resume` (once the router let go of the hold by
   * itself when `late`), waits for its end and judges it: nothing lost, nothing fenced or held, no
   * runner and no replica of a retired slot left.
   */
  async function killThenResume(
    point: Point,
    late = false,
    settle?: (id: string, ended: MigrationState) => Promise<MigrationState>,
  ): Promise<Outcome> {
    version += 1;
    setVersion(w, 'store', `${version}.0.0`);
    const started = Date.now();
    const writer = startWriter(url, 200, `${point}${late ? '-late' : ''}-`);
    const fault = faultFiles(version);
    const id = await migrateDetachedWithFault(fault, point);
    if (point === 'back') {
      await eventually(() => journalState(id).state.lifecycle === 'awaiting_commit', 60_000);
    }
    const killing = killedByFault(id, fault);
    if (point === 'back') {
      writeFileSync(fault.armed, '');
      const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file, '--no-wait']);
      expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
    }
    const kill = await killing;
    await waitGone(kill.pid);
    // Where it landed: in the point's window (the journal ends with the point's event: the
    // next point's is not in it; after the release, the next one is the drain's).
    const atKill = journalState(id);
    const landed = `at ${point === 'routed' ? 'the table' : lastOf(atKill.events.slice(0, kill.events))}, last journaled ${lastOf(atKill.events)}`;
    expect(reached[point](atKill.state), landed).toBe(true);
    expect(isFinal(atKill.state.lifecycle), landed).toBe(false);
    if (point === 'promote') {
      // The runner writes the release into the router's table after the promotion's event: none yet.
      expect(
        (await releasedHolds(atKill.state)).filter((h) => h.releasedTo === 'green'),
        landed,
      ).toEqual([]);
    }
    if (point === 'back') {
      // The release to blue follows blue's promotion within milliseconds; the runner writes it to the
      // router before it journals it. A kill later than that (a loaded machine: seen 4 times beside
      // two CPU hogs) finds the router released to blue: not the case this point is about.
      const releasedToBlue = (await releasedHolds(atKill.state)).filter((h) => h.releasedTo === 'blue');
      expect(
        releasedToBlue,
        `${landed}: the kill landed after the release to blue reached the router`,
      ).toEqual([]);
    }
    if (point === 'routed') {
      // With no runner, the router applied the table it found: the hold was released to green.
      await eventually(async () => {
        const snapshot = (await routerClient(w.stateDir).routes()) as unknown as {
          routes: Record<string, { lastHold?: { releasedTo?: string; endedAt?: number } }>;
        };
        return Object.values(snapshot.routes).every((r) => r.lastHold?.releasedTo === 'green');
      }, 10_000);
    }
    if (late) {
      // The router's own bound (the budget plus a grace) releases what it holds, by the weights it
      // has; after `routed`, its reload of the table already released it to green.
      await eventually(async () => (await heldRoutes(w.stateDir)).length === 0, 30_000);
      // The resumed runner finds the switch's budget spent.
      const sw = atKill.state.switch as NonNullable<MigrationState['switch']>;
      await sleep(Math.max(0, sw.heldAt + sw.budgetMs - Date.now()));
    }

    const resume = await runCli(['topology', 'migration', 'resume', id, '-f', w.file]);
    expect(resume.code, resume.stdout + resume.stderr).toBe(0);
    const runnerFile = path.join(migrationDir(id), 'runner.json');
    const resumed = existsSync(runnerFile) ? runnerPid(id) : null;
    expect(resumed).not.toBe(kill.pid);
    let final = atKill.state;
    await eventually(
      () => {
        final = journalState(id).state;
        return isFinal(final.lifecycle);
      },
      60_000,
      () => `${id}: ${final.lifecycle}`,
    );
    if (settle) final = await settle(id, final);
    const records = await writer.stop();
    const { events } = journalState(id);
    // How long the migration stood still: its last event before the kill to the resumed runner's first.
    const stoodStill =
      (events[atKill.events.length] as MigrationEvent).at - (atKill.events.at(-1) as MigrationEvent).at;

    const figures = await expectNothingLost(url, records);
    expect(final.switch?.fenced ?? []).toEqual([]);
    expect(await heldRoutes(w.stateDir)).toEqual([]);
    if (resumed !== null) await waitGone(resumed);
    expectOnlyLiveReplicas();
    const waited = Math.max(...records.map((r) => r.ms));
    const line = `SIGKILL ${point === 'routed' ? 'as the release reached the router' : point === 'back' ? "after the rollback's promotion of blue" : `after the ${point}`}${late ? ', resumed late' : ''}: killed ${landed}; stood still ${stoodStill} ms; ${final.lifecycle}${final.ending?.reason ? ` (${final.ending.reason})` : ''}; ${figures.sent} writes sent, ${figures.acknowledged} acknowledged, ${figures.missing} missing, refused ${JSON.stringify(figures.refused)}; longest write ${waited} ms; ${Date.now() - started} ms in all`;
    console.log(line);
    return { final, figures, line };
  }

  return {
    w,
    url,
    version: () => `${version}.0.0`,
    journalState,
    killThenResume,
    cleanup: async () => {
      await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
      await w.cleanup();
    },
  };
}
