/**
 * The run's Temporal worker host (test/fixtures/temporal-worker-host.mjs): one process, started by
 * the temporal project's global setup beside the dev server, that runs the workers of every test
 * that does not kill its worker (test/support/temporal-worker.ts `startWorker`). Session 14 counted
 * 40 `cutover worker` starts a CI run at ~1 CPU-second each, nearly all of it loading
 * @temporalio/worker; the host loads it once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface WorkerHost {
  /** http://127.0.0.1:PORT */
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts the host; its own environment has no CUTOVER_TEST_RUN (it outlives the run's last file,
 * like the dev server, and `stop` ends it), what it starts has the run's mark.
 */
export async function startWorkerHost(env: NodeJS.ProcessEnv): Promise<WorkerHost> {
  const { CUTOVER_TEST_RUN: mark, ...rest } = env;
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(repoRoot, 'test', 'fixtures', 'temporal-worker-host.mjs')],
    {
      cwd: repoRoot,
      env: { ...rest, NO_COLOR: '1', ...(mark ? { CUTOVER_TEST_RUN_FOR_CHILDREN: mark } : {}) },
      // stdin: the host ends when it ends (this process gone); stderr: the workers' own lines.
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('\n')) resolve(out.trim());
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`the Temporal worker host exited (${signal ?? code}) before it listened`)),
    );
  });
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
