/**
 * A process that starts detached runners (the cutover server, `watch --apply`, any long-lived
 * caller of the engine) keeps no file of theirs open: the runner's output file is handed to the
 * runner and closed here. Kept open, each migration started, resumed or adopted cost the caller one
 * file descriptor for good (a server runs out of them), and a state directory on its own mount
 * could not be unmounted while the caller lived.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { killAndWait, type RunnerRecord, Sandbox, targetFile } from '../../e2e/harness.js';

const sandboxes: Sandbox[] = [];
afterEach(async () => {
  for (const sb of sandboxes.splice(0)) await sb.cleanup();
});

/** This process's open files under `dir`. */
function openFilesUnder(dir: string): string[] {
  const files: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(`${dir}/`)) files.push(target);
    } catch {
      // closed meanwhile (the fd of the directory listing itself)
    }
  }
  return files;
}

describe('detached runners started by this process', () => {
  it('leave no file of theirs open here: started, then resumed after a kill', async () => {
    const sb = await Sandbox.create();
    sandboxes.push(sb);
    await sb.migrateBase();
    // A slow drain: the runner is still at work when the start returns.
    const knobs = { SLOW_MS: 1_000, SLOW_ONLY: 'drain:c' };
    const started = await sb.inProcess(['topology', 'migrate', '-f', targetFile, '--yes', '--detach'], knobs);
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    expect(openFilesUnder(sb.stateDir)).toEqual([]);

    const runner = sb.runner(id);
    expect(runner).not.toBeNull();
    await killAndWait(runner as RunnerRecord);
    const resumed = await sb.inProcess(['topology', 'migration', 'resume', id, '-f', targetFile], knobs);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('a new one picked it up');
    expect(openFilesUnder(sb.stateDir)).toEqual([]);
  }, 60_000);
});
