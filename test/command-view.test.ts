/**
 * A Temporal activity gets commandView(state, command), not the whole state. Every command of real
 * migrations (driven by the step function) is carried out both ways against recording drivers: the
 * drivers must see the same calls, and the results and log lines must be the same.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandView } from '../core/migration/command-view.js';
import type { Command, MigrationState } from '../core/migration/types.js';
import type { ObservedLayout } from '../core/observed.js';
import type { PlanInputs } from '../core/plan/build-plan.js';
import type { DriverSet } from '../engine/drivers/driver-set.js';
import type { ComponentDriver, RouteDriver } from '../engine/drivers/types.js';
import { hookContext } from '../engine/hooks/hook-command.js';
import { executeCommand } from '../engine/runner/execute-command.js';
import { noSecrets } from '../engine/secrets/secret-source.js';
import { StateDir } from '../engine/store/state-dir.js';
import { clone, shopDoc, type TopologyDoc } from './support/builders.js';
import { Driver, specOf } from './support/migration-builders.js';

let stateDir: string;
let preview: Server;
let previewAddress: string;

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'cutover-view-'));
  preview = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => preview.listen(0, '127.0.0.1', resolve));
  previewAddress = `127.0.0.1:${(preview.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => preview.close(resolve));
  await rm(stateDir, { recursive: true, force: true });
});

/** Drivers that write down every call (without the call options) and answer like a real one. */
function recordingDrivers(calls: unknown[]): DriverSet {
  const component: ComponentDriver = {
    async provision(ctx, slot) {
      calls.push(['provision', ctx, slot]);
      return { component: ctx.component, slot, version: ctx.spec.version, addresses: ['127.0.0.1:9'] };
    },
    async replicate(ctx, from, to) {
      calls.push(['replicate', ctx, from, to]);
    },
    async drain(ctx, slot, timeoutMs) {
      calls.push(['drain', ctx, slot, timeoutMs]);
    },
    async retire(ctx, slot) {
      calls.push(['retire', ctx, slot]);
    },
    async restart(ctx, slot) {
      calls.push(['restart', ctx, slot]);
      return { ...slot, addresses: ['127.0.0.1:10'] };
    },
  };
  const route: RouteDriver = {
    async apply(ctx, state) {
      calls.push(['apply', ctx, state]);
    },
    async remove(ctx, name) {
      calls.push(['remove', ctx, name]);
    },
    async drain(ctx, name, addresses, timeoutMs) {
      calls.push(['drain_route', ctx, name, addresses, timeoutMs]);
      return { drained: true, inFlight: 0 };
    },
  };
  return { component: { process: component, exec: component }, route: { router: route, nginx: route } };
}

async function carryOut(state: MigrationState, command: Command) {
  const calls: unknown[] = [];
  const lines: string[] = [];
  const result = await executeCommand(state, command, {
    stateDir: StateDir.at(stateDir),
    drivers: recordingDrivers(calls),
    secrets: noSecrets,
    signal: new AbortController().signal,
    // timings differ between two runs
    log: (line) => lines.push(line.replace(/\d+ ms/g, 'N ms')),
  });
  return { calls, lines, result };
}

/** Every (state, command) a migration of `before` → `after` issues, with the given outcomes. */
function commandsOf(
  before: TopologyDoc,
  after: TopologyDoc,
  outcome?: (c: Command) => 'ok' | 'fail-permanent',
  inputs: PlanInputs = {},
): [MigrationState, Command][] {
  const driver = new Driver(specOf(before, after, 'mig_test', inputs));
  const seen: [MigrationState, Command][] = [];
  for (let i = 0; i < 500 && driver.state.inflight[0]; i++) {
    seen.push([driver.state, driver.state.inflight[0]]);
    driver.complete(outcome);
  }
  return seen;
}

/** shop, without health probes (the gate would poll slots that do not exist), with routes of both kinds. */
function shop(): TopologyDoc {
  const doc = shopDoc();
  for (const c of Object.values(doc.components)) delete c.health;
  doc.drivers.edge = { type: 'nginx', configFile: '/tmp/never-written.conf' };
  doc.routes = {
    public: { listen: '127.0.0.1:18080', to: 'web', preview: previewAddress },
    admin: { listen: '127.0.0.1:18081', to: 'api', driver: 'edge' },
    mail: { listen: '127.0.0.1:18082', to: 'mailer' },
  };
  doc.strategy = { commit: 'auto', bake: '0s' };
  return doc;
}

const scenarios: [string, () => [MigrationState, Command][]][] = [
  [
    'a version bump (replace, replicate, gate through a preview, shift, drain, retire)',
    () => {
      const after = clone(shop());
      (after.components.api as Record<string, unknown>).version = '2.1.0';
      (after.components.db as Record<string, unknown>).version = '16';
      return commandsOf(shop(), after);
    },
  ],
  [
    'components and routes added and removed',
    () => {
      const after = clone(shop());
      delete after.components.mailer;
      delete after.routes?.mail;
      after.components.search = { driver: 'apps', version: '1.0.0', run: { command: ['node', 's.js'] } };
      (after.routes as Record<string, unknown>).find = { listen: '127.0.0.1:18083', to: 'search' };
      return commandsOf(shop(), after);
    },
  ],
  [
    'a failed step rolled back',
    () => {
      const after = clone(shop());
      (after.components.web as Record<string, unknown>).version = '1.5.0';
      let shifts = 0;
      return commandsOf(shop(), after, (c) =>
        c.kind === 'shift_routes' && !c.restore && ++shifts === 2 ? 'fail-permanent' : 'ok',
      );
    },
  ],
  [
    'a route moved to a new component, then rolled back to the old one',
    () => {
      const after = clone(shop());
      after.components.search = { driver: 'apps', version: '1.0.0', run: { command: ['node', 's.js'] } };
      (after.routes?.admin as Record<string, unknown>).to = 'search';
      const admin = (c: Command) =>
        (c.kind === 'apply_route' && c.route === 'admin') ||
        (c.kind === 'shift_routes' && c.routes.includes('admin'));
      const outcome = (c: Command) =>
        admin(c) && !(c as { restore: boolean }).restore ? 'fail-permanent' : 'ok';
      const seen = commandsOf(shop(), after, outcome);
      expect(seen.some(([, c]) => admin(c) && (c as { restore: boolean }).restore)).toBe(true);
      return seen;
    },
  ],
  [
    'a worker restarted in place (drift of what no traffic depends on) beside a version bump',
    () => {
      const before = clone(shop());
      before.components.worker = { driver: 'apps', version: '1.0.0', run: { command: ['node', 'w.js'] } };
      const after = clone(before);
      (after.components.web as Record<string, unknown>).version = '1.5.0';
      const observed: ObservedLayout = {
        environment: 'shop',
        observedAt: '2026-11-25T10:00:00.000Z',
        components: {
          worker: {
            component: 'worker',
            slot: 'blue',
            version: '1.0.0',
            replicas: [{ address: '127.0.0.1:4000', state: 'not_running' }],
          },
        },
        routes: {},
      };
      const seen = commandsOf(before, after, undefined, { observed });
      expect(seen.map(([, c]) => c.kind)).toContain('restart');
      return seen;
    },
  ],
];

describe('the state an activity gets (commandView)', () => {
  it.each(scenarios)('gives the drivers the same calls as the whole state: %s', async (_name, make) => {
    const commands = make();
    const kinds = new Set(commands.map(([, c]) => c.kind));
    expect(kinds.size).toBeGreaterThanOrEqual(4);
    for (const [state, command] of commands) {
      const whole = await carryOut(state, command);
      const view = await carryOut(commandView(state, command), command);
      expect(view, `${command.kind} ${JSON.stringify(command)}`).toEqual(whole);
    }
  });

  it('covers every kind of driver call across the scenarios', () => {
    const kinds = new Set(scenarios.flatMap(([, make]) => make().map(([, c]) => c.kind)));
    expect([...kinds].sort()).toEqual([
      'apply_route',
      'check_health',
      'drain',
      'provision',
      'record_layout',
      'remove_route',
      'replicate',
      'restart',
      'retire',
      'shift_routes',
      'wait',
    ]);
  });

  it("gives a hook only its context's makings, and the hook the same context and run", async () => {
    const before = shop();
    for (let i = 0; i < 200; i++) {
      before.components[`svc${i}`] = {
        driver: 'apps',
        version: '1.0.0',
        run: { command: ['node', `svc${i}.js`] },
      };
    }
    before.strategy = {
      commit: 'auto',
      bake: '0s',
      hooks: {
        postRollout: [{ name: 'smoke', command: ['node', '-e', 'process.stdin.resume()'], timeout: '10s' }],
      },
    } as unknown as TopologyDoc['strategy'];
    const after = clone(before);
    (after.components.api as Record<string, unknown>).version = '2.1.0';
    const hooks = commandsOf(before, after).filter(([, c]) => c.kind === 'hook');
    expect(hooks.length).toBe(1);
    const [state, command] = hooks[0] as [MigrationState, Command];
    const view = commandView(state, command);
    expect(hookContext(view, command as Extract<Command, { kind: 'hook' }>)).toEqual(
      hookContext(state, command as Extract<Command, { kind: 'hook' }>),
    );
    expect(hookContext(view, command as Extract<Command, { kind: 'hook' }>).versions).toHaveProperty('api');
    expect(view.spec.desired.strategy.hooks).toEqual(state.spec.desired.strategy.hooks);
    expect(view.spec.baseDir).toBe(state.spec.baseDir);
    // Neither the plan nor the components and routes the hook is not told about.
    const json = JSON.stringify(view);
    expect(view.spec.plan.actions).toEqual([]);
    expect(json).not.toContain('svc1.js');
    expect(json).not.toContain('18080');
    expect(json.length).toBeLessThan(JSON.stringify(state).length / 10);
    // …and the hook runs the same on it.
    expect(await carryOut(view, command)).toEqual(await carryOut(state, command));
  });

  it('is far smaller than the state for a large layout', () => {
    const before = shop();
    for (let i = 0; i < 1_000; i++) {
      before.components[`svc${i}`] = {
        driver: 'apps',
        version: '1.0.0',
        run: { command: ['node', `svc${i}.js`] },
        env: { LOG_LEVEL: 'info', REGION: 'eu-west-1' },
      };
    }
    const after = clone(before);
    for (let i = 0; i < 1_000; i += 2)
      (after.components[`svc${i}`] as Record<string, unknown>).version = '1.1.0';
    const [state, command] = commandsOf(before, after)[0] as [MigrationState, Command];
    const whole = JSON.stringify(state).length;
    const view = JSON.stringify(commandView(state, command)).length;
    expect(whole).toBeGreaterThan(500_000);
    expect(view).toBeLessThan(whole / 50);
  });
});
