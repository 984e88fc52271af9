/**
 * An operator's `rollback` or `cancel` aborts the driver calls in flight, as a failure does: an exec
 * provision that would sleep a minute is killed (its process group), and the migration rolls back
 * in seconds rather than after the provision's minute.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processExited, Sandbox, waitFor } from './harness.js';

/** What the provision of a would take: far longer than the test waits. */
const slowProvisionMs = 60_000;
/** Generous on a loaded machine, and far below the provision's minute. */
const verbDoneWithinMs = 20_000;

let base: Sandbox;
const sandboxes: Sandbox[] = [];

beforeAll(async () => {
  base = await Sandbox.create();
  await base.migrateBase();
});

afterAll(async () => {
  for (const sb of sandboxes.splice(0)) await sb.cleanup();
  await base.cleanup();
});

describe.each(['rollback', 'cancel'] as const)('operator %s with a provision in flight', (verb) => {
  // The bound is past the CLI's own 30 s limit, so a verb that waits for the provision fails on its time.
  it('kills the provision by its process group and ends in seconds', { timeout: 60_000 }, async () => {
    const sb = await Sandbox.create();
    sandboxes.push(sb);
    sb.copyStateFrom(base.stateDir);
    // The copied state holds the base migration's calls: only those after it count.
    const before = sb.calls().length;
    const calls = () => sb.calls().slice(before);
    const id = await sb.migrateDetached({ SLOW_MS: slowProvisionMs, SLOW_ONLY: 'provision:a' });
    const started = await waitFor('the provision of a to start', () =>
      calls().find((c) => c.phase === 'start' && c.stage === 'provision' && c.component === 'a'),
    );
    expect(processExited(started.pid)).toBe(false);

    const asked = Date.now();
    const result = await sb.migration(verb, id, {}, ['--json']);
    const tookMs = Date.now() - asked;
    expect(result.code, result.stderr).toBe(0);
    expect(tookMs).toBeLessThan(verbDoneWithinMs);
    const shown = await sb.migration('show', id, {}, ['--json']);
    const lifecycle = (JSON.parse(shown.stdout) as { summary: { lifecycle: string } }).summary.lifecycle;
    expect(lifecycle).toBe(verb === 'rollback' ? 'rolled_back' : 'cancelled');
    // The sleeping script is gone (killed, not finished: it never recorded a successful end).
    await waitFor(`pid ${started.pid} to exit`, () => (processExited(started.pid) ? true : undefined), 5_000);
    const end = calls().find((c) => c.phase === 'end' && c.pid === started.pid);
    expect(end?.status ?? 'killed').not.toBe(0);
    // What it may have started is retired by the rollback.
    expect(calls().some((c) => c.phase === 'start' && c.stage === 'retire' && c.component === 'a')).toBe(
      true,
    );
  });
});
