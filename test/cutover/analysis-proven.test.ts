/**
 * Analysis that sees what a green that hangs, or fails everything at low traffic, does (issue 26,
 * items 2 and 3): real app processes behind the real router, load counted at the client, the real
 * CLI. Before, both "passed with a warning" for want of traffic and the migration completed.
 *
 * - a green answering after 20 s, at a 10 % step with a 3 s hold and `latency.p99.max: 500ms`:
 *   its requests in flight past 500 ms count against it; it answered none: rolled back;
 * - 3 requests/s, green failing every request: fewer than minRequests, but every one failed (or
 *   more than successRate.min allows of minRequests): rolled back.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Load } from '../../bench/load.js';
import { runCli } from '../support/cli.js';
import { startTestLoad } from '../support/load.js';
import {
  isFinal,
  killSlots,
  migrateDetached,
  type Summary,
  type Workspace,
  waitFor,
  workspace,
} from '../support/migrations.js';

let w: Workspace;
let url: string;
let version = 1;

beforeAll(async () => {
  w = await workspace('test/fixtures/canary');
  const listen = /listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(w.file, 'utf8'))?.[1] as string;
  url = `http://${listen}/`;
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  killSlots(w.stateDir);
  await w.cleanup();
}, 60_000);

function release(env: { FAIL_EVERY?: number; DELAY_MS?: number }, shift: string): void {
  version += 1;
  const text = readFileSync(w.file, 'utf8')
    .replace(/version: "[^"]*"/, `version: "${version}.0.0"`)
    .replace(
      /env: \{[^}]*\}/,
      `env: { FAIL_EVERY: "${env.FAIL_EVERY ?? 0}", DELAY_MS: "${env.DELAY_MS ?? 0}" }`,
    )
    .replace(/shift: .*/, `shift: ${shift}`);
  writeFileSync(w.file, text);
}

async function migrateUnderLoad(rate: number): Promise<{ end: Summary; failed: number; requests: number }> {
  const load: Load = startTestLoad({ url, rate, timeoutMs: 30_000 });
  try {
    const id = await migrateDetached(w);
    const end = await waitFor(w, id, isFinal, 60_000);
    const result = await load.stop();
    return { end, failed: result.failed, requests: result.requests };
  } catch (error) {
    await load.stop();
    throw error;
  }
}

describe('analysis proves a breach on little traffic', { timeout: 90_000 }, () => {
  it('a green that hangs (answers after 20 s) is rolled back: its requests in flight past 500 ms count', async () => {
    release(
      { DELAY_MS: 20_000 },
      '[{ weight: 10, hold: 3s, analysis: { latency: { p99: { max: 500ms } } } }, 100]',
    );
    const run = await migrateUnderLoad(100);
    expect(run.end.lifecycle).toBe('rolled_back');
    expect(run.end.reason).toMatch(
      /^analysis failed: green (answered none of its requests: \d+ in flight past 500 ms|slower than 500 ms on .*) at the 10 % step/,
    );
  });

  it('3 requests/s, green failing every request: rolled back, not passed for want of traffic', async () => {
    release({ FAIL_EVERY: 1 }, '[{ weight: 50, hold: 3s, analysis: { successRate: { min: 99 } } }, 100]');
    const run = await migrateUnderLoad(3);
    expect(run.end.lifecycle).toBe('rolled_back');
    expect(run.end.reason).toMatch(
      /^analysis failed: green 5xx on (every one of its \d+ requests?|\d+ requests, more than the 0 that successRate\.min 99 % allows of 50) over \d+ requests? at the 50 % step, fewer than the 50 needed but enough to prove it$/,
    );
  });
});
