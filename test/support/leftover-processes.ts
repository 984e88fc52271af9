/**
 * Vitest global setup of the whole run: a test run leaves nothing running. vitest.config.ts marks
 * the run's environment with CUTOVER_TEST_RUN=<id>; every process the run starts inherits it
 * (vitest's workers, the CLIs, servers, runners and replicas the tests start, and theirs). When the
 * run ends, a process still alive whose environment carries this run's mark is a leak: teardown
 * names each (pid, command line, working directory) and fails the run. Processes are found by the
 * mark this run set, read from /proc/<pid>/environ, never by name.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const marker = 'CUTOVER_TEST_RUN';
/** The test file running when the process (or its first ancestor in the run) started: test-file-mark.ts. */
const fileMarker = 'CUTOVER_TEST_FILE';

/** How long teardown waits for processes that are on their way out (vitest's own workers). */
const settleMs = 10_000;

export interface MarkedProcess {
  pid: number;
  command: string;
  cwd: string;
  /** The test file that started it (or its ancestor), when known. */
  startedBy: string | null;
}

/** The live processes whose environment has `CUTOVER_TEST_RUN=<run>`, but `exceptPid`. */
export function processesOfRun(run: string, exceptPid = process.pid): MarkedProcess[] {
  const wanted = `${marker}=${run}`;
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === exceptPid) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    const variables = environ.split('\0');
    if (!variables.includes(wanted)) continue;
    // A zombie has ended: its parent has not read its status yet.
    if (/^State:\s+Z/m.test(readOr(`/proc/${pid}/status`))) continue;
    found.push({
      pid,
      command: readOr(`/proc/${pid}/cmdline`).split('\0').join(' ').trim(),
      cwd: cwdOf(pid),
      startedBy: variables.find((v) => v.startsWith(`${fileMarker}=`))?.slice(fileMarker.length + 1) ?? null,
    });
  }
  return found;
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function cwdOf(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return '?';
  }
}

export function setup(): void {
  if (!process.env[marker]) throw new Error(`${marker} is not set: vitest.config.ts sets it for the run`);
}

export async function teardown(): Promise<void> {
  const run = process.env[marker] as string;
  if (process.platform !== 'linux') return;
  const deadline = Date.now() + settleMs;
  let left = processesOfRun(run);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(200);
    left = processesOfRun(run);
  }
  if (left.length === 0) return;
  // They are this run's (its mark is in their environment): stopped here, so that a failed run
  // leaves nothing behind either, and the run fails (vitest reports a teardown's error without
  // failing the run by itself).
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  process.exitCode = 1;
  throw new Error(
    `the test run left ${left.length} process(es) running (found by ${marker}=${run} in their environment; now killed); the test that started each must stop it:\n${left
      .map(
        (p) =>
          `  pid ${p.pid} in ${p.cwd}: ${p.command}${p.startedBy ? ` (started while ${p.startedBy} ran)` : ''}`,
      )
      .join('\n')}`,
  );
}
