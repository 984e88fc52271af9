import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../core/plan/build-plan.js';
import type { Action } from '../../core/plan/types.js';
import { formatDiagnostic } from '../../core/topology/diagnostic.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import type { Topology } from '../../core/topology/types.js';
import { type TopologySpec, toFile, topologySpecArb, toYaml } from './topology-arbitraries.js';
import { applyEdits, editArb } from './topology-edits.js';

function load(spec: TopologySpec): Topology {
  const result = loadTopology(toYaml(toFile(spec)), { file: 'topology.yaml' });
  if (!result.ok) throw new Error(result.diagnostics.map(formatDiagnostic).join('\n'));
  return result.topology;
}

const pairArb = fc
  .tuple(topologySpecArb, fc.array(editArb, { minLength: 1, maxLength: 6 }), fc.boolean())
  .map(([spec, edits, reverse]) => {
    const edited = applyEdits(spec, edits);
    return reverse ? { before: edited, after: spec } : { before: spec, after: edited };
  });

/**
 * The edge rules of plan-edges.ts read literally, each lookup a scan of the plan or the layout
 * (quadratic, as the planner was before its indexes): the oracle the indexed planner must match.
 */
function edgesByScan(actions: readonly Action[], current: Topology | null, desired: Topology): string[][] {
  const find = (type: Action['type'], subject: string) =>
    actions.find((a) => a.type === type && (a.routes ?? [a.component ?? a.route]).includes(subject))?.id;
  const provisionOf = (c: string) => find('provision', c) ?? find('restart', c);
  const currentComponents = Object.entries(current?.components ?? {});
  const dependentsBefore = (c: string) =>
    currentComponents.filter(([, d]) => d.dependsOn.includes(c)).map(([name]) => name);
  const routesToBefore = (c: string) =>
    Object.entries(current?.routes ?? {})
      .filter(([, r]) => r.to === c)
      .map(([name]) => name);
  const routeActionOf = (r: string) =>
    find('create_route', r) ?? find('shift_traffic', r) ?? find('update_route', r) ?? find('remove_route', r);
  return actions.map((a) => {
    const c = a.component ?? '';
    const deps = Object.hasOwn(desired.components, c) ? (desired.components[c]?.dependsOn ?? []) : [];
    let after: (string | undefined)[] = [];
    switch (a.type) {
      case 'provision':
      case 'restart':
        after = deps.map(provisionOf);
        break;
      case 'replicate':
        after = [provisionOf(c)];
        break;
      case 'check_health':
        after = [provisionOf(c), find('replicate', c), ...deps.map((d) => find('check_health', d))];
        break;
      case 'create_route':
      case 'shift_traffic':
      case 'update_route':
        after = (a.routes ?? [a.route as string]).map((r) =>
          find('check_health', desired.routes[r]?.to ?? ''),
        );
        break;
      case 'remove_route':
        after = actions.filter((x) => x.stage === 'cutover').map((x) => x.id);
        break;
      case 'drain':
        after = [
          ...routesToBefore(c).map(routeActionOf),
          find('check_health', c),
          ...dependentsBefore(c).map((d) => find('drain', d)),
        ];
        break;
      case 'retire_blue':
      case 'retire':
        after = [
          find('drain', c),
          ...dependentsBefore(c).flatMap((d) => [find('retire_blue', d), find('retire', d)]),
        ];
        break;
    }
    const ids = actions.map((x) => x.id);
    return [...new Set(after.filter((id): id is string => id !== undefined))].sort(
      (x, y) => ids.indexOf(x) - ids.indexOf(y),
    );
  });
}

describe('plan edges (property)', () => {
  it('are the edges the rules give when read by scanning the plan and the layout', () => {
    fc.assert(
      fc.property(pairArb, fc.boolean(), ({ before, after }, fromScratch) => {
        const b = load(before);
        const a = load(after);
        const current = fromScratch ? null : b;
        const plan = buildPlan({ environment: b.metadata.name, serial: 3, topology: current }, a);
        expect(plan.actions.map((x) => x.after)).toEqual(edgesByScan(plan.actions, current, a));
      }),
      { numRuns: 200 },
    );
  });
});
