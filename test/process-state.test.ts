/**
 * The check that fails an integration file leaving its process changed
 * (test/support/process-state-setup.ts): it names each change, and puts the process back.
 */
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { processChanges, processState, restoreProcess } from './support/process-state.js';

describe('a test file that changes its process', () => {
  it('is told each change by name, and the process is put back', () => {
    const before = processState();
    const listener = () => {};
    process.env.CUTOVER_LEAK_PROBE = 'left behind';
    process.chdir(tmpdir());
    const mask = process.umask(0o077);
    process.on('SIGUSR2', listener);
    process.exitCode = 3;
    const changes = processChanges(before, processState());
    restoreProcess(before);
    expect(changes).toEqual([
      'process.env.CUTOVER_LEAK_PROBE: unset → "left behind"',
      `process.cwd(): ${before.cwd} → ${tmpdir()}`,
      `umask: ${mask.toString(8).padStart(4, '0')} → 0077`,
      "process listeners of 'SIGUSR2': 1 added, 0 removed (process.on without process.off)",
      'process.exitCode: undefined → 3',
    ]);
    expect(processChanges(before, processState())).toEqual([]);
    expect(process.env.CUTOVER_LEAK_PROBE).toBeUndefined();
    expect(process.listeners('SIGUSR2')).not.toContain(listener);
  });

  it('is not told of a variable it changed and set back', () => {
    const before = processState();
    const saved = process.env.PATH;
    process.env.PATH = '/nowhere';
    process.env.PATH = saved;
    expect(processChanges(before, processState())).toEqual([]);
  });
});
