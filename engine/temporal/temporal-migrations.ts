/**
 * Migrations in Temporal mode: the same operations as engine/services/migrations.ts (create, list,
 * show, logs, verbs, the current layout), carried out through `@temporalio/client` over one
 * session. One migration in flight per environment comes from the workflow id
 * (`cutover-migration-<environment>`) and a conflict policy that fails the second start; listing
 * uses visibility with search attributes. Each concept is a file of its own: starting
 * (temporal-create.ts), layouts and looks (temporal-layouts.ts), finding and reading
 * (temporal-visibility.ts), verbs and resolve (temporal-operate.ts), taking down (temporal-down.ts).
 */
import type { CurrentLayout } from '../../core/layout.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { Lifecycle, LogLine, MigrationState, Verb, VerbOptions } from '../../core/migration/types.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { ObservedLayout } from '../../core/observed.js';
import type { CreateResult } from '../services/migration-common.js';
import type { MigrationHome, PlanSecrets } from '../services/prepare-migration.js';
import type { ResolveRequest } from '../services/service-types.js';
import type { TemporalSettings } from './connection.js';
import { create, type TemporalCreateRequest, temporalHome } from './temporal-create.js';
import { down } from './temporal-down.js';
import { followTemporalEvents } from './temporal-event-feed.js';
import { currentLayout, layoutAt, observe } from './temporal-layouts.js';
import { resolve, verb } from './temporal-operate.js';
import { TemporalSession } from './temporal-session.js';
import { find, inFlight, list, logs, show } from './temporal-visibility.js';

export { maxStoredSpecBytes, type TemporalCreateRequest } from './temporal-create.js';

export class TemporalMigrations {
  private constructor(private readonly temporal: TemporalSession) {}

  get settings(): TemporalSettings {
    return this.temporal.settings;
  }

  static async connect(settings: TemporalSettings): Promise<TemporalMigrations> {
    return new TemporalMigrations(await TemporalSession.connect(settings));
  }

  async close(): Promise<void> {
    await this.temporal.close();
  }

  /** Where plans and starts read layouts and observe (and, given, digest secrets). */
  home(secrets?: PlanSecrets): MigrationHome {
    return temporalHome(this.temporal, secrets);
  }

  currentLayout(environment: string): Promise<CurrentLayout> {
    return currentLayout(this.temporal, environment);
  }

  layoutAt(environment: string, serial: number): Promise<CurrentLayout | null> {
    return layoutAt(this.temporal, environment, serial);
  }

  observe(layout: CurrentLayout, fallbackBaseDir?: string): Promise<ObservedLayout> {
    return observe(this.temporal, layout, fallbackBaseDir);
  }

  create(request: TemporalCreateRequest): Promise<CreateResult> {
    return create(this.temporal, request);
  }

  down(
    environment: string,
    options: { fallbackBaseDir: string; log: (line: string) => void; volumes?: boolean },
  ): Promise<{ components: string[]; routes: string[] }> {
    return down(this.temporal, environment, options);
  }

  inFlight(environment: string): Promise<string | null> {
    return inFlight(this.temporal, environment);
  }

  list(filter: { environment?: string; state?: Lifecycle }): Promise<MigrationSummary[]> {
    return list(this.temporal, filter);
  }

  find(prefix: string): Promise<string> {
    return find(this.temporal, prefix);
  }

  show(id: string): Promise<{ summary: MigrationSummary; state: MigrationState }> {
    return show(this.temporal, id);
  }

  /** GET /v1/events: every migration's notifications, as the workflows derived them (polled). */
  events(options: { signal: AbortSignal; after?: string }): AsyncGenerator<CloudEvent> {
    return followTemporalEvents(this.temporal.client, {
      ...options,
      taskQueue: this.temporal.settings.taskQueue,
    });
  }

  logs(
    id: string,
    options: { follow: boolean; signal?: AbortSignal; pollMs?: number },
  ): AsyncGenerator<LogLine> {
    return logs(this.temporal, id, options);
  }

  resolve(id: string, request: ResolveRequest, by?: string): Promise<MigrationState> {
    return resolve(this.temporal, id, request, by);
  }

  verb(
    id: string,
    what: Verb,
    by?: string,
    options: VerbOptions = {},
  ): Promise<{ summary: MigrationSummary; recovered: boolean }> {
    return verb(this.temporal, id, what, by, options);
  }
}
