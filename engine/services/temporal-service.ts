/**
 * The MigrationService of Temporal mode (`WORKFLOW_HOST`): migrations are workflows, driven by
 * `cutover worker` processes. The connection opens at the first operation that needs Temporal, so
 * what needs none (validating, planning against a file) works without it; a failed connection is
 * tried again at the next operation.
 */

import { CutoverError } from '../../core/errors.js';
import { start as startState } from '../../core/migration/step.js';
import { summaryOf } from '../../core/migration/summary.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import type { StateDir } from '../store/state-dir.js';
import type { TemporalSettings } from '../temporal/connection.js';
import type { TemporalMigrations } from '../temporal/temporal-migrations.js';
import { planAgainstLive } from './plan-live.js';
import { rollbackOperations } from './rollback-source.js';
import { followElsewhere, type MigrationService } from './service-types.js';

/**
 * `secrets`: what this process reads (decided at its edge): plans digest them, a worker it hosts
 * runs with them. `stateDir`: this process's, whose key hashes them for plans (the worker's).
 */
export function temporalService(
  settings: TemporalSettings,
  secrets: ProcessSecrets,
  stateDir?: StateDir,
): MigrationService {
  let connecting: Promise<TemporalMigrations> | null = null;
  const temporal = (): Promise<TemporalMigrations> => {
    if (!connecting) {
      const attempt = import('../temporal/temporal-migrations.js').then((m) =>
        m.TemporalMigrations.connect(settings),
      );
      connecting = attempt;
      attempt.catch(() => {
        if (connecting === attempt) connecting = null;
      });
    }
    return connecting;
  };
  const where = `WORKFLOW_HOST=${settings.address}`;
  const runs = `on Temporal (${where})`;
  const api = () => import('../api.js');
  const service: MigrationService = {
    where,
    // WORKFLOW_HOST, in the environment of the next command too, reaches the same migrations.
    reachAgain: '',
    lookAgainMs: 1_000, // a visibility query
    // Validation is the same on every machine: no need for Temporal.
    validate: async (source) => (await api()).validationOf(source),
    // Against the record Temporal keeps, observed by a worker (the slots live on the workers' machines).
    async plan(desired, against, options) {
      const { planTopologyText } = await api();
      if (against.kind !== 'recorded') return planTopologyText(desired, against, options);
      const t = await temporal();
      return planTopologyText(
        desired,
        {
          kind: 'layout',
          home: t.home(stateDir === undefined ? undefined : { key: stateDir, read: secrets }),
        },
        options,
      );
    },
    planLive: (desired, options) => planAgainstLive(service, desired, options),
    currentLayout: async (environment) => (await temporal()).currentLayout(environment),
    layoutAt: async (environment, serial) => (await temporal()).layoutAt(environment, serial),
    // The slots' processes and files are on the workers' machines, not necessarily this one: a
    // worker looks (relative paths resolve where the layout's migration ran, else beside its state directory).
    async observe(environment) {
      const t = await temporal();
      return t.observe(await t.currentLayout(environment));
    },
    async start(request) {
      const { attach: _attach, ...create } = request;
      const created = await (await temporal()).create(
        stateDir ? { ...create, secrets: { key: stateDir, read: secrets } } : create,
      );
      if (!created.created) return { created: false, planId: created.plan.planId };
      // As it stands at its start (visibility may not list it for a moment).
      const summary = summaryOf(startState(created.spec).state);
      return { created: true, summary, planId: created.spec.plan.planId, runs, runnerPid: null };
    },
    attach: async (id, onLine) => followElsewhere(service, id, runs, onLine),
    list: async (filter) => (await temporal()).list(filter),
    find: async (prefix) => (await temporal()).find(prefix),
    show: async (id) => (await temporal()).show(id),
    async *events(options) {
      yield* (await temporal()).events(options);
    },
    async *logs(id, options) {
      yield* (await temporal()).logs(id, options);
    },
    verb: async (id, verb, by, options) => (await temporal()).verb(id, verb, by, options),
    async resolve(id, request, by) {
      const state = await (await temporal()).resolve(id, request, by);
      return { summary: summaryOf(state), state };
    },
    inFlight: async (environment) => (await temporal()).inFlight(environment),
    // The layout is Temporal's; what runs is observed by a worker, where the drivers' state is.
    status: async (environment) => {
      const { readEnvironmentStatus } = await import('../status/read-status.js');
      return readEnvironmentStatus(service, environment);
    },
    environments: async () => {
      throw new CutoverError(
        'NOT_SUPPORTED',
        `listing environments is not available in Temporal mode (${where}): Temporal keeps no index of them; ask for one by name (\`cutover topology status -f FILE\`)`,
      );
    },
    down: async (environment, options) => (await temporal()).down(environment, options),
    async hostWorker(stateDir, wanted) {
      // Connected first: an unreachable Temporal is the server's one error, worker or not.
      await temporal();
      if (!wanted) return { description: `Temporal at ${where}, no worker`, shutdown: async () => {} };
      const { startWorker } = await import('../temporal/worker.js');
      const { defaultDrivers } = await import('../drivers/default-drivers.js');
      const worker = await startWorker({ settings, stateDir, drivers: defaultDrivers(), secrets });
      return { description: `Temporal at ${where}, with a worker`, shutdown: () => worker.shutdown() };
    },
    planRollback: (environment, request) => rollbackOperations(service).planRollback(environment, request),
    startRollback: (environment, request) => rollbackOperations(service).startRollback(environment, request),
    // Workflows have no runner process to die: a worker picks up whatever Temporal holds.
    adoptOrphans: async () => [],
    async close() {
      const open = connecting;
      connecting = null;
      await open?.then((t) => t.close()).catch(() => undefined);
    },
  };
  return service;
}
