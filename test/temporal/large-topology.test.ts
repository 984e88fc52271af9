/**
 * Temporal mode with a large layout. Temporal refuses any payload over 2 MB; a migration's input
 * (its plan and both topologies) passes that near 2,500 components as plain JSON. Payloads are
 * compressed (engine/temporal/payload-codec.ts) and each driver call gets only what it needs, so a
 * 3,000-component migration starts, answers queries and updates, and stops cleanly; a layout too
 * large even so is refused up front with the reason and what to do instead.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { dataConverter } from '../../engine/temporal/payload-codec.js';
import { migrationWorkflowId } from '../../engine/temporal/workflow-definitions.js';
import { runCli, tempDir } from '../support/cli.js';
import {
  cleanupsAfterEach,
  connectClient,
  isFinalState,
  sharedTemporal,
  startWorker,
  type TemporalTarget,
  temporalEnv,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

const cleanups = cleanupsAfterEach();

/** `count` components of an exec driver whose directory has no scripts: every stage is a no-op. */
function largeTopology(environment: string, count: number, envValue: (i: number) => string): string {
  const lines = [
    'apiVersion: cutover/v1',
    'kind: Topology',
    'metadata:',
    `  name: ${environment}`,
    'drivers:',
    '  noop:',
    '    type: exec',
    '    dir: ./noop',
    'components:',
  ];
  for (let i = 0; i < count; i++) {
    lines.push(
      `  svc-${i}:`,
      '    driver: noop',
      '    version: "1.0.0"',
      `    env: { REGION: eu-west-1, LOG_LEVEL: info, SERVICE_URL: "http://svc-${i}.internal:8080", EXTRA: "${envValue(i)}" }`,
      `    placement: { labels: { zone: "zone-${i % 3}", tier: backend } }`,
    );
    if (i > 0 && i % 10 !== 0) lines.push(`    dependsOn: [svc-${i - (i % 10)}]`);
  }
  return `${lines.join('\n')}\n`;
}

/** Every payload in a history, as Temporal stores it. */
function payloadsOf(value: unknown, out: { data: Uint8Array; metadata: Record<string, Uint8Array> }[] = []) {
  if (value === null || typeof value !== 'object') return out;
  const v = value as Record<string, unknown>;
  if (v.data instanceof Uint8Array && v.metadata && typeof v.metadata === 'object') {
    out.push({ data: v.data, metadata: v.metadata as Record<string, Uint8Array> });
    return out;
  }
  for (const child of Object.values(v)) payloadsOf(child, out);
  return out;
}

describe('Temporal mode: a large layout', () => {
  it('migrates 3,000 components: starts, answers status and verbs, history payloads stay small', async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('large') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    mkdirSync(path.join(dir, 'noop'));
    const environment = uniqueName('large');
    const file = path.join(dir, 'topology.yaml');
    const text = largeTopology(environment, 3_000, (i) => `value-${i}-`.repeat(8));
    writeFileSync(file, text);
    await startWorker(t, path.join(dir, '.cutover'));
    const client = await connectClient(t);
    cleanups.push(() => client.close());

    const created = await client.create({ text, file, baseDir: dir });
    if (!created.created) throw new Error('nothing to migrate');
    const id = created.spec.id;
    expect(JSON.stringify(created.spec).length).toBeGreaterThan(2_500_000); // over Temporal's limit as JSON

    // Driver calls run, the status query answers with the whole state, verbs are updates.
    const running = await waitForState(client, id, (s) => s.cursor >= 10, 60_000);
    expect(Object.keys(running.spec.desired.components)).toHaveLength(3_000);
    await client.verb(id, 'pause');
    await waitForState(client, id, (s) => s.lifecycle === 'paused', 30_000);
    await client.verb(id, 'resume');
    await waitForState(client, id, (s) => s.lifecycle === 'running' && s.cursor >= 20, 60_000);
    await client.verb(id, 'cancel');
    const ended = await waitForState(client, id, isFinalState, 60_000);
    expect(ended.lifecycle).toBe('cancelled');

    // As stored: the large payloads are compressed, none near the 2 MB limit.
    const connection = await Connection.connect({ address: t.address });
    cleanups.push(() => connection.close());
    const raw = new Client({ connection, dataConverter });
    const history = await raw.workflow.getHandle(migrationWorkflowId(environment)).fetchHistory();
    const payloads = payloadsOf(history);
    const largest = Math.max(...payloads.map((p) => p.data.length));
    const compressed = payloads.filter((p) => p.metadata['cutover-encoding'] !== undefined);
    expect(compressed.length).toBeGreaterThan(0);
    expect(largest).toBeLessThan(512 * 1024);
    // Driver calls carry one component, not the layout: far more of them than large payloads.
    expect(payloads.length).toBeGreaterThan(compressed.length * 2);
    console.log(
      `3,000 components: spec ${(JSON.stringify(created.spec).length / 1e6).toFixed(2)} MB as JSON; ` +
        `history ${payloads.length} payloads, ${compressed.length} compressed, largest ${(largest / 1024).toFixed(0)} KiB`,
    );
  }, 240_000);

  it('refuses up front a layout too large even compressed, saying to run it locally', async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('too-large') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    mkdirSync(path.join(dir, 'noop'));
    const environment = uniqueName('too-large');
    const file = path.join(dir, 'topology.yaml');
    // Random text compresses poorly: 2,000 × 1.6 KB of it is well over the limit once compressed.
    writeFileSync(
      file,
      largeTopology(environment, 2_000, () => randomBytes(800).toString('hex')),
    );
    const result = await runCli(['topology', 'migrate', '-f', file, '--yes', '--detach'], {
      env: temporalEnv(t),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/2,000 components\) is \d+\.\d\d MB as Temporal stores it/);
    expect(result.stderr).toContain('Run this migration with the local runner (without WORKFLOW_HOST)');
    // Nothing was started.
    const client = await connectClient(t);
    cleanups.push(() => client.close());
    expect(await client.list({ environment })).toEqual([]);
  }, 120_000);
});
