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

/**
 * With fewer cores the text is checked where it is loaded. V8 compiles the hot code on threads of
 * its own (for a 10,000-component plan, about as much CPU as the plan itself): on two cores they
 * already take the second one, and a checking thread (its own parse of the text, its own compiles)
 * competes with them and with this thread. Measured on 2 cores, 10,000 components: the process
 * used ~1.0 CPU-s on its own against ~1.35 with the thread, which made the plan no sooner there.
 */
export const minAsideCores = 3;

/** Compiled beside this module (dist/); absent when it runs from its TypeScript source (tests). */
const workerFile = fileURLToPath(new URL('./topology-check-worker.js', import.meta.url));

export type PlanTextProblems = ReturnType<typeof planTextProblems>;

/**
 * The problems loading a plan's texts reports (the desired one, then the other, as a plan of two
 * texts loads them), computed on another thread while the caller makes the models unchecked
 * (`loadUncheckedTopology`) and plans: for a 10,000-component plan the checks (schema and
 * cross-references) leave the path the plan waits on. The diagnostics are the loader's own, so
 * messages are exactly those of a load on this thread. Undefined when checking aside would not pay:
 * a small desired text, fewer than `minAsideCores` cores (`cores`: the machine's, unless a test says
 * otherwise), or no compiled worker (the caller then loads as usual). A thread that fails is replaced
 * by the checks on this thread.
 */
export function checkAside(
  desired: NamedText,
  base?: NamedText,
  cores = availableParallelism(),
): Promise<PlanTextProblems> | undefined {
  if (desired.text.length < minAsideChars || cores < minAsideCores || !existsSync(workerFile)) {
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
