/**
 * The MigrationService of this machine: migrations in a state directory, each driven by a runner
 * process of its own (or by the caller's process, with `attach`).
 */
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { readCurrentLayout, readLayoutAt } from '../store/layout-store.js';
import type { StateDir } from '../store/state-dir.js';
import { planAgainstLive } from './plan-live.js';
import { rollbackOperations } from './rollback-source.js';
import type { MigrationService } from './service-types.js';

const inTheBackground = (pid: number) => `in the background (pid ${pid})`;

/**
 * `secrets`: what this process reads (decided at its edge), for plans and the runners it starts.
 * `reachAgain`: the options that name this state directory to another command (` -f app.yaml`),
 * for messages.
 */
export function localService(stateDir: StateDir, secrets: ProcessSecrets, reachAgain = ''): MigrationService {
  // The topology loader and the planner are loaded by the operations that use them: an operator's
  // verb needs neither, and a CLI starting on a busy machine takes CPU from the traffic it serves.
  // The migrations (runners, journals, claims, notifications) likewise: a plan needs none of them.
  const api = () => import('../api.js');
  const migrations = () => import('./migrations.js');
  const ref = async (id: string) => (await migrations()).findMigration(stateDir, id);
  const service: MigrationService = {
    where: stateDir.root,
    reachAgain,
    lookAgainMs: 250, // a claim file read
    validate: async (source) => (await api()).validationOf(source),
    async plan(desired, against, options) {
      const { planTopologyText } = await api();
      if (against.kind !== 'recorded') return planTopologyText(desired, against, options);
      return planTopologyText(desired, { kind: 'recorded', stateDir, secrets }, options);
    },
    planLive: (desired, options) => planAgainstLive(service, desired, options),
    currentLayout: (environment) => readCurrentLayout(stateDir, environment),
    layoutAt: (environment, serial) => readLayoutAt(stateDir, environment, serial),
    observe: async (environment) => (await api()).observeEnvironment(stateDir, environment),
    async start(request) {
      const { createMigration, loadState, spawnRunner, summarize } = await migrations();
      const created = await createMigration({
        source: { text: request.text, file: request.file, baseDir: request.baseDir },
        stateDir,
        secrets,
        ...(request.planId === undefined ? {} : { planId: request.planId }),
        ...(request.baseSerial === undefined ? {} : { baseSerial: request.baseSerial }),
        ...(request.startedBy === undefined ? {} : { startedBy: request.startedBy }),
        ...(request.commit === undefined ? {} : { commit: request.commit }),
        ...(request.commitFrom === undefined ? {} : { commitFrom: request.commitFrom }),
        ...(request.appliedCommit === undefined ? {} : { appliedCommit: request.appliedCommit }),
        ...(request.replace === undefined ? {} : { replace: request.replace }),
        ...(request.rolledBackTo === undefined ? {} : { rolledBackTo: request.rolledBackTo }),
        ...(request.parallelism === undefined ? {} : { parallelism: request.parallelism }),
      });
      if (!created.created) return { created: false, planId: created.plan.planId };
      const { id, environment } = created.spec;
      const notice = created.notice === undefined ? {} : { notice: created.notice };
      const pid = request.attach ? null : await spawnRunner(stateDir, environment, id, secrets);
      return {
        created: true,
        summary: summarize({ stateDir, environment, id }, loadState(stateDir, environment, id), reachAgain),
        planId: created.spec.plan.planId,
        runs: pid === null ? '' : inTheBackground(pid),
        runnerPid: pid,
        ...notice,
      };
    },
    async attach(id, onLine) {
      const r = await ref(id);
      const { hostMigration, spawnRunner, summarize } = await migrations();
      const { attachedGraceMs } = await import('../notify/notifier.js');
      // Loaded here: the drivers pull in most of the engine.
      const { defaultDrivers } = await import('../drivers/default-drivers.js');
      const hosted = await hostMigration(stateDir, r.environment, r.id, defaultDrivers(), secrets, onLine);
      return {
        async done() {
          const final = await hosted.runner.done();
          // Its last notifications, within a small bound: the caller may exit once this returns.
          await hosted.runner.deliveries(attachedGraceMs);
          return summarize(r, final, reachAgain);
        },
        async leave() {
          // The migration must not die with this process: hand it to a background runner.
          await hosted.stop();
          return inTheBackground(await spawnRunner(stateDir, r.environment, r.id, secrets));
        },
      };
    },
    async list(filter) {
      const { listMigrations } = await migrations();
      return listMigrations(
        stateDir,
        filter.environment === undefined
          ? { all: true, reachAgain }
          : { all: true, reachAgain, environment: filter.environment },
      )
        .filter((m) => filter.state === undefined || m.lifecycle === filter.state)
        .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    },
    async find(prefix) {
      return (await ref(prefix)).id;
    },
    async show(id) {
      const r = await ref(id);
      const { loadState, summarize } = await migrations();
      const state = loadState(r.stateDir, r.environment, r.id);
      return { summary: summarize(r, state, reachAgain), state };
    },
    async *logs(id, options) {
      const r = await ref(id);
      yield* (await migrations()).readLog(r, options);
    },
    async *events(options) {
      const { followEvents } = await import('../notify/event-feed.js');
      yield* followEvents(stateDir, options);
    },
    async verb(id, verb, by, options) {
      const r = await ref(id);
      const { operate, summarize } = await migrations();
      const outcome = await operate(r, secrets, verb, by, options);
      return { summary: summarize(r, outcome.state, reachAgain), recovered: outcome.recovered };
    },
    async resolve(id, request, by) {
      const r = await ref(id);
      const { summarize } = await migrations();
      const { resolveLocal } = await import('./resolve-local.js');
      const state = await resolveLocal(r, secrets, request, by);
      return { summary: summarize(r, state, reachAgain), state };
    },
    async inFlight(environment) {
      return (await migrations()).activeMigration(stateDir, environment);
    },
    async status(environment) {
      const { readEnvironmentStatus } = await import('../status/read-status.js');
      return readEnvironmentStatus(service, environment);
    },
    async environments() {
      const { readEnvironmentSummaries } = await import('../status/read-status.js');
      const { recordedEnvironments } = await import('../status/recorded-environments.js');
      return readEnvironmentSummaries(service, await recordedEnvironments(stateDir));
    },
    async down(environment, options) {
      const { takeDown } = await import('./down.js');
      const { defaultDrivers } = await import('../drivers/default-drivers.js');
      const { components, routes } = await takeDown(
        stateDir,
        environment,
        defaultDrivers(),
        secrets,
        options,
      );
      return { components, routes };
    },
    // Local migrations run in runner processes of their own: a server hosts nothing for them.
    hostWorker: async () => ({ description: 'local', shutdown: async () => {} }),
    async superviseRouters(options) {
      const { superviseRouter } = await import('../drivers/router-driver.js');
      await superviseRouter(stateDir, options);
    },
    async adoptOrphans(wanted) {
      const { adoptOrphans } = await import('./adopt-orphans.js');
      return adoptOrphans(stateDir, reachAgain, secrets, wanted);
    },
    async close() {},
    planRollback: (environment, request) => rollbackOperations(service).planRollback(environment, request),
    startRollback: (environment, request) => rollbackOperations(service).startRollback(environment, request),
  };
  return service;
}
