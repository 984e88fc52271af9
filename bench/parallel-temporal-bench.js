/**
 * Parallel bench in Temporal mode: the same layouts as bench/parallel-bench.js (exec components
 * whose provision script sleeps 1 s: N = 10 and 100 independent at parallelism 10, 10 at
 * parallelism 1, a dependency chain of depth 5), run as migration workflows on a real
 * `temporal server start-dev` (started and stopped here) by an in-process worker with the real
 * drivers. Each migration's own time (its state's start to its end) is compared with the ideal,
 * ceil(N / parallelism) × 1 s, or d × 1 s for a chain. The goal: at most the ideal plus 20 %.
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { defaultDrivers } from '../dist/engine/drivers/default-drivers.js';
import { noSecrets } from '../dist/engine/secrets/secret-source.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import { dataConverter } from '../dist/engine/temporal/payload-codec.js';
import { TemporalMigrations } from '../dist/engine/temporal/temporal-migrations.js';
import { startWorker } from '../dist/engine/temporal/worker.js';
import { migrationWorkflowId } from '../dist/engine/temporal/workflow-definitions.js';
import { judgeGoal, withTempDir } from './support.js';
import { startDevServer } from './temporal-bench.js';

export const name = 'parallel-temporal';
export const title =
  'Parallel migrations in Temporal mode: exec components with a 1 s provision (dev server, one worker)';
export const columns = [
  { key: 'layout', label: 'layout' },
  { key: 'components', label: 'components' },
  { key: 'parallelism', label: 'parallelism' },
  { key: 'idealMs', label: 'ideal ms', format: (v) => v.toFixed(0) },
  { key: 'migrationMs', label: 'migration ms', format: (v) => v.toFixed(0) },
  { key: 'ratio', label: 'ratio', format: (v) => v.toFixed(2) },
  { key: 'wallMs', label: 'wall ms', format: (v) => v.toFixed(0) },
];

/** How long each provision script sleeps. */
const provisionMs = 1_000;
/** The bound: the ideal wall time plus 20 %. */
const allowedRatio = 1.2;
/**
 * Actions run one at a time would give N / parallelism (10 for the first case): a wide miss. The
 * ratio is not free of the load, though: its excess over 1 is the engine's own time (the CLI's
 * start, planning, journal, processes), which a busy machine stretches (1.64 for the first case at
 * load 35 on 2 cores, 1.06 quiet), so the margin is wide.
 */
const failBeyondRatio = 2.5;

function topologyText(environment, count, chain) {
  const lines = [
    'apiVersion: cutover/v1',
    'kind: Topology',
    `metadata: { name: ${environment} }`,
    'drivers:',
    '  infra: { type: exec, dir: ./infra }',
    'components:',
  ];
  for (let i = 0; i < count; i++) {
    const deps = chain && i > 0 ? `, dependsOn: [c${i - 1}]` : '';
    lines.push(`  c${i}: { driver: infra, version: "1"${deps} }`);
  }
  return `${lines.join('\n')}\n`;
}

/** One migration workflow: create (plan, start), then its result. */
async function migrateOnce(t, dir, { count, chain, parallelism }) {
  const environment = `${chain ? 'chain' : 'wide'}-${count}-${parallelism}`;
  const caseDir = join(dir, environment);
  await mkdir(join(caseDir, 'infra'), { recursive: true });
  const script = join(caseDir, 'infra', 'provision');
  await writeFile(script, `#!/bin/sh\nsleep ${provisionMs / 1000}\n`);
  await chmod(script, 0o755);
  const started = performance.now();
  const created = await t.migrations.create({
    text: topologyText(environment, count, chain),
    file: join(caseDir, 'topology.yaml'),
    baseDir: caseDir,
    parallelism,
  });
  if (!created.created) throw new Error('nothing to migrate');
  // Follows continue-as-new to the last run.
  const { state } = await t.client.workflow.getHandle(migrationWorkflowId(environment)).result();
  const wallMs = performance.now() - started;
  if (state.lifecycle !== 'completed')
    throw new Error(`migration ended ${state.lifecycle}: ${state.ending?.reason}`);
  return { migrationMs: state.endedAt - state.startedAt, wallMs };
}

export async function run({ quick, log }) {
  const cases = [
    { layout: 'independent', count: 10, chain: false, parallelism: 10 },
    { layout: 'independent', count: 10, chain: false, parallelism: 1 },
    ...(quick ? [] : [{ layout: 'independent', count: 100, chain: false, parallelism: 10 }]),
    { layout: 'chain', count: 5, chain: true, parallelism: 10 },
  ];
  return withTempDir('parallel-temporal', async (dir) => {
    log('starting a Temporal dev server');
    const server = await startDevServer();
    const settings = { address: server.address, namespace: 'default', taskQueue: 'cutover-parallel-bench' };
    let worker;
    let connection;
    let migrations;
    try {
      const stateDir = join(dir, 'worker-state');
      await mkdir(stateDir, { recursive: true });
      worker = await startWorker({
        settings,
        stateDir: StateDir.at(stateDir),
        drivers: defaultDrivers(),
        secrets: noSecrets,
      });
      connection = await Connection.connect({ address: server.address });
      migrations = await TemporalMigrations.connect(settings);
      const t = { migrations, client: new Client({ connection, namespace: 'default', dataConverter }) };
      // Warm-up: the worker's first workflow loads the bundle into a V8 context; not measured.
      log('warm-up: one 2-component migration');
      await migrateOnce(t, join(dir, 'warm'), { count: 2, chain: false, parallelism: 10 });
      const rows = [];
      for (const c of cases) {
        log(`${c.layout}: ${c.count} components, parallelism ${c.parallelism}`);
        const idealMs = (c.chain ? c.count : Math.ceil(c.count / c.parallelism)) * provisionMs;
        const m = await migrateOnce(t, dir, c);
        rows.push({
          layout: c.layout,
          components: c.count,
          parallelism: c.parallelism,
          idealMs,
          migrationMs: m.migrationMs,
          ratio: m.migrationMs / idealMs,
          wallMs: m.wallMs,
        });
      }
      return {
        rows,
        goals: rows.map((r) =>
          judgeGoal({
            label: `Temporal: ${r.layout} ×${r.components} at parallelism ${r.parallelism}: migration time / ideal`,
            value: r.ratio,
            target: allowedRatio,
            failBeyond: failBeyondRatio,
          }),
        ),
        notes: [
          'ideal: ceil(N / parallelism) × 1 s for independent components, depth × 1 s for a chain',
          'migration ms: the workflow’s migration state from its start to its end; wall ms adds planning (a worker observes the layout) and starting the workflow',
          'one dev server (SQLite in memory) and one in-process worker on this machine: the figures include the server’s own CPU',
        ],
      };
    } finally {
      await migrations?.close().catch(() => undefined);
      await connection?.close().catch(() => undefined);
      await worker?.shutdown().catch(() => undefined);
      await server.stop();
    }
  });
}
