import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../core/layout.js';
import { buildPlan } from '../../core/plan/build-plan.js';
import { type Action, type Plan, type Stage, stages } from '../../core/plan/types.js';
import { formatDiagnostic } from '../../core/topology/diagnostic.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import type { Topology } from '../../core/topology/types.js';
import { mutateStructure, structuralMutationArb } from './break-topology.js';
import {
  prototypeNameArb,
  shuffleKeys,
  type TopologySpec,
  toFile,
  topologySpecArb,
  toYaml,
  type YamlStyle,
  yamlStyleArb,
} from './topology-arbitraries.js';
import { applyEdits, editArb } from './topology-edits.js';

function load(spec: TopologySpec, shuffleSeed?: number, style?: YamlStyle): Topology {
  const file = shuffleSeed === undefined ? toFile(spec) : shuffleKeys(toFile(spec), shuffleSeed);
  const text = toYaml(file, style);
  const result = loadTopology(text, { file: 'topology.yaml' });
  if (!result.ok) {
    throw new Error(
      `generated topology does not load:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`,
    );
  }
  return result.topology;
}

function layout(topology: Topology | null, environment: string): CurrentLayout {
  return { environment, serial: 3, topology };
}

/** A topology and an edit of it: version bumps, components and routes added, removed or changed. */
const pairArb = fc
  .tuple(topologySpecArb, fc.array(editArb, { minLength: 1, maxLength: 6 }), fc.boolean())
  .map(([spec, edits, reverse]) => {
    const edited = applyEdits(spec, edits);
    return reverse ? { before: edited, after: spec, edits } : { before: spec, after: edited, edits };
  });

const buildUpStages: readonly Stage[] = ['provision_green', 'replicate', 'health_gate'];
const teardownStages: readonly Stage[] = ['drain_blue', 'commit'];

function componentActions(plan: Plan): Map<string, Action[]> {
  const out = new Map<string, Action[]>();
  for (const a of plan.actions) {
    if (a.component === undefined) continue;
    out.set(a.component, [...(out.get(a.component) ?? []), a]);
  }
  return out;
}

/**
 * The components that need a green slot, decided from the two models alone: those whose model or
 * driver settings changed, and, transitively, those depending on an added or replaced component.
 */
function expectedReplaced(before: Topology, after: Topology): Set<string> {
  const replaced = new Set<string>();
  let grew = true;
  while (grew) {
    grew = false;
    for (const [name, now] of Object.entries(after.components)) {
      const old = before.components[name];
      if (!old || replaced.has(name)) continue;
      const changed =
        !isDeepStrictEqual(old, now) ||
        !isDeepStrictEqual(before.drivers[old.driver], after.drivers[now.driver]);
      const depReplaced = now.dependsOn.some((d) => replaced.has(d) || !before.components[d]);
      if (changed || depReplaced) {
        replaced.add(name);
        grew = true;
      }
    }
  }
  return replaced;
}

describe('buildPlan', () => {
  it('plans nothing when the desired topology is the current one', () => {
    fc.assert(
      fc.property(topologySpecArb, (spec) => {
        const x = load(spec);
        const plan = buildPlan(layout(x, x.metadata.name), x);
        expect(plan.actions).toEqual([]);
        expect(plan.settings).toEqual([]);
        expect(plan.resources).toEqual([]);
        expect(plan.summary).toEqual({ add: 0, change: 0, remove: 0 });
      }),
      { numRuns: 100 },
    );
  });

  it('plans nothing for the same layout written with another key order and YAML style', () => {
    fc.assert(
      fc.property(topologySpecArb, fc.integer(), yamlStyleArb, (spec, seed, style) => {
        const x = load(spec);
        const plan = buildPlan(layout(x, x.metadata.name), load(spec, seed, style));
        expect(plan.actions).toEqual([]);
        expect(plan.settings).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });

  it('gives byte-identical plan JSON whatever the key and component order of either file, run after run', () => {
    fc.assert(
      fc.property(
        pairArb,
        fc.integer(),
        fc.integer(),
        yamlStyleArb,
        yamlStyleArb,
        ({ before, after }, seedBefore, seedAfter, styleBefore, styleAfter) => {
          const env = before.metadata.name;
          const reference = JSON.stringify(buildPlan(layout(load(before), env), load(after)));
          const again = JSON.stringify(buildPlan(layout(load(before), env), load(after)));
          const shuffled = JSON.stringify(
            buildPlan(layout(load(before, seedBefore, styleBefore), env), load(after, seedAfter, styleAfter)),
          );
          expect(again).toBe(reference);
          expect(shuffled).toBe(reference);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('orders actions by stage, green slots dependencies first and blue slots dependents first', () => {
    fc.assert(
      fc.property(pairArb, ({ before, after }) => {
        const b = load(before);
        const a = load(after);
        const plan = buildPlan(layout(b, b.metadata.name), a);
        const stageIndex = (action: Action) => stages.indexOf(action.stage);
        plan.actions.forEach((action, i) => {
          const previous = plan.actions[i - 1];
          if (previous) expect(stageIndex(action), action.id).toBeGreaterThanOrEqual(stageIndex(previous));
        });
        const position = new Map(
          plan.actions.flatMap((action, i) =>
            action.component === undefined ? [] : [[`${action.stage} ${action.component}`, i] as const],
          ),
        );
        plan.actions.forEach((action, i) => {
          const name = action.component;
          if (name === undefined) return;
          if (buildUpStages.includes(action.stage)) {
            for (const dep of a.components[name]?.dependsOn ?? []) {
              const at = position.get(`${action.stage} ${dep}`);
              if (at !== undefined) expect(at, `${dep} before ${action.id}`).toBeLessThan(i);
            }
          }
          if (teardownStages.includes(action.stage)) {
            for (const [dependent, c] of Object.entries(b.components)) {
              if (!c.dependsOn.includes(name)) continue;
              const at = position.get(`${action.stage} ${dependent}`);
              if (at !== undefined) expect(at, `${dependent} before ${action.id}`).toBeLessThan(i);
            }
          }
        });
      }),
      { numRuns: 150 },
    );
  });

  it('stands up green for every changed version and touches no component that did not change', () => {
    fc.assert(
      fc.property(pairArb, ({ before, after }) => {
        const b = load(before);
        const a = load(after);
        const plan = buildPlan(layout(b, b.metadata.name), a);
        const byComponent = componentActions(plan);
        const stagesOf = (name: string) => (byComponent.get(name) ?? []).map((x) => x.stage);
        for (const [name, now] of Object.entries(a.components)) {
          const old = b.components[name];
          if (old && old.version !== now.version) {
            expect(stagesOf(name), `${name}: version ${old.version} → ${now.version}`).toContain(
              'provision_green',
            );
          }
        }
        const replaced = expectedReplaced(b, a);
        for (const name of Object.keys(a.components)) {
          if (!b.components[name]) {
            expect(stagesOf(name), `${name} is new`).toEqual(['provision_green', 'health_gate']);
          } else if (replaced.has(name)) {
            expect(stagesOf(name), `${name} is replaced`).toContain('provision_green');
            expect(stagesOf(name), `${name} is replaced`).toContain('commit');
          } else {
            expect(byComponent.get(name) ?? [], `${name} did not change`).toEqual([]);
          }
        }
        for (const name of Object.keys(b.components)) {
          if (!a.components[name])
            expect(stagesOf(name), `${name} is removed`).toEqual(['drain_blue', 'commit']);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('gives every action of a plan a distinct id', () => {
    fc.assert(
      fc.property(pairArb, fc.boolean(), ({ before, after }, fromScratch) => {
        const b = load(before);
        const plan = buildPlan(layout(fromScratch ? null : b, b.metadata.name), load(after));
        const ids = plan.actions.map((x) => x.id);
        expect(new Set(ids).size).toBe(ids.length);
      }),
      { numRuns: 150 },
    );
  });

  it('gives every action edges to earlier actions only, and a green dependency before its dependent', () => {
    fc.assert(
      fc.property(pairArb, fc.boolean(), ({ before, after }, fromScratch) => {
        const b = load(before);
        const a = load(after);
        const plan = buildPlan(layout(fromScratch ? null : b, b.metadata.name), a);
        const seen = new Set<string>();
        for (const action of plan.actions) {
          for (const id of action.after ?? []) expect(seen.has(id), `${action.id} after ${id}`).toBe(true);
          seen.add(action.id);
          if (action.type !== 'provision') continue;
          for (const dep of a.components[action.component as string]?.dependsOn ?? []) {
            const depProvision = `provision_green:${dep}`;
            if (seen.has(depProvision)) expect(action.after).toContain(depProvision);
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('plans, without throwing, any topology the loader accepts', () => {
    fc.assert(
      fc.property(
        topologySpecArb,
        fc.array(structuralMutationArb, { minLength: 1, maxLength: 3 }),
        (spec, mutations) => {
          const text = toYaml(mutateStructure(toFile(spec), mutations));
          const result = loadTopology(text, { file: 'topology.yaml' });
          if (!result.ok) return;
          const t = result.topology;
          const env = t.metadata.name;
          const fromScratch = buildPlan(layout(null, env), t);
          const ids = fromScratch.actions.map((x) => x.id);
          expect(new Set(ids).size).toBe(ids.length);
          expect(buildPlan(layout(t, env), t).actions).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('plans a component and a route named like a JavaScript object property (constructor) as any other', () => {
    fc.assert(
      fc.property(topologySpecArb, prototypeNameArb, fc.boolean(), (spec, name, fromScratch) => {
        const [driver] = spec.drivers.find(([, d]) => d.type === 'process' || d.type === 'exec') ?? [];
        const withIt: TopologySpec = {
          ...spec,
          components: [
            ...spec.components,
            { name, body: { driver: driver as string, version: '1.0.0', run: { command: ['x'] } } },
          ],
          routes: [
            ...spec.routes.filter((r) => r.name !== name),
            { name, body: { listen: '127.0.0.2:8080', to: name } },
          ],
        };
        const before = fromScratch ? null : load(spec);
        const plan = buildPlan(layout(before, spec.metadata.name), load(withIt));
        expect(plan.actions.map((a) => a.id)).toEqual(
          expect.arrayContaining([`provision_green:${name}`, `health_gate:${name}`, `cutover:route:${name}`]),
        );
        expect(plan.actions.find((a) => a.id === `cutover:route:${name}`)?.type).toBe('create_route');
      }),
      { numRuns: 30 },
    );
  });
});
