import { type MigrationService, openEngineService } from '../engine/services/migration-service.js';
import type { LivePlan, TopologySource } from '../engine/services/service-types.js';
import { StateDir } from '../engine/store/state-dir.js';

/**
 * Where the watcher's plans and migrations go, as the engine decides (Temporal when WORKFLOW_HOST
 * is set, else each file's state directory): one service per state directory, opened at the first
 * use. A failed connection is tried again at the next use.
 */
export class WatchServices {
  private readonly services = new Map<string, Promise<MigrationService>>();

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  service(stateDir: string): Promise<MigrationService> {
    let service = this.services.get(stateDir);
    if (!service) {
      service = openEngineService({ stateDir: StateDir.at(stateDir), env: this.env });
      this.services.set(stateDir, service);
      service.catch(() => {
        if (this.services.get(stateDir) === service) this.services.delete(stateDir);
      });
    }
    return service;
  }

  /** The migration (or take-down) in flight for an environment, if any. */
  async inFlight(stateDir: string, environment: string): Promise<string | null> {
    return (await this.service(stateDir)).inFlight(environment);
  }

  /**
   * A plan against the live layout, observed as `cutover topology plan` observes it (the plan a
   * pinned start re-computes), with what that layout was: what a saved plan is made of.
   */
  async planLive(stateDir: string, desired: TopologySource): Promise<LivePlan> {
    return (await this.service(stateDir)).planLive(desired);
  }

  async close(): Promise<void> {
    const services = [...this.services.values()];
    this.services.clear();
    await Promise.all(services.map((s) => s.then((service) => service.close()).catch(() => undefined)));
  }
}
