/**
 * The migration operations every front end uses, in either mode: local (a state directory, detached
 * runner processes) or Temporal (`WORKFLOW_HOST`). The CLI and the server pick one with
 * `openMigrationService` and behave the same in both.
 */
import type { CurrentLayout } from '../../core/layout.js';
import { start } from '../../core/migration/step.js';
import { type MigrationSummary, summaryOf } from '../../core/migration/summary.js';
import type { Lifecycle, LogLine, MigrationState, Verb } from '../../core/migration/types.js';
import type { Plan } from '../../core/plan/types.js';
import { readCurrentLayout } from '../store/layout-store.js';
import { type TemporalSettings, temporalSettings } from '../temporal/connection.js';
import {
  activeMigration,
  createMigration,
  findMigration,
  listMigrations,
  loadState,
  operate,
  readLog,
  spawnRunner,
  summarize,
} from './migrations.js';

export interface StartRequest {
  /** The topology's text, and the name diagnostics use for it. */
  text: string;
  file: string;
  /** Where its relative paths resolve. */
  baseDir: string;
  planId?: string;
}

export type StartResult =
  | { created: false; plan: Plan }
  | { created: true; summary: MigrationSummary; plan: Plan };

export interface MigrationService {
  readonly mode: 'local' | 'temporal';
  /** Where it keeps things, for messages: a state directory, or WORKFLOW_HOST. */
  readonly where: string;
  currentLayout(environment: string): Promise<CurrentLayout>;
  /** Plans, checks a pinned plan, and starts the migration (in the background). */
  start(request: StartRequest): Promise<StartResult>;
  /** Newest first. */
  list(filter: { environment?: string; state?: Lifecycle }): Promise<MigrationSummary[]>;
  /** A full id, from an id or a unique prefix. */
  find(prefix: string): Promise<string>;
  show(id: string): Promise<{ summary: MigrationSummary; state: MigrationState }>;
  logs(id: string, options: { follow: boolean; signal?: AbortSignal }): AsyncGenerator<LogLine>;
  verb(id: string, verb: Verb, by?: string): Promise<{ summary: MigrationSummary; recovered: boolean }>;
  /** The migration (or take-down) in flight for an environment, if any: its id. */
  inFlight(environment: string): Promise<string | null>;
  /** `topology down`: stops every route and live slot of the environment and records an empty layout. */
  down(environment: string, options: DownOptions): Promise<{ components: string[]; routes: string[] }>;
  close(): Promise<void>;
}

export interface DownOptions {
  /** Where relative paths resolve when the layout records no directory (the topology file's). */
  fallbackBaseDir: string;
  log: (line: string) => void;
}

/** Temporal when WORKFLOW_HOST is set, else the local state directory. */
export async function openMigrationService(
  stateDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<MigrationService> {
  const settings = temporalSettings(env);
  return settings ? openTemporal(settings) : localService(stateDir);
}

export function localService(stateDir: string): MigrationService {
  const ref = (id: string) => findMigration(stateDir, id);
  return {
    mode: 'local',
    where: stateDir,
    currentLayout: (environment) => readCurrentLayout(stateDir, environment),
    async start(request) {
      const created = await createMigration({
        file: request.file,
        text: request.text,
        baseDir: request.baseDir,
        stateDir,
        ...(request.planId === undefined ? {} : { planId: request.planId }),
      });
      if (!created.created) return created;
      const { id, environment } = created.spec;
      await spawnRunner(stateDir, environment, id);
      const r = { stateDir, environment, id };
      return {
        created: true,
        summary: summarize(r, loadState(stateDir, environment, id)),
        plan: created.spec.plan,
      };
    },
    async list(filter) {
      return listMigrations(
        stateDir,
        filter.environment === undefined ? { all: true } : { all: true, environment: filter.environment },
      )
        .filter((m) => filter.state === undefined || m.lifecycle === filter.state)
        .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    },
    async find(prefix) {
      return ref(prefix).id;
    },
    async show(id) {
      const r = ref(id);
      const state = loadState(r.stateDir, r.environment, r.id);
      return { summary: summarize(r, state), state };
    },
    logs(id, options) {
      return readLog(ref(id), options);
    },
    async verb(id, verb, by) {
      const r = ref(id);
      const outcome = await operate(r, verb, by);
      return { summary: summarize(r, outcome.state), recovered: outcome.recovered };
    },
    async inFlight(environment) {
      return activeMigration(stateDir, environment);
    },
    async down(environment, options) {
      // Loaded here: the drivers pull in most of the engine.
      const { takeDown } = await import('./down.js');
      const { defaultDrivers } = await import('../drivers/default-drivers.js');
      const { components, routes } = await takeDown(stateDir, environment, defaultDrivers(), options);
      return { components, routes };
    },
    async close() {},
  };
}

async function openTemporal(settings: TemporalSettings): Promise<MigrationService> {
  const { TemporalMigrations } = await import('../temporal/temporal-migrations.js');
  const t = await TemporalMigrations.connect(settings);
  return {
    mode: 'temporal',
    where: `WORKFLOW_HOST=${settings.address}`,
    currentLayout: (environment) => t.currentLayout(environment),
    async start(request) {
      const created = await t.create(request);
      if (!created.created) return created;
      // As it stands at its start (visibility may not list it for a moment).
      return { created: true, summary: summaryOf(start(created.spec).state, null), plan: created.spec.plan };
    },
    list: (filter) => t.list(filter),
    find: (prefix) => t.find(prefix),
    show: (id) => t.show(id),
    logs: (id, options) => t.logs(id, options),
    verb: (id, verb, by) => t.verb(id, verb, by),
    inFlight: (environment) => t.inFlight(environment),
    down: (environment, options) => t.down(environment, options),
    close: () => t.close(),
  };
}
