import { buildPlan } from '../core/plan/build-plan.js';
import type { Plan } from '../core/plan/types.js';
import type { Topology } from '../core/topology/types.js';
import {
  localService,
  type MigrationService,
  openMigrationService,
} from '../engine/services/migration-service.js';

/**
 * Where the watcher's plans and migrations go: Temporal when WORKFLOW_HOST is set (one connection,
 * opened at the first use), else each file's state directory.
 */
export class WatchServices {
  readonly useTemporal: boolean;
  private temporal: Promise<MigrationService> | null = null;

  constructor(private readonly env: NodeJS.ProcessEnv) {
    this.useTemporal = Boolean(env.WORKFLOW_HOST);
  }

  service(stateDir: string): Promise<MigrationService> {
    if (!this.useTemporal) return Promise.resolve(localService(stateDir));
    if (!this.temporal) {
      this.temporal = openMigrationService(stateDir, this.env);
      // A failed connection is tried again at the next use.
      this.temporal.catch(() => {
        this.temporal = null;
      });
    }
    return this.temporal;
  }

  /** The migration (or take-down) in flight for an environment, if any. */
  async inFlight(stateDir: string, environment: string): Promise<string | null> {
    return (await this.service(stateDir)).inFlight(environment);
  }

  async planAgainstLayout(stateDir: string, topology: Topology): Promise<Plan> {
    const service = await this.service(stateDir);
    return buildPlan(await service.currentLayout(topology.metadata.name), topology);
  }

  async close(): Promise<void> {
    const temporal = this.temporal;
    this.temporal = null;
    await temporal?.then((service) => service.close()).catch(() => undefined);
  }
}
