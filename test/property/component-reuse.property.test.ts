import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { generateLayout, generateTopologyPair, layoutToYaml } from '../../bench/generate-topology.js';
import { buildPlan } from '../../core/plan/build-plan.js';
import { ComponentReuse } from '../../core/topology/component-reuse.js';
import { type LoadResult, loadTopology } from '../../core/topology/load-topology.js';
import { mutateText, textMutationArb } from './break-topology.js';
import { toFile, topologySpecArb, toYaml, yamlStyleArb } from './topology-arbitraries.js';
import { applyEdits, editArb } from './topology-edits.js';

/**
 * A load that takes components over from the text loaded before (component-reuse.ts) must be
 * invisible: the second text gives exactly what it gives alone (the same model, key order
 * included, or the same diagnostics), whatever the two texts.
 */
function loadAfter(first: string, second: string): { alone: LoadResult; reusing: LoadResult } {
  const reuse = new ComponentReuse();
  loadTopology(first, { file: 'before.yaml', reuse });
  const reusing = loadTopology(second, { file: 'after.yaml', reuse });
  return { alone: loadTopology(second, { file: 'after.yaml' }), reusing };
}

function expectSame({ alone, reusing }: { alone: LoadResult; reusing: LoadResult }): void {
  if (alone.ok && reusing.ok) {
    expect(JSON.stringify(reusing.topology)).toBe(JSON.stringify(alone.topology));
    expect(reusing.topology).toStrictEqual(alone.topology);
  } else {
    expect(reusing).toStrictEqual(alone);
  }
}

/** How many components of `after` are the very objects of `before`'s model (taken over, not loaded again). */
function shared(before: LoadResult, after: LoadResult): number {
  if (!before.ok || !after.ok) return 0;
  return Object.keys(after.topology.components).filter(
    (name) =>
      Object.hasOwn(before.topology.components, name) &&
      before.topology.components[name] === after.topology.components[name],
  ).length;
}

/**
 * Layouts as the benchmark writes them (block style, in the subset the fast YAML path reads, so
 * components are taken over), the second one changed (1 % of versions bumped) or not, then both
 * texts mutated: characters inserted or deleted, lines indented, repeated, swapped or cut.
 */
const layoutPairArb = fc
  .record({
    size: fc.integer({ min: 1, max: 24 }),
    seed: fc.nat(),
    changed: fc.boolean(),
    first: fc.array(textMutationArb, { maxLength: 2 }),
    second: fc.array(textMutationArb, { maxLength: 4 }),
  })
  .map(({ size, seed, changed, first, second }) => ({
    first: mutateText(layoutToYaml(generateLayout({ size, seed })), first),
    second: mutateText(layoutToYaml(generateLayout({ size, seed, changed })), second),
  }));

describe('loading with the components of the text loaded before', () => {
  it('gives the same model, or the same diagnostics, for two versions of a layout', () => {
    let taken = 0;
    fc.assert(
      fc.property(layoutPairArb, ({ first, second }) => {
        expectSame(loadAfter(first, second));
        const reuse = new ComponentReuse();
        taken += shared(
          loadTopology(first, { file: 'before.yaml', reuse }),
          loadTopology(second, { file: 'after.yaml', reuse }),
        );
      }),
      { numRuns: 120 },
    );
    // The property above would hold as well if nothing were ever taken over.
    expect(taken).toBeGreaterThan(50);
  });

  it('gives the same model for a valid topology edited into another', () => {
    fc.assert(
      fc.property(
        topologySpecArb,
        fc.array(editArb, { maxLength: 4 }),
        yamlStyleArb,
        (spec, edits, style) => {
          const first = toYaml(toFile(spec), style);
          expectSame(loadAfter(first, toYaml(toFile(applyEdits(spec, edits)), style)));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('gives the same result or the same diagnostics when the second text is the first mutated', () => {
    fc.assert(
      fc.property(
        topologySpecArb,
        yamlStyleArb,
        fc.array(textMutationArb, { minLength: 1, maxLength: 4 }),
        (spec, style, mutations) => {
          const first = toYaml(toFile(spec), style);
          expectSame(loadAfter(first, mutateText(first, mutations)));
          expectSame(loadAfter(mutateText(first, mutations), first));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('takes over no lines that end without a newline (the end of a text): they may go on in the next', () => {
    const head = [
      'apiVersion: cutover/v1',
      'kind: Topology',
      'metadata: { name: shop }',
      'drivers: { apps: { type: exec, dir: . } }',
      'components:',
      '  a:',
      '    driver: apps',
      '    version: "1"',
      '    replicas: 1',
    ].join('\n');
    // Read alone, the second text is a YAML error: `1  b` is no key. Had `a` been taken over from the
    // first text's last line, the rest of the line would have been read as a component of its own.
    const loads = loadAfter(head, `${head}  b:\n    driver: apps\n    version: "1"\n`);
    expect(loads.alone.ok).toBe(false);
    expectSame(loads);
  });

  describe('checks what reaches beyond a component taken over', () => {
    const text = (a: string, drivers = 'type: exec\n    dir: .') =>
      [
        'apiVersion: cutover/v1',
        'kind: Topology',
        'metadata:',
        '  name: shop',
        'drivers:',
        '  apps:',
        `    ${drivers}`,
        'components:',
        '  a:',
        '    driver: apps',
        `    version: "1"${a}`,
        '  b:',
        '    driver: apps',
        '    version: "1"',
        '    dependsOn: [a]',
        '  c:',
        '    driver: apps',
        '    version: "1"',
        '    dependsOn: [b]',
        '',
      ].join('\n');

    it('takes the others over when a line is added at the end of a component', () => {
      const reuse = new ComponentReuse();
      const before = loadTopology(text(''), { file: 'before.yaml', reuse });
      // `a` goes on past its lines of before: it is read, not taken over with the line left dangling
      // (which sent the whole text to js-yaml, the slow path, before).
      const after = loadTopology(text('\n    replicas: 2'), { file: 'after.yaml', reuse });
      expect(shared(before, after)).toBe(2);
      expectSame(loadAfter(text(''), text('\n    replicas: 2')));
    });

    it('a cycle closed by the one component that changed', () => {
      const loads = loadAfter(text(''), text('\n    dependsOn: [c]'));
      expect(loads.alone.ok).toBe(false);
      expectSame(loads);
    });

    it('a dependency that is gone', () => {
      const first = `${text('')}  d:\n    driver: apps\n    version: "1"\n    dependsOn: [c]\n`;
      const loads = loadAfter(
        first,
        first.replace('  c:\n    driver: apps\n    version: "1"\n    dependsOn: [b]\n', ''),
      );
      expect(loads.alone.ok).toBe(false);
      expectSame(loads);
    });

    it('a driver that changed under the components', () => {
      const loads = loadAfter(text(''), text('', 'type: process'));
      expect(loads.alone.ok).toBe(false);
      expectSame(loads);
    });
  });

  it('plans the benchmark pair as the two files loaded alone do, taking over the unchanged components', () => {
    const pair = generateTopologyPair(300, 7);
    const reuse = new ComponentReuse();
    const after = loadTopology(pair.after, { file: 'after.yaml', reuse });
    const before = loadTopology(pair.before, { file: 'before.yaml', reuse });
    const afterAlone = loadTopology(pair.after, { file: 'after.yaml' });
    const beforeAlone = loadTopology(pair.before, { file: 'before.yaml' });
    if (!after.ok || !before.ok || !afterAlone.ok || !beforeAlone.ok)
      throw new Error('the pair does not load');
    expect(JSON.stringify(before.topology)).toBe(JSON.stringify(beforeAlone.topology));
    // Every component but the bumped ones is the same object on both sides.
    expect(shared(after, before)).toBe(300 - pair.bumped.length);
    const current = (topology: typeof before.topology) => ({ environment: 'bench', serial: 3, topology });
    expect(JSON.stringify(buildPlan(current(before.topology), after.topology))).toBe(
      JSON.stringify(buildPlan(current(beforeAlone.topology), afterAlone.topology)),
    );
  });
});
