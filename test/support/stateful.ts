/**
 * The judgement every stateful switch test makes after a migration (issue 28), in one place:
 * no acknowledged write missing on the serving side, no answer but the allowed ones, and no write
 * hold left on the router (`heldRoutes`). The figures come back for the test's log line.
 */
import { cpSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { routerClient } from '../../router/client.js';
import { repoRoot, runCli } from './cli.js';
import { routeUrl, type Workspace, workspace } from './migrations.js';
import { storedKeys, type WriteRecord } from './writer.js';

/**
 * Makes a copy of test/fixtures/stateful-kv commit the writes that arrive during an fsync together
 * after it, as databases do (the bench's store, bench/fixtures/kv-group-commit.mjs; each write is
 * still acknowledged only once fsync'd). With one fsync per write the fixture's store is near its
 * capacity at 200 writes/s on a busy machine: the writes a runner's crash kept held, released at
 * once, then keep it from answering its health check for seconds, and green is rolled back (rightly,
 * with nothing lost) instead of the case the test is about.
 */
export function useGroupCommitStore(dir: string): void {
  cpSync(path.join(repoRoot, 'bench', 'fixtures', 'kv-group-commit.mjs'), path.join(dir, 'kv.mjs'));
}

export interface WriteFigures {
  sent: number;
  acknowledged: number;
  missing: number;
  /** Statuses of the writes not acknowledged, with how many of each. */
  refused: Record<number, number>;
  /** The version that answered `GET /keys` (the serving side). */
  version: string;
}

/**
 * Every acknowledged write is on the side `url` reaches now, and no write got an answer outside
 * `allowed` (a hold past its bound of requests answers 503 Retry-After: not acknowledged, not lost).
 */
export async function expectNothingLost(
  url: string,
  records: readonly WriteRecord[],
  allowed: readonly number[] = [200],
): Promise<WriteFigures> {
  const acked = records.filter((r) => r.status === 200);
  const stored = await storedKeys(url);
  const missing = acked.filter((r) => !stored.keys.has(r.key));
  const refused: Record<number, number> = {};
  for (const r of records) if (r.status !== 200) refused[r.status] = (refused[r.status] ?? 0) + 1;
  expect(missing.map((r) => r.key)).toEqual([]);
  const otherwise = records.filter((r) => !allowed.includes(r.status));
  expect(
    otherwise.map((r) => `${r.key}: ${r.status}${r.error ? ` (${r.error})` : ''} after ${r.ms} ms`),
  ).toEqual([]);
  return {
    sent: records.length,
    acknowledged: acked.length,
    missing: missing.length,
    refused,
    version: stored.version,
  };
}

/** The routes on which the router of the state directory holds requests now. */
export async function heldRoutes(stateDir: string): Promise<string[]> {
  const snapshot = (await routerClient(stateDir).routes()) as unknown as {
    routes: Record<string, { hold?: unknown }>;
  };
  return Object.entries(snapshot.routes)
    .filter(([, r]) => r.hold !== undefined)
    .map(([name]) => name);
}

/**
 * A workspace of test/fixtures/stateful-kv (its topology given to `edit` first), its store live at
 * 1.0.0 through the route at `url`.
 */
export async function liveKvStore(edit?: (yaml: string) => string): Promise<{ w: Workspace; url: string }> {
  const w = await workspace('test/fixtures/stateful-kv', edit);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
  return { w, url: routeUrl(w) };
}
