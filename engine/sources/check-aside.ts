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
 * On two cores only a larger text is checked aside. V8 compiles the hot code on threads of its own
 * (for a 10,000-component plan about 0.4 CPU-s, as much as the checks and the second parse the thread
 * would take off this one): on two cores they already take the second core, and a checking thread
 * (its own start, parse and compiles) competes with them and with this thread. That cost is about
 * the same at any size, the checks grow with the text: measured on 2 cores, alternated with the
 * thread at every size, 10,000 components (3.3 MiB) used 0.89 CPU-s on one thread against 1.22 with
 * the checking thread, whose main thread used 0.44 s of it (so ~0.61 s of wall clock at best, one
 * thread 0.53); 30,000 (10 MiB) about even (best 1.26 s with the thread, 1.29 without); 100,000
 * (33 MiB) 5.5 against 7.3, the main thread 4.3 against 3.4 (best ~3.7 s with the thread, 4.3
 * without). docs/performance.md has the table.
 */
export const minAsideCharsOnTwoCores = 8 * 1024 * 1024;

/** Compiled beside this module (dist/); absent when it runs from its TypeScript source (tests). */
const workerFile = fileURLToPath(new URL('./topology-check-worker.js', import.meta.url));

export type PlanTextProblems = ReturnType<typeof planTextProblems>;

/**
 * The problems loading a plan's texts reports (the desired one, then the other, as a plan of two
 * texts loads them), computed on another thread while the caller makes the models unchecked
 * (`loadUncheckedTopology`) and plans: for a 10,000-component plan the checks (schema and
 * cross-references) leave the path the plan waits on. The diagnostics are the loader's own, so
 * messages are exactly those of a load on this thread. Undefined when checking aside would not pay:
 * a small desired text (on two cores, one under `minAsideCharsOnTwoCores`), one core (`cores`: the
 * machine's, unless a test says otherwise), or no compiled worker (the caller then loads as usual).
 * A thread that fails is replaced by the checks on this thread.
 */
export function checkAside(
  desired: NamedText,
  base?: NamedText,
  cores = availableParallelism(),
): Promise<PlanTextProblems> | undefined {
  const minChars = cores > 2 ? minAsideChars : minAsideCharsOnTwoCores;
  if (desired.text.length < minChars || cores < 2 || !existsSync(workerFile)) {
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
