/**
 * `npm test` installs what the suite needs besides Node (scripts/test-deps.mjs). These run it as a
 * new user would: with everything present it is quiet; with a tool it cannot install it says why.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const script = path.resolve('scripts/test-deps.mjs');

describe('test-deps', () => {
  it('is quiet and exits 0 when the tools are there', () => {
    const result = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('names a TEMPORAL_CLI_PATH that does not exist, and exits 1', () => {
    const result = spawnSync(process.execPath, [script], {
      encoding: 'utf8',
      env: { ...process.env, TEMPORAL_CLI_PATH: '/nonexistent/temporal' },
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe(
      'test-deps: TEMPORAL_CLI_PATH is /nonexistent/temporal, which does not exist\n',
    );
  });
});
