/**
 * The entry of the thread `check-aside.ts` starts: the problems loading a plan's texts reports
 * (parse, schema, checks; the desired text's, then the other's), posted back as diagnostics. The
 * thread ends after that one message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type NamedText, planTextProblems } from '../../core/topology/load-topology.js';

const { desired, base } = workerData as { desired: NamedText; base?: NamedText };
parentPort?.postMessage(planTextProblems(desired, base));
