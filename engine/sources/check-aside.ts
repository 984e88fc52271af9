import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { type NamedText, planTextProblems } from '../../core/topology/load-topology.js';

/**
 * Below this size a text is checked where it is loaded: a thread costs ~30 ms to start and load the
 * checks, which the checks of a text this large (~3,000 components) take on their own.
 */
export const minAsideChars = 1024 * 1024;

/** Compiled beside this module (dist/); absent when it runs from its TypeScript source (tests). */
const workerFile = fileURLToPath(new URL('./topology-check-worker.js', import.meta.url));

export type PlanTextProblems = ReturnType<typeof planTextProblems>;

/**
 * The problems loading a plan's texts reports (the desired one, then the other, as a plan of two
 * texts loads them), computed on another thread while the caller makes the models unchecked
 * (`loadUncheckedTopology`) and plans: for a 10,000-component plan the checks (schema and
 * cross-references) leave the path the plan waits on. The diagnostics are the loader's own, so
 * messages are exactly those of a load on this thread. Undefined when checking aside would not pay:
 * a small desired text, one core, or no compiled worker (the caller then loads as usual). A thread
 * that fails is replaced by the checks on this thread.
 */
export function checkAside(desired: NamedText, base?: NamedText): Promise<PlanTextProblems> | undefined {
  if (desired.text.length < minAsideChars || availableParallelism() < 2 || !existsSync(workerFile)) {
    return undefined;
  }
  return new Promise((resolve) => {
    let settled = false;
    const here = () => {
      if (settled) return;
      settled = true;
      resolve(planTextProblems(desired, base));
    };
    let worker: Worker;
    try {
      worker = new Worker(workerFile, { workerData: { desired, base } });
    } catch {
      here();
      return;
    }
    worker.once('message', (problems: PlanTextProblems) => {
      settled = true;
      resolve(problems);
    });
    worker.once('error', here);
    worker.once('exit', here);
  });
}
