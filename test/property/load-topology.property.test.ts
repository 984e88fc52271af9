import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dottedPath, formatDiagnostic } from '../../core/topology/diagnostic.js';
import { type LoadResult, loadTopology } from '../../core/topology/load-topology.js';
import { mutateStructure, mutateText, structuralMutationArb, textMutationArb } from './break-topology.js';
import {
  binaryLookingArb,
  nameArb,
  prototypeNameArb,
  shuffleKeys,
  toFile,
  topologySpecArb,
  toYaml,
  yamlStyleArb,
} from './topology-arbitraries.js';

const file = 'topology.yaml';

/**
 * The loader's contract: whatever the text, one of two results, never an exception; a failure
 * carries at least one diagnostic, each naming the file and a 1-based line and column.
 */
function expectLoadIsTotal(text: string, name = file): LoadResult {
  let result: LoadResult | undefined;
  try {
    result = loadTopology(text, { file: name });
  } catch (error) {
    throw new Error(`loadTopology threw on ${JSON.stringify(text)}: ${(error as Error).stack}`);
  }
  if (result.ok) {
    expect(Object.keys(result)).toEqual(['ok', 'topology']);
    expect(result.topology.apiVersion).toBe('cutover/v1');
    return result;
  }
  expect(Object.keys(result)).toEqual(['ok', 'diagnostics']);
  expect(result.diagnostics.length).toBeGreaterThanOrEqual(1);
  for (const d of result.diagnostics) {
    expect(d.file).toBe(name);
    expect(Number.isInteger(d.line) && d.line >= 1, `line ${d.line}`).toBe(true);
    expect(Number.isInteger(d.column) && d.column >= 1, `column ${d.column}`).toBe(true);
    expect(typeof d.message).toBe('string');
    expect(d.message.length).toBeGreaterThan(0);
    expect(typeof d.path).toBe('string');
  }
  return result;
}

function describeFailure(result: LoadResult): string {
  return result.ok ? 'ok' : result.diagnostics.map(formatDiagnostic).join('\n');
}

const validFileArb = topologySpecArb.map(toFile);

describe('loadTopology is total', () => {
  it('returns a result, never throws, for arbitrary strings', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.string({ unit: 'grapheme', maxLength: 100 }),
          fc.string({ unit: 'binary', maxLength: 100 }),
        ),
        (text) => {
          expectLoadIsTotal(text);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('returns a result for random bytes read as latin1', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expectLoadIsTotal(Buffer.from(bytes).toString('latin1'));
      }),
      { numRuns: 300 },
    );
  });

  it('names the file it was given in every diagnostic', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), fc.string({ maxLength: 60 }), (name, text) => {
        expectLoadIsTotal(text, name);
      }),
      { numRuns: 100 },
    );
  });

  it('returns a result for any JSON-like value written as YAML', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), yamlStyleArb, (value, style) => {
        expectLoadIsTotal(toYaml(value, style));
      }),
      { numRuns: 200 },
    );
  });

  it('returns a result for YAML with punctuation, tabs and indentation broken', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 3 }),
        fc.array(textMutationArb, { minLength: 1, maxLength: 6 }),
        (value, mutations) => {
          expectLoadIsTotal(mutateText(toYaml(value), mutations));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('returns a result for valid topologies whose text was mutated', () => {
    fc.assert(
      fc.property(
        validFileArb,
        yamlStyleArb,
        fc.array(textMutationArb, { minLength: 1, maxLength: 4 }),
        (topology, style, mutations) => {
          expectLoadIsTotal(mutateText(toYaml(topology, style), mutations));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('returns a result for valid topologies with values replaced, keys renamed and parts deleted', () => {
    fc.assert(
      fc.property(
        validFileArb,
        fc.array(structuralMutationArb, { minLength: 1, maxLength: 4 }),
        (topology, mutations) => {
          expectLoadIsTotal(toYaml(mutateStructure(topology, mutations)));
        },
      ),
      { numRuns: 250 },
    );
  });

  it('returns a result when a duration has more digits than a number holds', () => {
    const hugeDurationArb = fc
      .tuple(fc.stringMatching(/^[1-9][0-9]{0,24}$/), fc.constantFrom('ms', 's', 'm', 'h'))
      .map(([digits, unit]) => `${digits}${unit}`);
    fc.assert(
      fc.property(
        validFileArb,
        hugeDurationArb,
        fc.constantFrom('bake', 'stopTimeout', 'interval'),
        (topology, duration, field) => {
          const copy = structuredClone(topology);
          if (field === 'bake') copy.strategy = { ...copy.strategy, bake: duration };
          for (const d of Object.values(copy.drivers ?? {})) {
            if (field === 'stopTimeout' && d.type === 'process') d.stopTimeout = duration;
          }
          for (const c of Object.values(copy.components)) {
            if (field === 'interval') c.health = { tcp: {}, interval: duration };
          }
          expectLoadIsTotal(toYaml(copy));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('returns a result for anchors and aliases in random places', () => {
    const aliasDocArb = fc
      .tuple(validFileArb, fc.array(textMutationArb, { maxLength: 2 }), fc.nat(), fc.nat())
      .map(([topology, mutations, a, b]) => {
        // Anchor one line's value and refer to it from another line.
        const lines = toYaml(topology).split('\n');
        const i = a % lines.length;
        const j = b % lines.length;
        lines[i] = (lines[i] as string).replace(/: (\S)/, ': &x $1');
        lines[j] = (lines[j] as string).replace(/: \S.*$/, ': *x');
        return mutateText(lines.join('\n'), mutations);
      });
    fc.assert(
      fc.property(aliasDocArb, (text) => {
        expectLoadIsTotal(text);
      }),
      { numRuns: 150 },
    );
  });
});

describe('loadTopology locates its diagnostics inside the file', () => {
  it('points at a line and column that exist in the text', () => {
    const brokenArb = fc.oneof(
      fc.tuple(fc.jsonValue({ maxDepth: 2 }), fc.nat(), fc.boolean()).map(([value, cut, flow]) => {
        const text = toYaml(value, { collectionStyle: flow ? 'flow' : 'block' });
        return text.slice(0, cut % (text.length + 1));
      }),
      fc
        .tuple(validFileArb, fc.array(textMutationArb, { minLength: 1, maxLength: 4 }))
        .map(([t, m]) => mutateText(toYaml(t), m)),
      fc
        .tuple(validFileArb, fc.array(structuralMutationArb, { minLength: 1, maxLength: 3 }))
        .map(([t, m]) => toYaml(mutateStructure(t, m))),
    );
    fc.assert(
      fc.property(brokenArb, (text) => {
        const result = expectLoadIsTotal(text);
        if (result.ok) return;
        // Lines as both YAML parsers count them: \n, \r\n and a lone \r end a line.
        const lines = text.split(/\r\n|\r|\n/);
        for (const d of result.diagnostics) {
          expect(d.line, formatDiagnostic(d)).toBeLessThanOrEqual(lines.length);
          expect(d.column, formatDiagnostic(d)).toBeLessThanOrEqual((lines[d.line - 1] ?? '').length + 1);
        }
      }),
      { numRuns: 250 },
    );
  });
});

describe('valid topologies', () => {
  it('load ok, whatever the YAML style and key order', () => {
    fc.assert(
      fc.property(validFileArb, yamlStyleArb, fc.integer(), (topology, style, seed) => {
        const text = toYaml(shuffleKeys(topology, seed), style);
        const result = expectLoadIsTotal(text);
        expect(result.ok, `${describeFailure(result)}\n---\n${text}`).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('load to a model that keeps every component, version, variable, dependency and route of the file', () => {
    fc.assert(
      fc.property(validFileArb, (topology) => {
        const result = loadTopology(toYaml(topology), { file });
        if (!result.ok) throw new Error(describeFailure(result));
        const model = result.topology;
        expect(Object.keys(model.components).sort()).toEqual(Object.keys(topology.components).sort());
        for (const [name, c] of Object.entries(topology.components)) {
          const loaded = model.components[name];
          expect(loaded?.version).toBe(c.version);
          expect(loaded?.driver).toBe(c.driver);
          expect(Object.entries(loaded?.env ?? {}).sort()).toEqual(Object.entries(c.env ?? {}).sort());
          expect(loaded?.dependsOn).toEqual([...(c.dependsOn ?? [])].sort());
        }
        expect(Object.keys(model.routes).sort()).toEqual(Object.keys(topology.routes ?? {}).sort());
        for (const [name, r] of Object.entries(topology.routes ?? {})) {
          expect(model.routes[name]?.to).toBe(r.to);
          expect(model.routes[name]?.listen).toBe(r.listen);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('keep names and versions that YAML 1.2 reads as strings, such as 0b101', () => {
    fc.assert(
      fc.property(validFileArb, binaryLookingArb, binaryLookingArb, (topology, name, version) => {
        const copy = structuredClone(topology);
        // A component driver: process or exec (the generated file always has one in use).
        const driver = Object.entries(copy.drivers ?? {}).find(
          ([, d]) => d.type === 'process' || d.type === 'exec',
        )?.[0];
        copy.components[name] = { driver: driver as string, version, run: { command: ['true'] } };
        const text = toYaml(copy);
        const result = loadTopology(text, { file });
        expect(result.ok, `${describeFailure(result)}\n---\n${text}`).toBe(true);
        if (result.ok) expect(result.topology.components[name]?.version).toBe(version);
      }),
      { numRuns: 50 },
    );
  });

  it('are rejected with the path of the offending field when a value breaks the schema', () => {
    fc.assert(
      fc.property(validFileArb, fc.nat(), (topology, n) => {
        const names = Object.keys(topology.components);
        const name = names[n % names.length] as string;
        const copy = structuredClone(topology);
        (copy.components[name] as { replicas: number }).replicas = 0;
        const result = expectLoadIsTotal(toYaml(copy));
        expect(result.ok).toBe(false);
        if (!result.ok) {
          expect(result.diagnostics.map((d) => d.path)).toEqual([
            dottedPath(['components', name, 'replicas']),
          ]);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('are rejected, at the reference, when a dependency or route names a component that does not exist', () => {
    const danglingArb = fc
      .tuple(validFileArb, fc.oneof(nameArb, prototypeNameArb), fc.nat(), fc.boolean())
      .filter(([t, missing]) => !Object.hasOwn(t.components, missing))
      .map(([t, missing, n, viaRoute]) => {
        const names = Object.keys(t.components);
        const owner = names[n % names.length] as string;
        const copy = structuredClone(t);
        if (viaRoute) {
          copy.routes = { ...copy.routes, dangling: { listen: '127.0.0.2:1', to: missing } };
          return { topology: copy, path: 'routes.dangling.to' };
        }
        const component = copy.components[owner];
        if (component) component.dependsOn = [missing];
        return { topology: copy, path: dottedPath(['components', owner, 'dependsOn', 0]) };
      });
    fc.assert(
      fc.property(danglingArb, ({ topology, path }) => {
        const result = expectLoadIsTotal(toYaml(topology));
        expect(result.ok, `loaded although ${path} names a missing component`).toBe(false);
        if (!result.ok) expect(result.diagnostics.map((d) => d.path)).toContain(path);
      }),
      { numRuns: 200 },
    );
  });
});
