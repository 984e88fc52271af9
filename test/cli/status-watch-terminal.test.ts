/**
 * `cutover topology status --watch` on a terminal: a pseudo-terminal from script(1), typed at as a
 * user would (Ctrl-C is the byte 0x03, turned into SIGINT by the terminal). script gives its
 * terminal no size when its own input is not a terminal, as some CI and container terminals do.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { repoRoot, runCli } from '../support/cli.js';
import { type Workspace, workspace } from '../support/migrations.js';
import { killChild } from '../support/processes.js';
import { eventually } from '../support/wait.js';

let ws: Workspace | undefined;
let terminal: ChildProcess | undefined;
afterEach(async () => {
  if (terminal) await killChild(terminal);
  terminal = undefined;
  await ws?.cleanup();
  ws = undefined;
});

it('draws the view on a terminal of unknown size, and Ctrl-C ends it with exit 0', async () => {
  ws = await workspace('examples/exec-demo');
  expect((await runCli(['topology', 'migrate', '-f', ws.file, '--yes'])).code).toBe(0);
  const command = `exec node ${path.join(repoRoot, 'bin', 'cutover.js')} topology status -f ${ws.file} --watch --interval 200ms`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  terminal = child;
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // Two looks drawn: the view and its redraw.
  await eventually(
    () => (output.match(/Environment: +exec-demo/g) ?? []).length >= 2,
    20_000,
    () => output,
  );
  expect(output).toContain('Components:');
  expect(output).toContain('every 0.2 s; Ctrl-C to stop');

  child.stdin?.write('\u0003');
  expect(await exited, output).toBe(0);
  terminal = undefined;
}, 60_000);
