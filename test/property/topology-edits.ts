import fc from 'fast-check';
import type { ComponentFile } from '../../core/topology/file-types.js';
import { type ComponentSpec, nameArb, pick, type TopologySpec } from './topology-arbitraries.js';

/**
 * Edits of a valid topology that keep it valid: version bumps, components and routes added, removed
 * and changed, dependencies added and dropped (only to earlier components, so never a cycle).
 */
export type EditKind =
  | 'bumpVersion'
  | 'changeReplicas'
  | 'changeEnv'
  | 'flipStateful'
  | 'changeHealth'
  | 'addDependency'
  | 'dropDependency'
  | 'addComponent'
  | 'removeComponent'
  | 'changeDriverSetting'
  | 'moveComponentToOtherDriver'
  | 'retargetRoute'
  | 'changeRoutePort'
  | 'changeRouteShift'
  | 'changeRouteDrain'
  | 'addRoute'
  | 'removeRoute'
  | 'changeStrategy';

export interface Edit {
  kind: EditKind;
  a: number;
  b: number;
  name: string;
}

export const editArb: fc.Arbitrary<Edit> = fc.record({
  kind: fc.constantFrom<EditKind>(
    'bumpVersion',
    'changeReplicas',
    'changeEnv',
    'flipStateful',
    'changeHealth',
    'addDependency',
    'dropDependency',
    'addComponent',
    'removeComponent',
    'changeDriverSetting',
    'moveComponentToOtherDriver',
    'retargetRoute',
    'changeRoutePort',
    'changeRouteShift',
    'changeRouteDrain',
    'addRoute',
    'removeRoute',
    'changeStrategy',
  ),
  a: fc.nat(),
  b: fc.nat(),
  name: nameArb,
});

/** Applies edits one after another; every intermediate spec stays valid. */
export function applyEdits(spec: TopologySpec, edits: readonly Edit[]): TopologySpec {
  let out = structuredClone(spec);
  for (const edit of edits) out = applyEdit(out, edit);
  return out;
}

function usedPorts(spec: TopologySpec): Set<number> {
  const used = new Set<number>();
  for (const r of spec.routes) {
    for (const address of [r.body.listen, r.body.preview]) {
      if (address) used.add(Number(address.slice(address.lastIndexOf(':') + 1)));
    }
  }
  return used;
}

function freePort(spec: TopologySpec, seed: number): number {
  const used = usedPorts(spec);
  let port = 1024 + (seed % 60_000);
  while (used.has(port)) port = port >= 65535 ? 1 : port + 1;
  return port;
}

function applyEdit(spec: TopologySpec, edit: Edit): TopologySpec {
  const s = structuredClone(spec);
  const comps = s.components;
  const target = comps.length > 0 ? pick(comps, edit.a) : undefined;
  const index = target ? comps.indexOf(target) : -1;
  const route = s.routes.length > 0 ? pick(s.routes, edit.a) : undefined;
  switch (edit.kind) {
    case 'bumpVersion':
      if (target) target.body.version = `${target.body.version.slice(0, 100)}-r${edit.b % 1000}`;
      break;
    case 'changeReplicas':
      if (target) target.body.replicas = ((target.body.replicas ?? 1) % 1000) + 1;
      break;
    case 'changeEnv':
      if (target) target.body.env = { ...target.body.env, EDITED: String(edit.b) };
      break;
    case 'flipStateful':
      if (target) {
        target.body.stateful = !(target.body.stateful ?? false);
        if (!target.body.stateful) delete target.body.replicate;
      }
      break;
    case 'changeHealth':
      if (target) {
        if (target.body.health && edit.b % 3 === 0) delete target.body.health;
        else target.body.health = { tcp: {}, interval: `${(edit.b % 50) + 1}s` };
      }
      break;
    case 'addDependency':
      if (target && index > 0) {
        const dep = (comps[edit.b % index] as ComponentSpec).name;
        target.body.dependsOn = [...new Set([...(target.body.dependsOn ?? []), dep])];
      }
      break;
    case 'dropDependency':
      if (target?.body.dependsOn && target.body.dependsOn.length > 0) {
        const deps = target.body.dependsOn.filter(
          (_, i) => i !== edit.b % (target.body.dependsOn?.length ?? 1),
        );
        if (deps.length > 0) target.body.dependsOn = deps;
        else delete target.body.dependsOn;
      }
      break;
    case 'addComponent': {
      if (comps.some((c) => c.name === edit.name)) break;
      const [driverName, driver] = pick(
        s.drivers.filter(([, d]) => d.type === 'process' || d.type === 'exec'),
        edit.b,
      );
      const body: ComponentFile = { driver: driverName, version: `${edit.b % 100}.0.0` };
      if (driver.type === 'process') body.run = { command: ['node', `${edit.name}.js`] };
      if (comps.length > 0 && edit.a % 2 === 0) body.dependsOn = [pick(comps, edit.b).name];
      comps.push({ name: edit.name, body });
      break;
    }
    case 'removeComponent': {
      if (!target) break;
      comps.splice(index, 1);
      for (const c of comps) {
        const deps = c.body.dependsOn?.filter((d) => d !== target.name);
        if (deps && deps.length > 0) c.body.dependsOn = deps;
        else delete c.body.dependsOn;
      }
      s.routes = s.routes.filter((r) => {
        if (r.body.to !== target.name) return true;
        if (comps.length === 0 || edit.b % 2 === 0) return false;
        r.body.to = pick(comps, edit.b).name;
        return true;
      });
      break;
    }
    case 'changeDriverSetting': {
      const entry = pick(s.drivers, edit.a);
      const d = entry[1];
      if (d.type === 'process') d.stopTimeout = `${(edit.b % 100) + 1}s`;
      else if (d.type === 'exec') d.dir = `./infra-${edit.b % 10}`;
      else if (d.type === 'nginx') d.configFile = `/etc/nginx/up-${edit.b % 10}.conf`;
      break;
    }
    case 'moveComponentToOtherDriver': {
      if (!target) break;
      const [driverName, driver] = pick(
        s.drivers.filter(([, d]) => d.type === 'process' || d.type === 'exec'),
        edit.b,
      );
      target.body.driver = driverName;
      if (driver.type === 'process' && !target.body.run) target.body.run = { command: ['node', 'server.js'] };
      break;
    }
    case 'retargetRoute':
      if (route && comps.length > 0) route.body.to = pick(comps, edit.b).name;
      break;
    case 'changeRoutePort':
      if (route) route.body.listen = `127.0.0.1:${freePort(s, edit.b)}`;
      break;
    case 'changeRouteShift':
      if (route) route.body.shift = edit.b % 2 === 0 ? [100] : [(edit.b % 98) + 1, 100];
      break;
    case 'changeRouteDrain':
      if (route) route.body.drain = { timeout: `${edit.b % 600}s` };
      break;
    case 'addRoute':
      if (comps.length > 0 && !s.routes.some((r) => r.name === edit.name)) {
        s.routes.push({
          name: edit.name,
          body: { listen: `127.0.0.1:${freePort(s, edit.b)}`, to: pick(comps, edit.a).name },
        });
      }
      break;
    case 'removeRoute':
      if (route) s.routes.splice(s.routes.indexOf(route), 1);
      break;
    case 'changeStrategy':
      s.strategy = { bake: `${edit.b % 100}s`, commit: edit.b % 2 === 0 ? 'auto' : 'manual' };
      break;
  }
  return s;
}
