/**
 * Temporal mode runs the plan as a graph: the workflow starts an activity for every command the
 * step function puts in flight (up to the parallelism) and feeds each completion back as it comes.
 * Three independent exec components on a real dev server and a real `cutover worker`:
 * - their provision scripts meet at a rendezvous (each waits until all three have started), which
 *   only ends if the three activities run at once;
 * - a provision that fails while the two others are in flight stops them (their scripts would run a
 *   minute; the worker kills them on the activities' cancellation) and the migration rolls back.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../support/cli.js';
import {
  startWorker,
  type TestWorker,
  temporalAddress,
  uniqueTaskQueue,
} from '../support/temporal-worker.js';
import { eventually } from '../support/wait.js';

let worker: TestWorker;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  worker = await startWorker({ address: temporalAddress(), taskQueue: uniqueTaskQueue('parallel') });
}, 30_000);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

afterAll(async () => {
  await worker?.stop();
}, 15_000);

/** The three scripts' meeting place, polled every 100 ms; a script gives up after `deadlineS`. */
const rendezvous = (dir: string, deadlineS: number, files: string) => `
n=0
until [ ${files} ]; do
  n=$((n + 1))
  if [ $n -gt ${deadlineS * 10} ]; then echo "$CUTOVER_COMPONENT: not every provision started within ${deadlineS} s: $(ls "${dir}")" >&2; exit 1; fi
  sleep 0.1
done`;

/** A layout of three independent exec components a, b, c whose provision is `provision` (sh). */
async function layout(provision: (rv: string) => string, strategy = '') {
  const { dir, cleanup } = await tempDir('cutover-parallel-');
  cleanups.push(cleanup);
  const environment = `par-${process.pid}-${Date.now().toString(36)}`;
  const rv = path.join(dir, 'rendezvous');
  mkdirSync(rv);
  mkdirSync(path.join(dir, 'infra'));
  const script = (name: string, body: string) => {
    const file = path.join(dir, 'infra', name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
  };
  script('provision', `touch "${rv}/started-$CUTOVER_COMPONENT"\n${provision(rv)}`);
  script('retire', `touch "${rv}/retired-$CUTOVER_COMPONENT-$CUTOVER_SLOT"`);
  const file = path.join(dir, 'topology.yaml');
  writeFileSync(
    file,
    [
      'apiVersion: cutover/v1',
      'kind: Topology',
      `metadata: { name: ${environment} }`,
      'drivers:',
      '  infra: { type: exec, dir: ./infra, timeout: 2m }',
      'components:',
      ...['a', 'b', 'c'].map((c) => `  ${c}: { driver: infra, version: "1" }`),
      strategy,
      '',
    ].join('\n'),
  );
  const cli = (...args: string[]) => runCli([...args, '-f', file], { env: worker.env });
  cleanups.unshift(() => cli('topology', 'down'));
  return { rv, cli, file };
}

interface Shown {
  summary: { lifecycle: string; reason?: string | null };
  state: { spec: { parallelism?: number }; ending?: { reason: string } };
  logs?: { message: string }[];
}

describe('Temporal mode: activities in flight at once', () => {
  it('provisions three independent components at the same time (a rendezvous of their scripts)', async () => {
    const all = (rv: string) => ['a', 'b', 'c'].map((c) => `-e "${rv}/started-${c}"`).join(' -a ');
    const { rv, cli } = await layout((rv) => rendezvous(rv, 20, all(rv)));
    const r = await cli('topology', 'migrate', '--yes', '--json');
    expect(r.code, r.stderr).toBe(0);
    const id = (JSON.parse(r.stdout) as { summary: { id: string; lifecycle: string } }).summary;
    expect(id.lifecycle).toBe('completed');
    const shown = JSON.parse((await cli('topology', 'migration', 'show', id.id, '--json')).stdout) as Shown;
    // The topology's default bound, as in local mode.
    expect(shown.state.spec.parallelism).toBe(10);
    for (const c of ['a', 'b', 'c']) expect(existsSync(path.join(rv, `started-${c}`))).toBe(true);
  }, 60_000);

  it('takes the bound from --parallelism, else from strategy.parallelism', async () => {
    const { rv, cli, file } = await layout(
      (rv) =>
        `echo "start $CUTOVER_COMPONENT" >> "${rv}/order"\nsleep 0.3\necho "end $CUTOVER_COMPONENT" >> "${rv}/order"`,
      'strategy: { parallelism: 2 }',
    );
    const migrate = async (...extra: string[]) => {
      const r = await cli('topology', 'migrate', '--yes', '--json', ...extra);
      expect(r.code, r.stderr).toBe(0);
      const { id } = (JSON.parse(r.stdout) as { summary: { id: string } }).summary;
      return JSON.parse((await cli('topology', 'migration', 'show', id, '--json')).stdout) as Shown;
    };
    expect((await migrate('--parallelism', '1')).state.spec.parallelism).toBe(1);
    const order = () => readFileSync(path.join(rv, 'order'), 'utf8').trim().split('\n');
    expect(order().map((l) => l.split(' ')[0])).toEqual(['start', 'end', 'start', 'end', 'start', 'end']);
    writeFileSync(file, readFileSync(file, 'utf8').replaceAll('version: "1"', 'version: "2"'));
    expect((await migrate()).state.spec.parallelism).toBe(2);
  }, 60_000);

  it('a pause with three provisions in flight takes effect once they end; a cancel then rolls back', async () => {
    const release = (rv: string) => `${rv}/release`;
    const { rv, cli } = await layout((rv) => rendezvous(rv, 40, `-e "${release(rv)}"`));
    const detached = await cli('topology', 'migrate', '--yes', '--detach');
    expect(detached.code, detached.stderr).toBe(0);
    const id = detached.stdout.trim();
    const started = (c: string) => existsSync(path.join(rv, `started-${c}`));
    await eventually(() => ['a', 'b', 'c'].every(started), 20_000);
    const summary = async () =>
      (JSON.parse((await cli('topology', 'migration', 'show', id, '--json')).stdout) as Shown).summary;
    const pause = await cli('topology', 'migration', 'pause', id);
    expect(pause.code, pause.stderr).toBe(0);
    // Driver calls finish (as in local mode): not paused while the three provisions run.
    expect((await summary()).lifecycle).toBe('running');
    writeFileSync(release(rv), '');
    await eventually(async () => (await summary()).lifecycle === 'paused', 20_000);
    const cancel = await cli('topology', 'migration', 'cancel', id);
    expect(cancel.code, cancel.stderr).toBe(0);
    await eventually(async () => (await summary()).lifecycle === 'cancelled', 20_000);
    for (const c of ['a', 'b', 'c']) expect(existsSync(path.join(rv, `retired-${c}-green`))).toBe(true);
  }, 90_000);

  it('a failed provision cancels the two in flight and rolls back', async () => {
    const { rv, cli } = await layout(
      (rv) => `if [ "$CUTOVER_COMPONENT" = a ]; then
${rendezvous(rv, 20, `-e "${rv}/started-b" -a -e "${rv}/started-c"`)}
  echo "a: provisioning failed" >&2
  exit 1
fi
# b and c: a minute, unless cancelled
sleep 60
touch "${rv}/finished-$CUTOVER_COMPONENT"`,
    );
    const started = Date.now();
    const r = await cli('topology', 'migrate', '--yes', '--json');
    const tookMs = Date.now() - started;
    const summary = (JSON.parse(r.stdout) as { summary: { id: string; lifecycle: string } }).summary;
    expect(summary.lifecycle, r.stderr).toBe('failed');
    // b and c were running beside a when it failed, and were stopped rather than waited for.
    for (const c of ['b', 'c']) {
      expect(existsSync(path.join(rv, `started-${c}`))).toBe(true);
      expect(existsSync(path.join(rv, `finished-${c}`))).toBe(false);
    }
    expect(tookMs).toBeLessThan(55_000);
    const logs = await cli('topology', 'migration', 'logs', summary.id);
    expect(logs.stdout).toContain('a: provisioning failed');
    // Rolled back: every green slot that may have been started is retired.
    for (const c of ['a', 'b', 'c']) expect(existsSync(path.join(rv, `retired-${c}-green`))).toBe(true);
  }, 60_000);
});
