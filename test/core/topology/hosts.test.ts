/** Hosts (issue 30): `drivers.<name>.runsOn` in the model, its checks, and where each command runs. */
import { describe, expect, it } from 'vitest';
import { emptyLayout } from '../../../core/layout.js';
import { commandHost } from '../../../core/migration/command-host.js';
import type { Command, MigrationSpec } from '../../../core/migration/types.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { describePlanHosts } from '../../../core/plan/plan-hosts.js';
import { localModeHostProblem, runsOnProblems } from '../../../core/topology/hosts.js';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';
import type { Topology } from '../../../core/topology/types.js';
import { renderPlanMarkdown } from '../../../views/render-plan-markdown.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';

const text = (drivers: string, routeDriver = '    driver: edge\n') => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers:
${drivers}
components:
  web:
    driver: apps
    version: "1"
    run: { command: [node, server.js] }
  jobs:
    driver: batch
    version: "1"
    run: { command: [node, jobs.js] }
routes:
  www:
    listen: 127.0.0.1:8080
    to: web
${routeDriver}  admin:
    listen: 127.0.0.1:8081
    to: jobs
${routeDriver}`;

const placed = `  apps: { type: process, runsOn: b }
  batch: { type: process }
  edge: { type: router, runsOn: a }`;

function load(source: string): Topology {
  const result = loadTopology(source, { file: 'topology.yaml' });
  if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
  return result.topology;
}

function problems(source: string): string[] {
  const result = loadTopology(source, { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('drivers.<name>.runsOn', () => {
  it('is kept in the model in its sorted place, and rendered back to the same model', () => {
    const model = load(text(placed));
    expect(Object.keys(model.drivers.apps ?? {})).toEqual(['runsOn', 'stopTimeout', 'type']);
    expect(model.drivers.edge).toEqual({ runsOn: 'a', type: 'router' });
    expect(model.drivers.batch).toEqual({ stopTimeout: 10_000, type: 'process' });
    expect(load(topologyText(model, 'recorded'))).toEqual(model);
  });

  it('leaves the plan of a topology without hosts as it was: no hosts, the same plan id', () => {
    const plain = load(
      text('  apps: { type: process }\n  batch: { type: process }\n  edge: { type: router }'),
    );
    const plan = buildPlan(emptyLayout('shop'), plain, {});
    expect(plan.hosts).toBeUndefined();
    expect(JSON.stringify(plan)).not.toContain('runsOn');
  });

  it('puts in the plan where each component and route runs', () => {
    const plan = buildPlan(emptyLayout('shop'), load(text(placed)), {});
    const where = 'component jobs on any worker, component web on b, route admin on a, route www on a';
    expect(describePlanHosts(plan.hosts ?? [])).toBe(where);
    expect(renderPlanText(plan, { style: plainStyle })).toContain(`Hosts: ${where}.`);
    expect(renderPlanMarkdown(plan)).toContain(`Hosts: ${where}.`);
  });

  it('a component whose driver moves to another host is replaced green-blue (green there, blue retired where it ran)', () => {
    const before = load(text(placed));
    const after = load(text(placed.replace('runsOn: b', 'runsOn: c')));
    const plan = buildPlan({ ...emptyLayout('shop'), serial: 1, topology: before }, after, {});
    expect(plan.resources.map((r) => `${r.kind} ${r.name} ${r.change}`)).toEqual(['component web replace']);
    const spec = {
      desired: after,
      base: { ...emptyLayout('shop'), topology: before },
    } as unknown as MigrationSpec;
    expect(commandHost(spec, { id: 'p', kind: 'provision', component: 'web' })).toBe('c');
    expect(commandHost(spec, { id: 'r', kind: 'retire', component: 'web', slot: 'blue' })).toBe('b');
  });

  it('refuses, by line and field: a host not named as a host, a route on any worker beside placed ones, analysed routes on two hosts', () => {
    expect(
      problems(
        text('  apps: { type: process, runsOn: B_1 }\n  batch: { type: process }\n  edge: { type: router }'),
      ),
    ).toEqual([expect.stringMatching(/^5:\d+ drivers\.apps\.runsOn: /)]);
    // A router per host: each route on its own host's router.
    const split = text(`${placed}\n  edge2: { type: router, runsOn: c }`, '    driver: edge\n').replace(
      /(admin:\n {4}listen: 127.0.0.1:8081\n {4}to: jobs\n {4}driver: )edge/,
      '$1edge2',
    );
    expect(problems(split)).toEqual([]);
    expect(describePlanHosts(buildPlan(emptyLayout('shop'), load(split), {}).hosts ?? [])).toContain(
      'route admin on c',
    );
    // …but an analysed hold judges its routes together: they run on one host.
    const analysed = split.replace(
      '    to: web\n',
      '    to: web\n    shift: [{ weight: 10, hold: 30s, analysis: { successRate: { min: 99 } } }, 100]\n',
    );
    expect(problems(analysed)).toEqual([
      expect.stringMatching(
        /^\d+:\d+ routes\.admin\.driver: driver "edge2" runs on host c, and route www's on host a: with an analysed shift step \(route www\) the routes of a topology run on one host/,
      ),
    ]);
    expect(problems(text(placed, ''))).toEqual([]);
    const mixed = text(placed).replace(
      /(admin:\n {4}listen: 127.0.0.1:8081\n {4}to: jobs\n) {4}driver: edge\n/,
      '$1',
    );
    expect(problems(mixed)).toEqual([
      expect.stringMatching(
        /routes\.admin\.driver: the built-in router runs on any worker, and route www's driver on host a: name a router driver with runsOn for this route too$/,
      ),
    ]);
  });

  it('the local mode refuses every host but its own', () => {
    const model = load(text(placed));
    expect(
      runsOnProblems(model, localModeHostProblem).map((p) => `${p.path.join('.')}: ${p.message}`),
    ).toEqual([
      expect.stringMatching(
        /^drivers\.apps\.runsOn: host b: the local mode runs every call on this machine \(host local\)/,
      ),
      expect.stringMatching(/^drivers\.edge\.runsOn: host a: /),
    ]);
    expect(
      runsOnProblems(load(text(placed.replaceAll(/runsOn: [ab]/g, 'runsOn: local'))), localModeHostProblem),
    ).toEqual([]);
  });
});

/** A command as written without its id (Omit over each member of the union). */
type CommandWithoutId = Command extends infer C ? (C extends Command ? Omit<C, 'id'> : never) : never;

describe('commandHost', () => {
  const desired = load(text(placed));
  const spec = (base: Topology | null): MigrationSpec =>
    ({ desired, base: { ...emptyLayout('shop'), topology: base } }) as unknown as MigrationSpec;
  const at = (command: CommandWithoutId, base: Topology | null = null) =>
    commandHost(spec(base), { id: 'x', ...command } as Command);

  it('places a component call on its driver host, a route call on its route driver host', () => {
    expect(at({ kind: 'provision', component: 'web' })).toBe('b');
    expect(at({ kind: 'check_health', component: 'web', deadlineMs: 1 })).toBe('b');
    expect(at({ kind: 'provision', component: 'jobs' })).toBeUndefined();
    expect(at({ kind: 'shift_routes', routes: ['admin', 'www'], greenPercent: 10, restore: false })).toBe(
      'a',
    );
    expect(at({ kind: 'apply_route', route: 'www', greenPercent: 0, restore: false })).toBe('a');
    expect(at({ kind: 'hook', point: 'rollout', index: 0, name: 'h' })).toBeUndefined();
    expect(at({ kind: 'wait', ms: 1, purpose: 'retry' })).toBeUndefined();
  });

  it('runs blue where the base layout placed it, green where the desired topology does', () => {
    const before = load(text(placed.replace('runsOn: b', 'runsOn: old')));
    expect(at({ kind: 'retire', component: 'web', slot: 'blue' }, before)).toBe('old');
    expect(at({ kind: 'drain', component: 'web', timeoutMs: 1 }, before)).toBe('old');
    expect(at({ kind: 'retire', component: 'web', slot: 'green' }, before)).toBe('b');
    expect(at({ kind: 'provision', component: 'web' }, before)).toBe('b');
  });

  it('places nothing for a topology without hosts', () => {
    const plain = load(
      text('  apps: { type: process }\n  batch: { type: process }\n  edge: { type: router }'),
    );
    const s = {
      desired: plain,
      base: { ...emptyLayout('shop'), topology: plain },
    } as unknown as MigrationSpec;
    for (const command of [
      { kind: 'provision', component: 'web' },
      { kind: 'retire', component: 'web', slot: 'blue' },
      { kind: 'shift_routes', routes: ['www'], greenPercent: 10, restore: false },
      { kind: 'wait', ms: 1, purpose: 'hold' },
    ])
      expect(commandHost(s, { id: 'x', ...command } as Command)).toBeUndefined();
  });
});

describe('drivers.<name>.address (a process driver whose replicas a router on another host dials)', () => {
  const withAddress = (address: string) =>
    text(`  apps: { type: process, runsOn: b, address: "${address}" }
  batch: { type: process }
  edge: { type: router, runsOn: a }`);

  it('is kept in the model and rendered back to the same model', () => {
    const model = load(withAddress('198.18.0.3'));
    expect(model.drivers.apps).toEqual({
      address: '198.18.0.3',
      runsOn: 'b',
      stopTimeout: 10_000,
      type: 'process',
    });
    expect(load(topologyText(model, 'recorded'))).toEqual(model);
    expect(load(withAddress('fd00::3')).drivers.apps).toMatchObject({ address: 'fd00::3' });
  });

  it('refuses a name, a wildcard and an octet past 255, naming the line and field', () => {
    expect(problems(withAddress('db.internal'))).toEqual([
      '5:46 drivers.apps.address: must be an IP address, e.g. 10.0.0.5 or fd00::5 (not a name)',
    ]);
    expect(problems(withAddress('0.0.0.0'))).toEqual([
      expect.stringMatching(/drivers\.apps\.address: is 0\.0\.0\.0, every address: give the one address/),
    ]);
    expect(problems(withAddress('::'))).toEqual([
      expect.stringMatching(/drivers\.apps\.address: is ::, every address/),
    ]);
    expect(problems(withAddress('198.18.0.300'))).toEqual([
      expect.stringMatching(/drivers\.apps\.address: is not an IPv4 address: 198\.18\.0\.300/),
    ]);
  });
});

describe('strategy.hostWait (how long a call placed on a host waits for its worker)', () => {
  const withWait = (wait: string) => `${text(placed)}strategy:\n  hostWait: ${wait}\n`;

  it('is kept in the model only when written, and rendered back to the same model', () => {
    expect(load(text(placed)).strategy.hostWait).toBeUndefined();
    const model = load(withWait('45s'));
    expect(model.strategy.hostWait).toBe(45_000);
    expect(load(topologyText(model, 'recorded'))).toEqual(model);
  });

  it('refuses less than a second (Temporal reads a zero bound as none)', () => {
    expect(problems(withWait('0s'))).toEqual([
      expect.stringMatching(/strategy\.hostWait: is too short: at least 1s/),
    ]);
    expect(problems(withWait('500ms'))).toHaveLength(1);
  });
});
