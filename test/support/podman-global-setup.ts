/**
 * Vitest global setup of the `infra` project: the test app's Podman images, built once per run
 * (test/support/podman.ts), one per mark the container tests use. A fixture's `build(tag, mark)`
 * tags the run's image of that mark under its own name instead of building again. Removed at the
 * end of the run. Without Podman the run goes on and the container tests fail saying why.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildImage, runPodman, writeBuildContext } from './podman.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Mark → the run's image of the test app with that mark (`name`, `id`: sha256:…). */
    podmanImages: Record<string, { name: string; id: string }>;
  }
}

/** The marks the container tests build (a mark not here is built by the test's fixture). */
export const prebuiltMarks = ['one', 'two', 'unhealthy', 'build-one', 'build-two'];

let built: { dir: string; config: string; names: string[] } | null = null;

export async function setup(project: TestProject): Promise<void> {
  const prefix = `ctestrun${randomBytes(4).toString('hex')}`;
  const dir = await mkdtemp(path.join(tmpdir(), `cutover-${prefix}-`));
  const config = await writeBuildContext(dir);
  built = { dir, config, names: [] };
  const images: Record<string, { name: string; id: string }> = {};
  try {
    for (const mark of prebuiltMarks) {
      const name = `localhost/${prefix}-app:${mark}`;
      const id = await buildImage(dir, config, name, mark);
      built.names.push(name);
      images[mark] = { name, id };
    }
  } catch (error) {
    // The fixtures build for themselves, and fail there saying why.
    console.error(`podman global setup: ${(error as Error).message}`);
  }
  project.provide('podmanImages', images);
}

export async function teardown(): Promise<void> {
  if (!built) return;
  // By the names this run gave them, never by id: another run (a second checkout's tests on the
  // same machine) that built the same content has the same image id under its own names, and a
  // `rmi -f <id>` took those too ("image not known" in the other run). The image goes with its last name.
  for (const name of built.names) await runPodman(['rmi', name], built.config);
  await rm(built.dir, { recursive: true, force: true });
}
