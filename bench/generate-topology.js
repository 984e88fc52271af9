/**
 * Deterministic synthetic topologies for the benchmarks, written as YAML text.
 *
 * Shape: components come in applications of `groupSize`; each depends on 0–3 earlier components of
 * its own application, so a version bump replaces its dependents but does not cascade through the
 * whole file (a bump in one application replaces part of that application, as in real layouts).
 * About 70% run on the process driver, the rest on exec drivers; most have an HTTP health check;
 * about 8% are stateful; a handful of routes point at the first component of some applications.
 *
 * The same (size, seed) always gives the same text; `changed: true` gives the same layout with about
 * 1% of the components' versions bumped.
 */

const groupSize = 25;
const routeCount = 6;

/** mulberry32: small, fast, good enough for test data, and the same in every Node version. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function componentName(i, width) {
  return `svc-${String(i).padStart(width, '0')}`;
}

/**
 * The layout as plain data (file shape, not the normalised model). `bumped` lists the names whose
 * version was bumped in the changed variant.
 */
export function generateLayout({ size, seed = 20240601, changed = false }) {
  const rand = seededRandom(seed);
  const pick = (n) => Math.floor(rand() * n);
  const width = String(size - 1).length;
  const components = [];
  for (let i = 0; i < size; i++) {
    const name = componentName(i, width);
    const groupStart = i - (i % groupSize);
    const earlier = i - groupStart;
    const depCount = Math.min(earlier, pick(4));
    const deps = new Set();
    while (deps.size < depCount) deps.add(componentName(groupStart + pick(earlier), width));
    const roll = rand();
    const driver = roll < 0.7 ? 'apps' : roll < 0.9 ? 'infra' : 'jobs';
    const stateful = rand() < 0.08;
    const component = {
      name,
      driver,
      version: `${1 + pick(4)}.${pick(20)}.${pick(10)}`,
      replicas: 1 + pick(3),
      dependsOn: [...deps],
      stateful,
      healthKind: rand() < 0.85 ? 'http' : 'none',
      envCount: pick(4),
      labelled: rand() < 0.3,
      zone: `zone-${pick(3)}`,
    };
    components.push(component);
  }
  const bumped = [];
  if (changed) {
    // A separate stream, so the base layout is identical in both variants.
    const bumpRand = seededRandom(seed ^ 0x5bd1e995);
    const target = Math.max(1, Math.round(size * 0.01));
    const chosen = new Set();
    while (chosen.size < target) chosen.add(Math.floor(bumpRand() * size));
    for (const i of [...chosen].sort((a, b) => a - b)) {
      const c = components[i];
      const [major, minor, patch] = c.version.split('.').map(Number);
      c.version = `${major}.${minor}.${patch + 1}`;
      bumped.push(c.name);
    }
  }
  const routes = [];
  const groups = Math.ceil(size / groupSize);
  for (let r = 0; r < Math.min(routeCount, groups); r++) {
    const group = Math.floor((r * groups) / Math.min(routeCount, groups));
    routes.push({
      name: ['web', 'api', 'admin', 'search', 'checkout', 'media'][r],
      listen: `127.0.0.1:${18080 + r}`,
      to: componentName(group * groupSize, width),
      stepped: r % 2 === 0,
    });
  }
  return { name: 'bench', components, routes, bumped };
}

/** YAML in the style a person would write: block mappings, flow sequences for short lists. */
export function layoutToYaml(layout) {
  const out = [];
  out.push('# yaml-language-server: $schema=../schemas/topology.v1.json');
  out.push('apiVersion: cutover/v1');
  out.push('kind: Topology');
  out.push('metadata:');
  out.push(`  name: ${layout.name}`);
  out.push('  description: Synthetic layout for the plan benchmark');
  out.push('  labels:');
  out.push('    team: platform');
  out.push('drivers:');
  out.push('  apps:');
  out.push('    type: process');
  out.push('    stopTimeout: 5s');
  out.push('  infra:');
  out.push('    type: exec');
  out.push('    dir: ./infra');
  out.push('    timeout: 2m');
  out.push('  jobs:');
  out.push('    type: exec');
  out.push('    dir: ./jobs');
  out.push('  edge:');
  out.push('    type: router');
  out.push('components:');
  for (const c of layout.components) {
    out.push(`  ${c.name}:`);
    out.push(`    driver: ${c.driver}`);
    out.push(`    version: "${c.version}"`);
    if (c.driver === 'apps') {
      out.push('    run:');
      out.push(`      command: [node, app/server.js, --service, ${c.name}]`);
      out.push('      cwd: ./apps');
    }
    if (c.envCount > 0) {
      out.push('    env:');
      out.push('      LOG_LEVEL: info');
      if (c.envCount > 1) out.push(`      SERVICE_NAME: ${c.name}`);
      if (c.envCount > 2) out.push('      FEATURE_FLAGS: "checkout-v2,search-beta"');
    }
    if (c.replicas !== 1) out.push(`    replicas: ${c.replicas}`);
    if (c.labelled) {
      out.push('    placement:');
      out.push(`      labels: { zone: ${c.zone} }`);
    }
    if (c.dependsOn.length > 0) out.push(`    dependsOn: [${c.dependsOn.join(', ')}]`);
    if (c.healthKind === 'http') {
      out.push('    health:');
      out.push('      http: { path: /healthz, expectStatus: 200 }');
      out.push('      interval: 1s');
      out.push('      timeout: 2s');
      out.push('      successThreshold: 2');
      out.push('      deadline: 2m');
    }
    if (c.stateful) {
      out.push('    stateful: true');
      out.push('    replicate: { maxLag: 1s, timeout: 5m }');
    }
  }
  out.push('routes:');
  for (const r of layout.routes) {
    out.push(`  ${r.name}:`);
    out.push(`    listen: ${r.listen}`);
    out.push(`    to: ${r.to}`);
    out.push('    driver: edge');
    if (r.stepped) out.push('    shift: [10, 50, 100]');
    out.push('    drain: { timeout: 30s }');
  }
  out.push('strategy:');
  out.push('  bake: 30s');
  out.push('  commit: auto');
  out.push('');
  return out.join('\n');
}

/** The before and after texts of one benchmark pair, and the names bumped between them. */
export function generateTopologyPair(size, seed) {
  const before = generateLayout({ size, seed });
  const after = generateLayout({ size, seed, changed: true });
  return { before: layoutToYaml(before), after: layoutToYaml(after), bumped: after.bumped };
}
