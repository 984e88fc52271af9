import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../core/topology/load-topology.js';
import { topologyHooksSchema, topologySchema } from '../core/topology/validate-schema.js';
import { repoRoot } from './support/cli.js';

const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
/** The topology reference (generated from the schema by scripts/docs-reference.mjs) and the topology page. */
const reference = readFileSync(path.join(repoRoot, 'docs', 'reference', 'topology.md'), 'utf8');
const topologyPage = readFileSync(path.join(repoRoot, 'docs', 'topology.md'), 'utf8');

type SchemaNode = {
  $ref?: string;
  properties?: Record<string, SchemaNode | boolean>;
  additionalProperties?: SchemaNode | boolean;
  allOf?: { then?: SchemaNode }[];
  items?: SchemaNode & { anyOf?: SchemaNode[]; oneOf?: SchemaNode[] };
  definitions?: Record<string, SchemaNode>;
};

const analysisSchema = JSON.parse(
  readFileSync(path.join(repoRoot, 'schemas', 'analysis.v1.json'), 'utf8'),
) as SchemaNode;

/**
 * Every field path the schema allows, e.g. `components.<name>.health.http.path`; the fields of a
 * list's objects as `routes.<name>.shift[].weight`, and the hooks' fields, the same at every hook
 * point, as `strategy.hooks.<point>[].name`.
 */
function schemaPaths(): string[] {
  // A $ref is `#/definitions/x` in the same file, `<file>#/definitions/x` in another (`strategy.hooks`
  // is defined in topology-hooks.v1.json), or a whole file (a shift step's `analysis.v1.json`).
  const files: Record<string, SchemaNode> = {
    'topology.v1.json': topologySchema as unknown as SchemaNode,
    'topology-hooks.v1.json': topologyHooksSchema as unknown as SchemaNode,
    'analysis.v1.json': analysisSchema,
  };
  const out = new Set<string>();
  const walk = (node: SchemaNode | undefined, at: string, depth: number, file: string) => {
    if (depth > 14 || node === undefined) return;
    if (node.$ref) {
      const [refFile, pointer = ''] = node.$ref.split('#');
      const target = refFile || file;
      const schema = files[target];
      walk(
        pointer ? schema?.definitions?.[pointer.split('/').pop() as string] : schema,
        at,
        depth + 1,
        target,
      );
      return;
    }
    if (node.items) {
      for (const item of node.items.anyOf ?? node.items.oneOf ?? [node.items]) {
        walk(item, `${at}[]`, depth + 1, file);
      }
    }
    const branches = [node, ...(node.allOf ?? []).map((b) => b.then ?? {})];
    for (const branch of branches) {
      for (const [key, child] of Object.entries(branch.properties ?? {})) {
        const p = at ? `${at}.${key}` : key;
        out.add(p);
        if (typeof child === 'object') walk(child, p, depth + 1, file);
      }
    }
    const extra = node.additionalProperties;
    const walkable =
      typeof extra === 'object' &&
      ((extra.$ref && /(component|route|driver|notifytarget)$/.test(extra.$ref)) || extra.properties);
    if (walkable) walk(extra as SchemaNode, `${at}.<name>`, depth + 1, file);
  };
  walk(topologySchema as unknown as SchemaNode, '', 0, 'topology.v1.json');
  const points = /^strategy\.hooks\.(preRollout|rollout|confirmPromotion|postRollout)\[\]/;
  return [...new Set([...out].map((p) => p.replace(points, 'strategy.hooks.<point>[]')))].sort();
}

/** Field paths in the first column of the reference's table. */
function documentedPaths(): string[] {
  return [...reference.matchAll(/^\| `([$\w.<>[\]]+)` +\|/gm)].map((m) => m[1] as string);
}

describe('the topology reference (docs/reference/topology.md)', () => {
  it('documents every field of the topology schema', () => {
    const paths = schemaPaths();
    expect(paths.length).toBeGreaterThan(100);
    expect(paths).toContain('routes.<name>.shift[].analysis.latency.p99.max');
    expect(paths).toContain('strategy.hooks.<point>[].http.url');
    expect(paths).toContain('drivers.<name>.hosts.<name>.labels');
    const documented = new Set(documentedPaths());
    const missing = paths.filter((p) => !documented.has(p));
    expect(missing).toEqual([]);
  });

  it('documents no field the schema does not have', () => {
    const known = new Set(schemaPaths());
    expect(documentedPaths().filter((p) => !known.has(p))).toEqual([]);
  });
});

describe('README and the topology page', () => {
  it('show topology examples that validate', () => {
    for (const [file, text] of [
      ['README.md', readme],
      ['docs/topology.md', topologyPage],
    ] as const) {
      const block = /```yaml\n([\s\S]*?)```/.exec(text)?.[1] ?? '';
      expect(block.length, file).toBeGreaterThan(0);
      const result = loadTopology(block, { file });
      expect(result.ok ? [] : result.diagnostics, file).toEqual([]);
    }
  });

  it('README has the two quick-start commands, as .ci/run runs the second', () => {
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('npm ci && npm test');
    expect(readFileSync(path.join(repoRoot, '.ci', 'run'), 'utf8')).toMatch(/^npm ci && npm test$/m);
  });
});
