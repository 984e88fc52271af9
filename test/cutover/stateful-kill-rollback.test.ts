/**
 * Issue 28: the local runner PROCESS killed with SIGKILL in a rollback from awaiting_commit (the
 * switch in reverse: hold at 100 % green, fence green, blue catches up, promote blue, release to
 * blue) after blue's promotion, and resumed only after the router let go of the hold by its own
 * bound — by the weights the hold kept, to green, which takes writes blue lacks from then on. How
 * the kill is placed: test/support/runner-kill.ts. A writer sends 200 acknowledged writes/s through
 * the route all along.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { runCli } from '../support/cli.js';
import { type RunnerKills, startRunnerKills } from '../support/runner-kill.js';
import { heldRoutes } from '../support/stateful.js';
import { storedKeys } from '../support/writer.js';

let kills: RunnerKills;

beforeAll(async () => {
  kills = await startRunnerKills();
}, 60_000);

afterAll(async () => {
  await kills?.cleanup();
}, 60_000);

it("SIGKILLed in a rollback from awaiting_commit after blue's promotion, resumed after the router let go of the hold: green keeps serving what it took; resolve --retry rolls back, nothing lost", async () => {
  // A budget of 3 s (the router lets go 8 s after it began to hold), the commit left to a person.
  writeFileSync(
    kills.w.file,
    readFileSync(kills.w.file, 'utf8')
      .replace('commit: auto', 'commit: manual')
      .replace('writeHold: 5s', 'writeHold: 3s'),
  );
  const live = kills.version();
  const { final, figures } = await kills.killThenResume('back', true, async (id, ended) => {
    // The router let go of the hold by the weights it kept, to green: green took writes blue lacks.
    // The switch back refuses to release to blue past its budget: it is abandoned, green serves
    // again, and the rest of the rollback is left for a person (before: the routes went back to
    // blue, green was retired, and its writes with it: 721 and 854 acknowledged writes lost).
    expect(ended.lifecycle, ended.ending?.reason).toBe('rolled_back');
    // Said in full when it fails: twice beside two CPU hogs (load 30-35) the rollback ended with
    // nothing skipped, cause not found yet.
    const routes = JSON.stringify((await routerClient(kills.w.stateDir).routes()).routes);
    expect(
      ended.ending?.skipped.length ?? 0,
      `${JSON.stringify(kills.journalState(id).events.slice(-12))}\nrouter: ${routes}`,
    ).toBeGreaterThan(0);
    expect((await storedKeys(kills.url)).version).toBe(kills.version());
    expect(await heldRoutes(kills.w.stateDir)).toEqual([]);
    // What a person does (docs/stateful.md): runs the steps left again: the switch back, then the rest.
    const resolved = await runCli(['topology', 'migration', 'resolve', id, '--retry', '-f', kills.w.file]);
    expect(resolved.code, resolved.stdout + resolved.stderr).toBe(0);
    return kills.journalState(id).state;
  });
  expect(final.lifecycle).toBe('rolled_back');
  expect((final.ending?.skipped ?? []).filter((step) => step.resolved === undefined)).toEqual([]);
  expect(figures.version).toBe(live);
}, 90_000);
