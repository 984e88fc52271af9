import type { DriverSet } from '../runner/execute-command.js';
import { createContainerDriver } from './container-driver.js';
import { createExecDriver } from './exec-driver.js';
import { createNginxDriver } from './nginx-driver.js';
import { observeNginxRoute } from './nginx-observe.js';
import { createProcessDriver } from './process-driver.js';
import { createRouterDriver } from './router-driver.js';

/** The built-in drivers: components as processes, exec scripts or containers, routes by the router or nginx. */
export function defaultDrivers(): DriverSet {
  return {
    component: {
      exec: createExecDriver(),
      process: createProcessDriver(),
      container: createContainerDriver(),
    },
    route: { router: createRouterDriver(), nginx: { ...createNginxDriver(), observe: observeNginxRoute } },
  };
}
