/**
 * `--parallelism` and `strategy.parallelism` as a user meets them: independent components are
 * provisioned at the same time (their provision scripts overlap), one at a time with
 * `--parallelism 1`, and a bad value is refused naming the option.
 */
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.js';
import { type Workspace, workspace } from './support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
});

/** The exec example with db and api independent, and a provision that logs its start and end. */
async function independent(edit: (yaml: string) => string = (y) => y): Promise<Workspace> {
  const w = await workspace('examples/exec-demo', (yaml) =>
    edit(yaml.replace(/^\s*dependsOn: \[db\].*$/m, '')),
  );
  spaces.push(w);
  const infra = path.join(path.dirname(w.file), 'infra');
  renameSync(path.join(infra, 'provision'), path.join(infra, 'provision.real'));
  const wrapper = path.join(infra, 'provision');
  // Long enough that two provisions started together overlap even on a loaded machine.
  writeFileSync(
    wrapper,
    `#!/bin/sh\necho "start $CUTOVER_COMPONENT" >> "$CUTOVER_STATE_DIR/order"\nsleep 2\necho "end $CUTOVER_COMPONENT" >> "$CUTOVER_STATE_DIR/order"\nexec ./provision.real\n`,
  );
  chmodSync(wrapper, 0o755);
  return w;
}

function order(w: Workspace): string[] {
  return readFileSync(path.join(w.stateDir, 'order'), 'utf8').trim().split('\n');
}

async function migrate(w: Workspace, ...extra: string[]) {
  const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--json', ...extra]);
  expect(result.code, result.stderr).toBe(0);
  const id = (JSON.parse(result.stdout) as { summary: { id: string } }).summary.id;
  const shown = await runCli(['topology', 'migration', 'show', id, '-f', w.file, '--json']);
  return JSON.parse(shown.stdout) as { state: { spec: { parallelism?: number } } };
}

describe('parallelism', () => {
  it('provisions independent components at the same time by default', async () => {
    const w = await independent();
    const shown = await migrate(w);
    expect(shown.state.spec.parallelism).toBe(10);
    expect(order(w).map((l) => l.split(' ')[0])).toEqual(['start', 'start', 'end', 'end']);
  });

  it('runs one call at a time with --parallelism 1, and takes strategy.parallelism from the file', async () => {
    const w = await independent();
    expect((await migrate(w, '--parallelism', '1')).state.spec.parallelism).toBe(1);
    expect(order(w).map((l) => l.split(' ')[0])).toEqual(['start', 'end', 'start', 'end']);
    const fromFile = await independent((yaml) => `${yaml}\nstrategy:\n  parallelism: 3\n`);
    expect((await migrate(fromFile)).state.spec.parallelism).toBe(3);
  });

  it('refuses a parallelism that is not a whole number from 1 to 1000, naming the option', async () => {
    const w = await independent();
    for (const bad of ['0', '1.5', 'many', '1001']) {
      const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--parallelism', bad]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/--parallelism.*expected a whole number from 1 to 1000/);
    }
  });
});
