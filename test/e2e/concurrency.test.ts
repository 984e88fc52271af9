/**
 * At most one migration in flight per environment (DESIGN.md §4, invariant 5): a second migrate gets
 * a clear conflict naming the one in flight, whether the two start at the same instant, the first
 * one is paused, or the first one's runner died.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  baseFile,
  type CliResult,
  finalLifecycles,
  killAndWait,
  Sandbox,
  targetFile,
  waitFor,
} from './harness.js';

const sandboxes: Sandbox[] = [];

async function sandbox(): Promise<Sandbox> {
  const sb = await Sandbox.create();
  sandboxes.push(sb);
  return sb;
}

afterEach(async () => {
  for (const sb of sandboxes.splice(0)) await sb.cleanup();
});

const conflict = /^cutover: environment crash already has a migration in flight: (mig_[0-9a-z]{26})\b/m;

interface Shown {
  summary: { lifecycle: string };
}

async function lifecycle(sb: Sandbox, id: string): Promise<string> {
  // In this process: a probe (a Node start each time would be most of this file's work).
  const result = await sb.inProcess(['topology', 'migration', 'show', id, '-f', targetFile, '--json']);
  if (result.code !== 0) throw new Error(`show ${id} exited ${result.code}: ${result.stderr}`);
  return (JSON.parse(result.stdout) as Shown).summary.lifecycle;
}

describe('two migrations of one environment', () => {
  it('started at the same time: one completes, the other is refused naming it', async () => {
    for (let round = 0; round < 3; round++) {
      const sb = await sandbox();
      const args = ['topology', 'migrate', '-f', baseFile, '--yes'];
      const knobs = { SLOW_MS: 150 };
      const runs = [sb.start(args, knobs), sb.start(args, knobs)];
      const results: CliResult[] = await Promise.all(runs.map((r) => r.done));
      const codes = results.map((r) => r.code).sort();
      expect({ round, codes, stderr: results.map((r) => r.stderr.slice(-300)) }).toMatchObject({
        codes: [0, 1],
      });
      const winner = results.find((r) => r.code === 0) as CliResult;
      const loser = results.find((r) => r.code === 1) as CliResult;
      const [, winnerId] = /^(mig_[0-9a-z]{26}): completed$/m.exec(winner.stdout) ?? [];
      expect(winnerId).toBeDefined();
      expect(loser.stderr).toMatch(conflict);
      expect(conflict.exec(loser.stderr)?.[1]).toBe(winnerId);
      expect(loser.stdout).toBe('');
      // The refused one left nothing behind: one journal, one commit.
      expect(sb.migrationIds()).toEqual([winnerId]);
      expect(sb.layout()).toMatchObject({ serial: 1, migrationId: winnerId });
      await sb.cleanup();
    }
  });

  it('while a detached one is paused: refused naming it; the paused one is unharmed', async () => {
    const sb = await sandbox();
    const id = await sb.migrateDetached({ SLOW_MS: 200 }, baseFile);
    const paused = await sb.migration('pause', id);
    expect(paused.code).toBe(0);
    await waitFor('paused', async () => ((await lifecycle(sb, id)) === 'paused' ? true : undefined));

    const second = await sb.cli(['topology', 'migrate', '-f', baseFile, '--yes'], { SLOW_MS: 200 });
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(conflict);
    expect(conflict.exec(second.stderr)?.[1]).toBe(id);
    expect(second.stderr).toContain(`${id} (paused`);
    const detached = await sb.cli(['topology', 'migrate', '-f', targetFile, '--yes', '--detach'], {});
    expect(detached.code).toBe(1);
    expect(conflict.exec(detached.stderr)?.[1]).toBe(id);
    expect(sb.migrationIds()).toEqual([id]);

    expect(await lifecycle(sb, id)).toBe('paused');
    const resumed = await sb.migration('resume', id, { SLOW_MS: 20 });
    expect(resumed.code).toBe(0);
    await waitFor(
      `${id} to end`,
      async () => {
        const now = await lifecycle(sb, id);
        return finalLifecycles.includes(now) ? now : undefined;
      },
      20_000,
      200,
    ).then((final) => expect(final).toBe('completed'));
    // Once it has ended, the environment is free again.
    const next = await sb.migrateDetached({ SLOW_MS: 20 });
    expect(next).not.toBe(id);
  });

  it('while the one in flight has no runner (killed): refused, with how to pick it up', async () => {
    const sb = await sandbox();
    const id = await sb.migrateDetached({ SLOW_MS: 2000 }, baseFile);
    const runner = sb.runner(id);
    if (!runner) throw new Error(`no runner.json for ${id}`);
    await killAndWait(runner);
    const second = await sb.cli(['topology', 'migrate', '-f', baseFile, '--yes'], {});
    expect(second.code).toBe(1);
    expect(conflict.exec(second.stderr)?.[1]).toBe(id);
    expect(second.stderr).toContain(
      `no process is driving it: \`cutover topology migration resume ${id}\` picks it up`,
    );
  });
});
