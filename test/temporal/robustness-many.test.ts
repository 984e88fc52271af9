/**
 * Temporal mode, robustness: 20 environments migrating at once on one worker. Exec-demo topologies
 * (shell scripts that write marker files) under 20 names; every migration is started at once through
 * the same client the CLI uses, and all of them must complete within a bound: first the initial
 * rollout, then a version bump of every component (provision, replicate, gate, drain, retire).
 */
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TemporalMigrations } from '../../engine/temporal/temporal-migrations.js';
import { repoRoot, tempDir } from '../support/cli.js';
import {
  cleanupsAfterEach,
  connectClient,
  isFinalState,
  sharedTemporal,
  showJson,
  startWorker,
  type TemporalTarget,
  uniqueName,
} from './robustness-helpers.js';

const cleanups = cleanupsAfterEach();

const count = 20;
/** Each round of 20 migrations must be done within this (about 5 s on an idle 2-core machine). */
const boundMs = 45_000;

/** Starts every migration at once; resolves with the ids once all of them have ended. */
async function migrateAll(
  client: TemporalMigrations,
  files: { file: string; dir: string }[],
): Promise<{ ids: string[]; ms: number }> {
  const started = Date.now();
  const ids = await Promise.all(
    files.map(async ({ file, dir }) => {
      const created = await client.create({ text: readFileSync(file, 'utf8'), file, baseDir: dir });
      if (!created.created) throw new Error(`${file}: nothing to migrate`);
      return created.spec.id;
    }),
  );
  const pending = new Set(ids);
  const lifecycles = new Map<string, string>();
  while (pending.size > 0) {
    if (Date.now() - started > boundMs) {
      throw new Error(
        `${pending.size} of ${count} migrations not done within ${boundMs} ms: ${[...pending]
          .map((id) => `${id} ${lifecycles.get(id) ?? '?'}`)
          .join(', ')}`,
      );
    }
    await Promise.all(
      [...pending].map(async (id) => {
        const { state } = await client.show(id).catch(() => ({ state: null }));
        if (!state) return;
        lifecycles.set(id, state.lifecycle);
        if (isFinalState(state)) pending.delete(id);
      }),
    );
    if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, 300));
  }
  for (const id of ids) expect(lifecycles.get(id), id).toBe('completed');
  return { ids, ms: Date.now() - started };
}

describe('Temporal mode: many environments at once', () => {
  // Two rounds, each held to its own bound, plus the worker's start (vitest's default 30 s cut a
  // loaded machine's run short of the bound the test states).
  const timeout = 2 * boundMs + 20_000;
  it(`${count} environments migrate at once on one worker, all complete (twice: add, then replace)`, {
    timeout,
  }, async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('rb-many') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    cpSync(path.join(repoRoot, 'examples', 'exec-demo', 'infra'), path.join(dir, 'infra'), {
      recursive: true,
    });
    const base = readFileSync(path.join(repoRoot, 'examples', 'exec-demo', 'topology.yaml'), 'utf8');
    const prefix = uniqueName('rb-many');
    const files = Array.from({ length: count }, (_, i) => {
      const file = path.join(dir, `topology-${i}.yaml`);
      writeFileSync(file, base.replace('name: exec-demo', `name: ${prefix}-${i}`));
      return { file, dir, environment: `${prefix}-${i}` };
    });
    const stateDir = path.join(dir, '.cutover');
    await startWorker(t, stateDir);
    const client = await connectClient(t);
    cleanups.push(() => client.close());

    const first = await migrateAll(client, files);
    for (const { file } of files)
      writeFileSync(file, readFileSync(file, 'utf8').replaceAll('version: "1"', 'version: "2"'));
    const second = await migrateAll(client, files);

    // Each environment's layout moved twice; only the second round's slots are left.
    for (const { environment } of files) expect((await client.currentLayout(environment)).serial).toBe(2);
    const slots = readdirSync(path.join(stateDir, 'exec-demo')).sort();
    expect(slots).toEqual(second.ids.flatMap((id) => [`api-${id}`, `db-${id}`]).sort());
    // db's data was carried over from round one's slot by the replicate stage.
    for (const [i, id] of second.ids.entries()) {
      const carried = path.join(stateDir, 'exec-demo', `db-${id}`, 'data', `created-by-db-${first.ids[i]}`);
      expect(existsSync(carried), carried).toBe(true);
    }
    // And the CLI sees the same.
    const shown = await showJson(t, second.ids[0] as string);
    expect(shown.summary.lifecycle).toBe('completed');
    expect(first.ms).toBeLessThan(boundMs);
    expect(second.ms).toBeLessThan(boundMs);
    console.log(`${count} migrations at once on one worker: add ${first.ms} ms, replace ${second.ms} ms`);
  });
});
