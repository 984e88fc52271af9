/**
 * The canary fixture (test/fixtures/canary: one replica of an app whose env makes it fail or slow,
 * behind one route) for files that migrate one workspace from version to version under load: it
 * is migrated to 1.0.0 once, before the file's tests; each test writes the next release.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Load, LoadResult } from '../../bench/load.js';
import { runCli } from './cli.js';
import { startTestLoad } from './load.js';
import {
  isFinal,
  killSlots,
  migrateDetached,
  routeUrl,
  type Summary,
  type Workspace,
  waitFor,
  workspace,
} from './migrations.js';

export type Canary = Workspace & { url: string };

/**
 * The canary workspace (`edit`: its topology changed first), migrated to its first version;
 * `prepare` runs before that migration (to register the cleanup of what it starts).
 */
export async function startCanary(
  edit?: (yaml: string) => string,
  prepare?: (w: Workspace) => void,
): Promise<Canary> {
  const w = await workspace('test/fixtures/canary', edit);
  prepare?.(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
  return { ...w, url: routeUrl(w) };
}

/** Takes the canary down; a test that failed half way may leave a migration in flight, which down refuses: its slots too. */
export async function stopCanary(w: Workspace): Promise<void> {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  killSlots(w.stateDir);
}

export interface Release {
  /** The route's shift, as YAML flow text. */
  shift: string;
  /** The app's env: every `FAIL_EVERY`-th answer a 500, each answer `DELAY_MS` late (0: off). */
  env?: { FAIL_EVERY?: number; DELAY_MS?: number };
  /** The topology's strategy section, as YAML under `strategy:` ('' : none). */
  strategy?: string;
}

/** Writes version `<version>.0.0` to the canary's file, with the shift (and env, strategy) given. */
export function writeRelease(w: Workspace, version: number, release: Release): void {
  let text = readFileSync(w.file, 'utf8')
    .replace(/version: "[^"]*"/, `version: "${version}.0.0"`)
    .replace(/shift: .*/, `shift: ${release.shift}`);
  const env = release.env;
  if (env)
    text = text.replace(
      /env: \{[^}]*\}/,
      `env: { FAIL_EVERY: "${env.FAIL_EVERY ?? 0}", DELAY_MS: "${env.DELAY_MS ?? 0}" }`,
    );
  if (release.strategy !== undefined) {
    text = text.replace(/\nstrategy:[\s\S]*$/, '\n');
    if (release.strategy) text += `strategy:\n${release.strategy}`;
  }
  writeFileSync(w.file, text);
}

/** The canary of a test file, as its tests see it: the workspace, and its releases one after another. */
export interface CanaryFile {
  /** The workspace, once the file's beforeAll has made it. */
  readonly w: Canary;
  /** Writes the next version (`<n>.0.0`) with the release's changes; answers it. */
  release(release: Release): string;
}

/**
 * The canary for the file: migrated to 1.0.0 before its tests, taken down after them (a file's
 * own beforeAll runs after this one, its own afterAll before).
 */
export function canaryPerFile(hookTimeoutMs = 60_000): CanaryFile {
  let workspace: Canary | undefined;
  let version = 1;
  beforeAll(async () => {
    workspace = await startCanary();
  }, hookTimeoutMs);
  afterAll(async () => {
    if (!workspace) return;
    await stopCanary(workspace);
    await workspace.cleanup();
  }, hookTimeoutMs);
  const canary: CanaryFile = {
    get w() {
      if (!workspace) throw new Error('the canary workspace is made in beforeAll');
      return workspace;
    },
    release(release) {
      version += 1;
      writeRelease(canary.w, version, release);
      return `${version}.0.0`;
    },
  };
  return canary;
}

/**
 * Migrates the workspace (detached) while `load.rate` requests/s go to its route, until the
 * migration ends; `during` runs once it has started. The load is stopped whatever happens.
 */
export async function migrateUnderLoad(
  w: Canary,
  load: { rate: number; timeoutMs?: number },
  during: (id: string) => Promise<void> = async () => undefined,
): Promise<{ id: string; end: Summary; result: LoadResult }> {
  const running: Load = startTestLoad({ url: w.url, ...load });
  try {
    const id = await migrateDetached(w);
    await during(id);
    const end = await waitFor(w, id, isFinal, 60_000);
    return { id, end, result: await running.stop() };
  } catch (error) {
    await running.stop();
    throw error;
  }
}
