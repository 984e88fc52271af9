import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TopologyFile } from '../../core/topology/file-types.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import { topologyText } from '../../core/topology/render-topology.js';
import { repoRoot } from '../support/cli.js';
import { type TopologySpec, toFile, topologySpecArb, toYaml } from './topology-arbitraries.js';

/** `cutover topology rollback` and self-heal run a recorded model again as text: it must load back to itself. */
function roundTrips(yaml: string): void {
  const first = loadTopology(yaml, { file: 'topology.yaml' });
  if (!first.ok) throw new Error(JSON.stringify(first.diagnostics));
  const again = loadTopology(topologyText(first.topology, 'layouts/3.json'), { file: 'layouts/3.json' });
  if (!again.ok) throw new Error(JSON.stringify(again.diagnostics));
  expect(again.topology).toEqual(first.topology);
  expect(JSON.stringify(again.topology)).toBe(JSON.stringify(first.topology));
}

const secretNameArb = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/);

/**
 * A valid topology whose components' `env` values are, by choice, replaced by secret references
 * (`{ secret: NAME }`): a recorded layout holds the reference, never the value, and must keep it.
 */
const withSecretRefsArb: fc.Arbitrary<TopologyFile> = fc
  .tuple(topologySpecArb, fc.array(fc.option(secretNameArb, { nil: undefined }), { maxLength: 12 }))
  .map(([spec, picks]: [TopologySpec, Array<string | undefined>]) => {
    const file = toFile(spec);
    let i = 0;
    for (const component of Object.values(file.components)) {
      if (!component.env) continue;
      for (const key of Object.keys(component.env)) {
        const secret = picks[i++ % Math.max(picks.length, 1)];
        if (secret !== undefined) component.env[key] = { secret };
      }
    }
    return file;
  });

const formatArb = fc.constantFrom(
  undefined,
  '{address}',
  '{addresses}',
  'postgres://app@{host}:{port}/app',
  '{"url": "http://{address}/"}',
);

/**
 * A valid topology whose components' `env` values are, by choice, references to one of their
 * dependencies (`{ ref, format }`, the format left out or not): a recorded layout keeps the format.
 */
const withDependencyRefsArb: fc.Arbitrary<TopologyFile> = fc
  .tuple(
    topologySpecArb,
    fc.array(fc.option(fc.tuple(fc.nat(), formatArb), { nil: undefined }), { maxLength: 12 }),
  )
  .map(([spec, picks]) => {
    const file = toFile(spec);
    let i = 0;
    for (const component of Object.values(file.components)) {
      const dependsOn = component.dependsOn ?? [];
      if (!component.env || dependsOn.length === 0) continue;
      for (const key of Object.keys(component.env)) {
        const pick = picks[i++ % Math.max(picks.length, 1)];
        if (pick === undefined) continue;
        const [which, format] = pick;
        const ref = dependsOn[which % dependsOn.length] as string;
        component.env[key] = format === undefined ? { ref } : { ref, format };
      }
    }
    return file;
  });

/** Every topology file the project ships: examples and test fixtures, the invalid ones and CI's aside. */
function shippedTopologies(): string[] {
  const files: string[] = [];
  for (const base of ['examples', 'test/fixtures']) {
    const dir = path.join(repoRoot, base);
    for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
      if (/\.ya?ml$/.test(entry) && !entry.includes('broken') && !entry.startsWith('ci')) {
        files.push(path.join(dir, entry));
      }
    }
  }
  return files;
}

describe('a model rendered back as a topology file', () => {
  it('loads back to the same model, for any valid topology', () => {
    fc.assert(
      fc.property(topologySpecArb.map(toFile), (file) => roundTrips(toYaml(file))),
      { numRuns: 300 },
    );
  });

  it('loads back to the same model when env values are references to dependencies', () => {
    let withRefs = 0;
    fc.assert(
      fc.property(withDependencyRefsArb, (file) => {
        if (toYaml(file).includes('ref:')) withRefs++;
        roundTrips(toYaml(file));
      }),
      { numRuns: 200 },
    );
    // The property is not vacuous: many of the files drawn do hold references.
    expect(withRefs).toBeGreaterThan(20);
  });

  it('loads back to the same model when env values are secret references', () => {
    fc.assert(
      fc.property(withSecretRefsArb, (file) => roundTrips(toYaml(file))),
      { numRuns: 200 },
    );
  });

  it('keeps a secret reference as the reference: the name, never a value', () => {
    const yaml = readFileSync(path.join(repoRoot, 'test/fixtures/secrets/topology.yaml'), 'utf8');
    const first = loadTopology(yaml, { file: 'topology.yaml' });
    if (!first.ok) throw new Error(JSON.stringify(first.diagnostics));
    const text = topologyText(first.topology, 'layout serial 2 of secrets');
    const again = loadTopology(text, { file: 'layout' });
    if (!again.ok) throw new Error(JSON.stringify(again.diagnostics));
    expect(again.topology.components.api?.env).toEqual({
      DB_PASSWORD: { secret: 'DB_PASSWORD' },
      LOG_LEVEL: 'info',
    });
    expect(again.topology.components.jobs?.env).toEqual({ API_TOKEN: { secret: 'API_TOKEN' } });
  });

  it('loads back to the same model, for every example and test fixture', () => {
    const files = shippedTopologies();
    expect(files.length).toBeGreaterThan(5);
    expect(files.some((f) => f.includes(path.join('fixtures', 'secrets')))).toBe(true);
    for (const f of files) roundTrips(readFileSync(f, 'utf8'));
  });
});
