/**
 * Issue 28: the local runner PROCESS killed with SIGKILL at each point of a stateful switch — after
 * the router began to hold (before the fence), after blue's fence, after green's promotion, after
 * the release to green — then `cutover topology migration resume <id>`, as a user would: nothing
 * acknowledged is lost, nothing stays fenced, the router holds nothing, no process is left.
 *
 * The runner is the real one `cutover topology migrate --detach` starts (`internal run-migration`,
 * its pid in runner.json), killed the moment its journal has the point's event; the test then
 * checks the kill landed in the point's window (test/support/runner-kill.ts says how). A writer
 * sends 200 acknowledged writes/s through the route all along; held while the runner is dead.
 *
 * Twice more, resumed late (the hold's budget spent): after the promotion, once the router let go of
 * the hold by its own bound (the switch is undone, blue serves); and as the release reached the
 * router's table, before the runner journaled it (the router applies it by itself, green takes
 * writes: the resumed runner must go on, not undo). The same in a rollback: stateful-kill-rollback.
 * test/cutover/stateful-crash stops an in-process runner at the same points (its detach).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RunnerKills, startRunnerKills } from '../support/runner-kill.js';

let kills: RunnerKills;

beforeAll(async () => {
  kills = await startRunnerKills();
}, 60_000);

afterAll(async () => {
  await kills?.cleanup();
}, 60_000);

for (const point of ['hold', 'fence', 'promote', 'release'] as const) {
  it(`SIGKILLed after the ${point}, then resumed: the switch completes, nothing lost, nothing fenced or held`, async () => {
    const { final, figures } = await kills.killThenResume(point);
    expect(final.lifecycle, final.ending?.reason).toBe('completed');
    expect(figures.version).toBe(kills.version());
  }, 90_000);
}

it('SIGKILLed after the promotion, resumed only after the router let go of the hold: undone, blue serves, nothing lost', async () => {
  // The fixture's budget of 2 s: the router lets go 7 s after it began to hold (the budget plus its grace).
  writeFileSync(kills.w.file, readFileSync(kills.w.file, 'utf8').replace('writeHold: 5s', 'writeHold: 2s'));
  const live = kills.version();
  const { final, figures } = await kills.killThenResume('promote', true);
  expect(final.lifecycle).toBe('failed');
  expect(final.ending?.reason).toMatch(/budget/);
  expect(figures.version).toBe(live);
}, 90_000);

it('SIGKILLed as the release reached the router, before it was journaled, resumed past the budget: green keeps what it took, completed', async () => {
  const { final, figures } = await kills.killThenResume('routed', true);
  expect(final.lifecycle, final.ending?.reason).toBe('completed');
  expect(figures.version).toBe(kills.version());
}, 90_000);
