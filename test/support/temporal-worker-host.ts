/**
 * The Temporal worker host of this test process (test/fixtures/temporal-worker-host.mjs): one
 * process that runs the workers of the tests that do not kill theirs (test/support/temporal-worker.ts
 * `startWorker`). Session 14 counted 40 `cutover worker` starts a CI run at ~1 CPU-second each,
 * nearly all of it loading @temporalio/worker; a host loads it once, and a worker more in it costs
 * a Worker.create (~0.3 CPU-s).
 *
 * One host per vitest fork, not one per run: a fork runs one file at a time, so the workers in a
 * host are one file's, as when each was a process of its own. (One host for the whole run put two
 * files' driver calls on one event loop: test/temporal/progressive.test.ts's holds took twice as
 * long beside robustness-many's 20 migrations at once.) The temporal project runs its files
 * without isolation (vitest.config.ts), so a fork's host serves all the files it runs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../fixtures/temporal-worker-host.mjs', import.meta.url));

export interface WorkerHost {
  /** http://127.0.0.1:PORT */
  url: string;
  running(): boolean;
}

/**
 * Cache: this process's host, started by the first call of `workerHost` and ending when this
 * process does (its standard input is a pipe from here); started again if it died.
 */
let current: { host: Promise<WorkerHost>; child: ChildProcess } | undefined;

/** This process's host, started at the first call. */
export function workerHost(): Promise<WorkerHost> {
  if (current && current.child.exitCode === null && current.child.signalCode === null) return current.host;
  const child = spawn(process.execPath, [script], {
    cwd: path.dirname(path.dirname(path.dirname(script))),
    env: { ...process.env, NO_COLOR: '1' },
    // stdin: ends when this process does, and the host with it; stderr: the workers' own lines.
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  // Neither the host nor its pipes keep this process alive: vitest ends the fork when its files are done.
  child.unref();
  (child.stdin as Writable & { unref?: () => void }).unref?.();
  const running = () => child.exitCode === null && child.signalCode === null;
  const host = new Promise<WorkerHost>((resolve, reject) => {
    let out = '';
    const stdout = child.stdout as Readable & { unref?: () => void };
    stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('\n')) {
        stdout.unref?.();
        resolve({ url: `http://127.0.0.1:${out.trim()}`, running });
      }
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`the Temporal worker host exited (${signal ?? code}) before it listened`)),
    );
  });
  current = { host, child };
  return host;
}
