import type { DriverSet } from '../runner/execute-command.js';
import { createCaddyDriver } from './caddy-driver.js';
import { createContainerDriver } from './container-driver.js';
import { createExecDriver } from './exec-driver.js';
import { createHaproxyDriver } from './haproxy-driver.js';
import { createNginxDriver } from './nginx-driver.js';
import { observeNginxRoute } from './nginx-observe.js';
import { PortPool } from './port-pool.js';
import { createPostgresDriver } from './postgres-driver.js';
import { createProcessDriver } from './process-driver.js';
import { createRedisDriver } from './redis-driver.js';
import { createRouterDriver } from './router-driver.js';

/**
 * The built-in drivers: components as processes, exec scripts, containers, PostgreSQL clusters or
 * redis-servers, routes by the router, nginx, haproxy or Caddy. The process, container, postgres and redis drivers
 * take their ports from one pool, so that
 * provisions running at once never pick the same port.
 */
export function defaultDrivers(ports = new PortPool()): DriverSet {
  return {
    component: {
      exec: createExecDriver(),
      process: createProcessDriver({ ports }),
      container: createContainerDriver({ ports }),
      postgres: createPostgresDriver({ ports }),
      redis: createRedisDriver({ ports }),
    },
    route: {
      router: createRouterDriver(),
      nginx: { ...createNginxDriver(), observe: observeNginxRoute },
      haproxy: createHaproxyDriver(),
      caddy: createCaddyDriver(),
    },
  };
}
