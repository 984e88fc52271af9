/**
 * Routes shift together: with two routes to a replaced component, every shift step moves both at
 * once, in one routing table and one router generation, so the router never serves one route at
 * 50 % while the other is at 10 %. The router's GET /routes is polled as fast as it answers for the
 * whole migration; the commit's switch of the live slot is one generation for both as well.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import type { RoutesSnapshot } from '../../router/control-types.js';
import { runCli } from '../support/cli.js';
import {
  freePort,
  isFinal,
  liveWorkspace,
  migrateDetached,
  type Workspace,
  waitFor,
} from '../support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

/** live-demo with a second route, `api`, to the same component, whose own steps are [50, 100]. */
async function twoRoutes(): Promise<Workspace> {
  const port = await freePort();
  // Every step dwells a second: polled as fast as the router answers, a step that lasts only the
  // health look between two weights was missed on a loaded machine (ci20), and 100 % lasting only
  // the drain was missed at load 13 (ci37).
  const w = await liveWorkspace(
    (yaml) =>
      `${yaml.replace('shift: [10, 50, 100]', 'shift: [{ weight: 10, hold: 1s }, { weight: 50, hold: 1s }, { weight: 100, hold: 1s }]')}\n  api:\n    listen: 127.0.0.1:${port}\n    to: web\n    shift: [50, 100]\n`,
  );
  spaces.push(w);
  return w;
}

interface Sample {
  generation: number;
  www: RoutesSnapshot['routes'][string];
  api: RoutesSnapshot['routes'][string];
}

/** What traffic does on a route: the split and where each side goes (not its listener or counts). */
const split = (r: Sample['www']) => ({ greenPercent: r.greenPercent, blue: r.blue, green: r.green });

describe('several routes in one migration', () => {
  it('shift together: equal at every moment, one router generation per step', {
    timeout: 90_000,
  }, async () => {
    const w = await twoRoutes();
    const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('version: "1.0.0"', 'version: "2.0.0"'));

    const id = await migrateDetached(w);
    const client = routerClient(w.stateDir);
    const samples: Sample[] = [];
    // As fast as the router answers, until the migration has ended (watched beside the polls).
    let ended = false;
    const watcher = waitFor(w, id, isFinal, 60_000).finally(() => {
      ended = true;
    });
    while (!ended) {
      const snapshot = await client.routes();
      const www = snapshot.routes['live-demo/www'];
      const api = snapshot.routes['live-demo/api'];
      if (www && api) samples.push({ generation: snapshot.generation as number, www, api });
    }
    expect((await watcher).lifecycle).toBe('completed');

    const differing = samples.filter((s) => JSON.stringify(split(s.www)) !== JSON.stringify(split(s.api)));
    expect(differing.slice(0, 3)).toEqual([]);
    // Every step was seen, in order, each one generation after the one before: one table, one reload.
    const firstAt = (percent: number) =>
      samples.find((s) => s.www.greenPercent === percent && s.www.green.length > 0)?.generation;
    const steps = [10, 50, 100].map(firstAt);
    expect(steps.every((g) => g !== undefined)).toBe(true);
    const [at10, at50, at100] = steps as [number, number, number];
    expect([at50 - at10, at100 - at50]).toEqual([1, 1]);
  });
  it('roll back together: both routes back on blue in one generation', { timeout: 90_000 }, async () => {
    const w = await twoRoutes();
    const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(first.code, first.stderr).toBe(0);
    const client = routerClient(w.stateDir);
    const blue = (await client.routes()).routes['live-demo/www']?.blue;
    // Version 2, committed by hand: it waits at 100 % green for the rollback.
    const text = readFileSync(w.file, 'utf8').replace('version: "1.0.0"', 'version: "2.0.0"');
    writeFileSync(w.file, `${text}strategy:\n  commit: manual\n`);
    const id = await migrateDetached(w);
    await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit', 60_000);
    const before = await client.routes();
    expect(before.routes['live-demo/www']?.greenPercent).toBe(100);

    let ended = false;
    const rollback = runCli(['topology', 'migration', 'rollback', id, '-f', w.file]).finally(() => {
      ended = true;
    });
    const samples: Sample[] = [];
    while (!ended) {
      const snapshot = await client.routes();
      const www = snapshot.routes['live-demo/www'];
      const api = snapshot.routes['live-demo/api'];
      if (www && api) samples.push({ generation: snapshot.generation as number, www, api });
    }
    expect((await rollback).code).toBe(0);
    expect((await waitFor(w, id, isFinal)).lifecycle).toBe('rolled_back');
    const after = await client.routes();
    samples.push({
      generation: after.generation as number,
      www: after.routes['live-demo/www'] as Sample['www'],
      api: after.routes['live-demo/api'] as Sample['api'],
    });
    const differing = samples.filter((s) => JSON.stringify(split(s.www)) !== JSON.stringify(split(s.api)));
    expect(differing.slice(0, 3)).toEqual([]);
    expect(split(after.routes['live-demo/www'] as Sample['www'])).toEqual({
      greenPercent: 0,
      blue,
      green: [],
    });
    // One table for both: the generation after the rollback is the next one.
    expect(after.generation).toBe((before.generation as number) + 1);
  });

  it('a route with a preview keeps its step weight between steps, never back to 0 %', {
    timeout: 90_000,
  }, async () => {
    const previewPort = await freePort();
    const w = await liveWorkspace((yaml) =>
      yaml.replace('shift: [10, 50, 100]', `shift: [10, 50, 100]\n    preview: 127.0.0.1:${previewPort}`),
    );
    spaces.push(w);
    const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('version: "1.0.0"', 'version: "2.0.0"'));

    const id = await migrateDetached(w);
    const client = routerClient(w.stateDir);
    const seen: { generation: number; percent: number }[] = [];
    let ended = false;
    const watcher = waitFor(w, id, isFinal, 60_000).finally(() => {
      ended = true;
    });
    while (!ended) {
      const snapshot = await client.routes();
      const www = snapshot.routes['live-demo/www'];
      if (www && www.green.length > 0)
        seen.push({ generation: snapshot.generation as number, percent: www.greenPercent });
    }
    expect((await watcher).lifecycle).toBe('completed');
    // The check between two steps went through the preview by opening the route at 0 % again:
    // 10 → 0 → 50 → 0 → 100, two generations a step. Once traffic moved, it only goes up.
    const moved = seen.slice(seen.findIndex((s) => s.percent > 0));
    const drops = moved.filter((s, i) => i > 0 && s.percent < (moved[i - 1] as { percent: number }).percent);
    expect(drops).toEqual([]);
    const firstAt = (percent: number) => moved.find((s) => s.percent === percent)?.generation;
    const [at10, at50, at100] = [10, 50, 100].map(firstAt) as [number, number, number];
    expect([at50 - at10, at100 - at50]).toEqual([1, 1]);
  });
});
