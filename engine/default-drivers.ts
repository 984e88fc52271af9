import { createExecDriver } from './drivers/exec-driver.js';
import { createNginxDriver } from './drivers/nginx-driver.js';
import { createProcessDriver } from './drivers/process-driver.js';
import { createRouterDriver } from './router/router-driver.js';
import type { DriverSet } from './runner/execute-command.js';

/** The built-in drivers: components as processes or exec scripts, routes by the router or nginx. */
export function defaultDrivers(): DriverSet {
  return {
    component: { exec: createExecDriver(), process: createProcessDriver() },
    route: { router: createRouterDriver(), nginx: createNginxDriver() },
  };
}
