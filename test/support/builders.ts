import { stringify } from 'yaml';
import type { CurrentLayout } from '../../core/layout.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import type { Topology } from '../../core/topology/types.js';

/** A topology file as a plain object; tests change what they need and keep the rest. */
export interface TopologyDoc {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  drivers: Record<string, unknown>;
  components: Record<string, Record<string, unknown>>;
  routes?: Record<string, Record<string, unknown>>;
  strategy?: Record<string, unknown>;
}

export function shopDoc(): TopologyDoc {
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { apps: { type: 'process' }, infra: { type: 'exec', dir: './infra' } },
    components: {
      db: { driver: 'infra', version: '15', stateful: true },
      api: {
        driver: 'apps',
        version: '2.0.0',
        run: { command: ['node', 'api.js'] },
        replicas: 2,
        dependsOn: ['db'],
        health: { http: { path: '/healthz' } },
      },
      web: { driver: 'apps', version: '1.4.0', run: { command: ['node', 'web.js'] }, dependsOn: ['api'] },
      mailer: { driver: 'apps', version: '0.9.0', run: { command: ['node', 'mailer.js'] } },
    },
    routes: { public: { listen: '127.0.0.1:18080', to: 'web' } },
  };
}

export function toYaml(doc: unknown): string {
  return stringify(doc);
}

export function load(doc: unknown, file = 'topology.yaml'): Topology {
  const result = loadTopology(typeof doc === 'string' ? doc : toYaml(doc), { file });
  if (!result.ok)
    throw new Error(`test topology is invalid:\n${JSON.stringify(result.diagnostics, null, 2)}`);
  return result.topology;
}

export function layoutOf(doc: TopologyDoc, serial = 1): CurrentLayout {
  return { environment: doc.metadata.name, serial, topology: load(doc) };
}

export function clone<T>(value: T): T {
  return structuredClone(value);
}
