/**
 * The one place that decides where cutover's operations run: a cutover server (`--server URL`, or
 * CUTOVER_SERVER), Temporal (WORKFLOW_HOST), or this machine's state directory. Every front end
 * opens its MigrationService here and calls it the same way in every mode.
 */

import { processSecrets } from '../secrets/secret-source.js';
import type { StateDir } from '../store/state-dir.js';
import { temporalSettings } from '../temporal/connection.js';
import { localService } from './local-service.js';
import type { MigrationService } from './service-types.js';

export type * from './service-types.js';
export { localService };

export interface OpenOptions {
  /** The state directory of local mode (the drivers' records in the others). */
  stateDir: StateDir;
  /** A cutover server's URL (`--server`); default CUTOVER_SERVER. */
  server?: string;
  /**
   * WORKFLOW_HOST (with TEMPORAL_*), CUTOVER_SERVER, CUTOVER_TOKEN and the secrets (CUTOVER_SECRET_*,
   * CUTOVER_SECRETS_FILE) are read here, once; default process.env.
   */
  env?: NodeJS.ProcessEnv;
  /** How the caller named the state directory (` -f app.yaml`), repeated in messages in local mode. */
  stateDirOption?: string;
}

/** A cutover server when one is named, else Temporal when WORKFLOW_HOST is set, else the state directory. */
export async function openMigrationService(options: OpenOptions): Promise<MigrationService> {
  const env = options.env ?? process.env;
  const server = options.server ?? env.CUTOVER_SERVER;
  if (server !== undefined && server !== '') {
    const { httpService } = await import('./http-service.js');
    return httpService(server, env.CUTOVER_TOKEN);
  }
  return openEngineService(options);
}

/**
 * Temporal when WORKFLOW_HOST is set, else the state directory; never through a server: what a
 * cutover server and the watcher run on themselves (CUTOVER_SERVER is for their clients).
 */
export async function openEngineService(options: Omit<OpenOptions, 'server'>): Promise<MigrationService> {
  const env = options.env ?? process.env;
  // The process's secrets, once: from the environment its edge hands in (the CLI's, with --secrets-file).
  const secrets = processSecrets(env);
  const settings = temporalSettings(env);
  if (settings) {
    const { temporalService } = await import('./temporal-service.js');
    return temporalService(settings, secrets, options.stateDir);
  }
  return localService(options.stateDir, secrets, options.stateDirOption);
}
