/**
 * Issue 28 in Temporal mode: the switch of a stateful component under the router's write hold runs
 * in the migration workflow and loses no acknowledged write: on a migration, on a rollback from
 * awaiting_commit (after the switch), on the migration after it; and when the worker running the
 * switch is SIGKILLed at one of six points and another takes over. The three cases without a kill
 * run first, one after the other and alone (they judge write latency); then the kills, several at
 * once. How, and why: test/temporal/stateful-switch-support.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import { setVersion } from '../support/migrations.js';
import { eventually } from '../support/wait.js';
import { startWriter } from '../support/writer.js';
import { isFinalState, logText, migrateDetached, waitForState } from './robustness-helpers.js';
import {
  describeKills,
  judge,
  killCases,
  type Space,
  space,
  spaceWorker,
  teardown,
} from './stateful-switch-support.js';

const awaitingOrFinal = (st: MigrationState) => st.lifecycle === 'awaiting_commit' || isFinalState(st);

describe('Temporal mode: the switch of a stateful component loses no acknowledged write', () => {
  let s: Space | undefined;

  beforeAll(async () => {
    s = await space('kv');
    await spaceWorker(s);
    const first = await s.cli(['topology', 'migrate', '--yes']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
  }, 60_000);

  afterAll(() => teardown(s), 60_000);

  it('migrate: every acknowledged write reaches green', async () => {
    const sp = s as Space;
    setVersion(sp.w, 'store', '2.0.0');
    const writer = startWriter(sp.url, 200, 'a');
    const id = await migrateDetached(sp.t, sp.w.file);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    const log = await logText(sp.t, id);
    console.log(log);
    expect(ended.lifecycle, log).toBe('completed');
    // Each step of the switch ran as an activity of the workflow, in order.
    expect(log).toMatch(
      /write hold on www: nothing in flight to blue[\s\S]*blue store fenced at position[\s\S]*green store applied blue's writes up to[\s\S]*green store promoted/,
    );
    expect(log).toMatch(/write hold ended after \d+ ms: the held requests went to green/);
    await judge(sp, id, records, 'migrate 1.0.0 → 2.0.0', '2.0.0');
  }, 90_000);

  it('a rollback from awaiting_commit, after the switch: every write green took reaches blue', async () => {
    const sp = s as Space;
    setVersion(sp.w, 'store', '3.0.0');
    writeFileSync(sp.w.file, readFileSync(sp.w.file, 'utf8').replace('commit: auto', 'commit: manual'));
    const writer = startWriter(sp.url, 200, 'b');
    const id = await migrateDetached(sp.t, sp.w.file);
    const waiting = await waitForState(sp.client, id, awaitingOrFinal, 60_000);
    expect(waiting.lifecycle, await logText(sp.t, id)).toBe('awaiting_commit');
    // Green serves (the routes are at 100 % green while it waits), and takes writes before the rollback.
    const greenSince = Date.now();
    await eventually(() => writer.acknowledgedSince(greenSince) >= 100, 20_000);
    const rollback = await sp.cli(['topology', 'migration', 'rollback', id]);
    expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    expect(ended.lifecycle).toBe('rolled_back');
    expect(await logText(sp.t, id)).toMatch(/blue store applied green's writes up to/);
    await judge(sp, id, records, 'rollback of 3.0.0 from awaiting_commit', '2.0.0');
  }, 120_000);

  it('the migration after a rollback, committed: nothing lost', async () => {
    const sp = s as Space;
    const writer = startWriter(sp.url, 200, 'c');
    const id = await migrateDetached(sp.t, sp.w.file);
    expect((await waitForState(sp.client, id, awaitingOrFinal, 60_000)).lifecycle).toBe('awaiting_commit');
    const commit = await sp.cli(['topology', 'migration', 'commit', id]);
    expect(commit.code, commit.stdout + commit.stderr).toBe(0);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    expect(ended.lifecycle).toBe('completed');
    await judge(sp, id, records, 'migrate to 3.0.0, committed', '3.0.0');
  }, 120_000);
});

describeKills([
  killCases.holdAtOnce,
  killCases.holdLate,
  killCases.catchUpAtOnce,
  killCases.catchUpLate,
  killCases.release,
  killCases.releaseGreenSick,
]);
