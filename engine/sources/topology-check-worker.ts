/**
 * The entry of the thread `check-aside.ts` starts: the problems `loadTopology` reports for one text
 * (parse, schema, checks), posted back as diagnostics (none when the text loads). The thread ends
 * after that one message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { topologyProblems } from '../../core/topology/load-topology.js';

const { text, file } = workerData as { text: string; file: string };
parentPort?.postMessage(topologyProblems(text, { file }));
