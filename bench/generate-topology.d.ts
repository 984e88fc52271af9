/** Types of bench/generate-topology.js, for the TypeScript tests that use it. */
export interface GeneratedLayout {
  name: string;
  components: Record<string, unknown>[];
  routes: Record<string, unknown>[];
  bumped: string[];
}

export function seededRandom(seed: number): () => number;
export function generateLayout(options: { size: number; seed?: number; changed?: boolean }): GeneratedLayout;
export function layoutToYaml(layout: GeneratedLayout): string;
export function generateTopologyPair(
  size: number,
  seed: number,
): { before: string; after: string; bumped: string[] };
