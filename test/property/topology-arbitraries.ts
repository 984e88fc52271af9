import fc from 'fast-check';
import { stringify, type ToStringOptions } from 'yaml';
import type {
  ComponentFile,
  DriverFile,
  HealthFile,
  RouteFile,
  TopologyFile,
} from '../../core/topology/file-types.js';

/**
 * Arbitraries and builders for property tests: valid topologies, as a spec that keeps the component
 * order (so edits can keep `dependsOn` acyclic), and their YAML renderings with shuffled keys. Edits
 * are in `topology-edits.ts`, ways of breaking a file in `break-topology.ts`.
 */

/**
 * Names that are valid but tricky: YAML scalars that other types claim (`null`, `yes`, `1e3`), the
 * longest allowed.
 */
export const trickyNames = [
  'null',
  'true',
  'yes',
  'no',
  'on',
  'off',
  'y',
  'n',
  '0o7',
  '0x1f',
  '1e3',
  '123',
  '007',
  'nan',
  'inf',
  `a${'b'.repeat(61)}c`,
] as const;

/**
 * `constructor` is a valid name and a property of every JavaScript object, so `name in record` and
 * `record[name]` find it where there is no such entry. It has properties of its own, and the general
 * generators leave it out for the same reason as binary-looking names.
 */
export const prototypeNameArb: fc.Arbitrary<string> = fc.constant('constructor');

/**
 * Plain scalars such as `0b101` are strings in YAML 1.2 but binary integers in YAML 1.1. They have a
 * property of their own (see load-topology.property.test.ts), so the general generators leave them
 * out: one known problem should not mask the others.
 */
export const binaryLookingArb: fc.Arbitrary<string> = fc.stringMatching(/^0b[01]{1,8}$/);
const isBinaryLooking = (s: string) => /^[-+]?0b[01]+$/.test(s);

const plainNameArb = fc
  .stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/)
  .filter((s) => !isBinaryLooking(s));

export const nameArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: plainNameArb },
  { weight: 2, arbitrary: fc.constantFrom('api', 'db', 'web', 'cache', 'queue', 'worker', 'auth', 'search') },
  { weight: 1, arbitrary: fc.constantFrom(...trickyNames) },
);

/** Free text: printable, unicode, and now and then control characters. */
const anyTextArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      'null',
      '~',
      'true',
      '1.0',
      '0x10',
      '- a',
      'a: b',
      '#x',
      '*a',
      '&a',
      '<<',
    ),
  },
);

/**
 * YAML forbids U+FFFE, U+FFFF and lone surrogates in a stream, and the `yaml` package's stringify
 * writes them out unescaped; the loader rightly rejects such a file, so valid files leave them out.
 */
const yamlPrintable = (s: string) =>
  !/[\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

const textArb = anyTextArb.filter((s) => !isBinaryLooking(s) && yamlPrintable(s));

const nonEmptyTextArb = textArb.filter((s) => s.length > 0);

export const versionArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(fc.nat(20), fc.nat(20), fc.nat(20)).map(([a, b, c]) => `${a}.${b}.${c}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('1', '16', '1.0', '2024-01-01', '0x10', '1e3', 'yes', 'null', 'latest'),
  },
  { weight: 1, arbitrary: nonEmptyTextArb.filter((s) => [...s].length <= 128) },
);

export const durationUnitArb = fc.constantFrom('ms', 's', 'm', 'h');

/** A duration longer than zero, in the spellings the schema accepts (`500ms`, `2m`, `1m30s`). */
export const positiveDurationArb: fc.Arbitrary<string> = fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 999 }), durationUnitArb).map(([n, u]) => `${n}${u}`),
  fc.tuple(fc.integer({ min: 1, max: 59 }), fc.integer({ min: 0, max: 59 })).map(([m, s]) => `${m}m${s}s`),
);

export const durationArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: positiveDurationArb },
  { weight: 1, arbitrary: fc.constant('0s') },
);

const commandArb = fc.array(nonEmptyTextArb, { minLength: 1, maxLength: 3 });

const envNameArb = fc.oneof(
  { weight: 5, arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('PATH', 'PORT', 'LOG_LEVEL', 'constructor', 'toString', '__proto__'),
  },
);
const envArb = fc.dictionary(envNameArb, textArb, { maxKeys: 3 });

const labelKeyArb = fc.stringMatching(/^[A-Za-z0-9]([A-Za-z0-9._/-]{0,6}[A-Za-z0-9])?$/);
const labelsArb = fc.dictionary(
  labelKeyArb,
  textArb.filter((s) => [...s].length <= 256),
  { maxKeys: 3 },
);

const bodyMatchArb = fc.constantFrom('ok', '^OK$', '"status":\\s*"up"', '[a-z]+', '.*');

const healthArb: fc.Arbitrary<HealthFile> = fc
  .tuple(
    fc.oneof(
      fc
        .record(
          {
            path: fc.webPath().map((p) => `/${p.replace(/^\/+/, '')}`),
            expectStatus: fc.integer({ min: 100, max: 599 }),
            bodyMatch: bodyMatchArb,
          },
          { requiredKeys: ['path'] },
        )
        .map((http) => ({ http }) as HealthFile),
      fc.constant({ tcp: {} } as HealthFile),
      commandArb.map((command) => ({ command }) as HealthFile),
    ),
    fc.record(
      {
        interval: positiveDurationArb,
        timeout: positiveDurationArb,
        successThreshold: fc.integer({ min: 1, max: 100 }),
        failureThreshold: fc.integer({ min: 1, max: 100 }),
        deadline: positiveDurationArb,
      },
      { requiredKeys: [] },
    ),
  )
  .map(([probe, rest]) => ({ ...probe, ...rest }));

const replicateArb = fc.record(
  { maxLag: durationArb, timeout: durationArb, command: commandArb, dataDir: textArb },
  { requiredKeys: [] },
);

const runArb = fc.record({ command: commandArb, cwd: textArb }, { requiredKeys: ['command'] });

export interface ComponentSpec {
  name: string;
  body: ComponentFile;
}

export interface RouteSpec {
  name: string;
  body: RouteFile;
}

/**
 * A valid topology, with components in an order where every dependency comes before its dependents.
 * `toFile` turns it into the plain object a user would write.
 */
export interface TopologySpec {
  metadata: TopologyFile['metadata'];
  drivers: [string, DriverFile][];
  components: ComponentSpec[];
  routes: RouteSpec[];
  strategy?: NonNullable<TopologyFile['strategy']>;
}

export function toFile(spec: TopologySpec): TopologyFile {
  const file: TopologyFile = {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: spec.metadata,
    drivers: Object.fromEntries(spec.drivers),
    components: Object.fromEntries(spec.components.map((c) => [c.name, c.body])),
  };
  if (spec.routes.length > 0) file.routes = Object.fromEntries(spec.routes.map((r) => [r.name, r.body]));
  if (spec.strategy) file.strategy = spec.strategy;
  return structuredClone(file);
}

const driverBodyArb: fc.Arbitrary<DriverFile> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record(
      { type: fc.constant('process' as const), stopTimeout: durationArb },
      { requiredKeys: ['type'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      { type: fc.constant('exec' as const), dir: nonEmptyTextArb, timeout: durationArb },
      { requiredKeys: ['type', 'dir'] },
    ),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'router' as const }) },
  {
    weight: 1,
    arbitrary: fc.record(
      { type: fc.constant('nginx' as const), configFile: nonEmptyTextArb, reload: commandArb },
      { requiredKeys: ['type', 'configFile'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record(
      { type: fc.constant('caddy' as const), bin: nonEmptyTextArb },
      { requiredKeys: ['type'] },
    ),
  },
);

const componentDriverArb: fc.Arbitrary<DriverFile> = fc.oneof(
  fc.record({ type: fc.constant('process' as const), stopTimeout: durationArb }, { requiredKeys: ['type'] }),
  fc.record(
    { type: fc.constant('exec' as const), dir: nonEmptyTextArb, timeout: durationArb },
    { requiredKeys: ['type', 'dir'] },
  ),
);

/** Everything about a component except the references, which `assemble` resolves by index. */
const rawComponentArb = fc.record(
  {
    driverPick: fc.nat(),
    version: versionArb,
    run: runArb,
    env: envArb,
    replicas: fc.integer({ min: 1, max: 1000 }),
    labels: labelsArb,
    depPicks: fc.uniqueArray(fc.nat(), { maxLength: 3 }),
    health: healthArb,
    stateful: fc.boolean(),
    replicate: replicateArb,
  },
  { requiredKeys: ['driverPick', 'version', 'depPicks'] },
);
interface RawComponent {
  driverPick: number;
  version: string;
  run?: NonNullable<ComponentFile['run']>;
  env?: Record<string, string>;
  replicas?: number;
  labels?: Record<string, string>;
  depPicks: number[];
  health?: HealthFile;
  stateful?: boolean;
  replicate?: NonNullable<ComponentFile['replicate']>;
}

const rawRouteArb = fc.record(
  {
    toPick: fc.nat(),
    preview: fc.boolean(),
    driverPick: fc.option(fc.nat(), { nil: undefined }),
    shift: fc.option(fc.uniqueArray(fc.integer({ min: 1, max: 99 }), { maxLength: 5 }), { nil: undefined }),
    drain: fc.option(fc.record({ timeout: durationArb }, { requiredKeys: [] }), { nil: undefined }),
  },
  { requiredKeys: ['toPick', 'preview'] },
);
type RawRoute = {
  toPick: number;
  preview: boolean;
  driverPick?: number | undefined;
  shift?: number[] | undefined;
  drain?: { timeout?: string } | undefined;
};

/** The item at `n`, wrapping around: lets shrinkable numbers stand for references. */
export function pick<T>(items: readonly T[], n: number): T {
  return items[n % items.length] as T;
}

function buildComponent(
  raw: RawComponent,
  earlier: readonly string[],
  drivers: [string, DriverFile][],
): ComponentFile {
  const usable = drivers.filter(([, d]) => d.type === 'process' || d.type === 'exec');
  const [driverName, driver] = pick(usable, raw.driverPick);
  const body: ComponentFile = { driver: driverName, version: raw.version };
  if (raw.run) body.run = raw.run;
  else if (driver.type === 'process') body.run = { command: ['node', 'server.js'] };
  if (raw.env) body.env = raw.env;
  if (raw.replicas !== undefined) body.replicas = raw.replicas;
  if (raw.labels) body.placement = { labels: raw.labels };
  if (earlier.length > 0 && raw.depPicks.length > 0) {
    body.dependsOn = [...new Set(raw.depPicks.map((p) => pick(earlier, p)))];
  }
  if (raw.health) body.health = raw.health;
  if (raw.stateful !== undefined) body.stateful = raw.stateful;
  if (raw.replicate && raw.stateful === true) body.replicate = raw.replicate;
  return body;
}

function buildRoute(
  raw: RawRoute,
  components: readonly string[],
  drivers: [string, DriverFile][],
  ports: [number, number],
): RouteFile {
  const body: RouteFile = { listen: `127.0.0.1:${ports[0]}`, to: pick(components, raw.toPick) };
  const routers = drivers
    .filter(([, d]) => d.type === 'router' || d.type === 'nginx' || d.type === 'caddy')
    .map(([n]) => n);
  if (raw.driverPick !== undefined && routers.length > 0) body.driver = pick(routers, raw.driverPick);
  if (raw.preview) body.preview = `127.0.0.1:${ports[1]}`;
  if (raw.shift) body.shift = [...[...raw.shift].sort((a, b) => a - b), 100];
  if (raw.drain) body.drain = raw.drain;
  return body;
}

export const topologySpecArb: fc.Arbitrary<TopologySpec> = fc
  .record({
    metadata: fc.record(
      { name: nameArb, description: textArb, labels: labelsArb },
      { requiredKeys: ['name'] },
    ),
    firstDriver: fc.tuple(nameArb, componentDriverArb),
    moreDrivers: fc.array(fc.tuple(nameArb, driverBodyArb), { maxLength: 3 }),
    componentNames: fc.uniqueArray(nameArb, { minLength: 1, maxLength: 7 }),
    rawComponents: fc.array(rawComponentArb, { minLength: 7, maxLength: 7 }),
    routeNames: fc.uniqueArray(nameArb, { maxLength: 4 }),
    rawRoutes: fc.array(rawRouteArb, { minLength: 4, maxLength: 4 }),
    ports: fc.uniqueArray(fc.integer({ min: 1, max: 65535 }), { minLength: 8, maxLength: 8 }),
    strategy: fc.option(
      fc.record(
        { bake: durationArb, commit: fc.constantFrom('auto' as const, 'manual' as const) },
        { requiredKeys: [] },
      ),
      { nil: undefined },
    ),
  })
  .map((r) => {
    const drivers = new Map<string, DriverFile>([r.firstDriver]);
    for (const [name, body] of r.moreDrivers) if (!drivers.has(name)) drivers.set(name, body);
    const driverList = [...drivers];
    const components: ComponentSpec[] = r.componentNames.map((name, i) => ({
      name,
      body: buildComponent(r.rawComponents[i] as RawComponent, r.componentNames.slice(0, i), driverList),
    }));
    const routes: RouteSpec[] = r.routeNames.map((name, i) => ({
      name,
      body: buildRoute(r.rawRoutes[i] as RawRoute, r.componentNames, driverList, [
        r.ports[2 * i] as number,
        r.ports[2 * i + 1] as number,
      ]),
    }));
    const spec: TopologySpec = { metadata: r.metadata, drivers: driverList, components, routes };
    if (r.strategy) spec.strategy = r.strategy;
    return spec;
  });

/** A small seeded generator (mulberry32), so a shuffle is reproducible from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Arrays whose order means nothing; every other array keeps its order (commands, shift steps). */
const setLikeKeys = new Set(['dependsOn']);

/** A deep copy with the keys of every object, and set-like arrays, in a random order. */
export function shuffleKeys<T>(value: T, seed: number): T {
  const random = seededRandom(seed);
  const walk = (v: unknown, key: string | undefined): unknown => {
    if (Array.isArray(v)) {
      const items = v.map((item) => walk(item, undefined));
      return key !== undefined && setLikeKeys.has(key) ? shuffled(items, random) : items;
    }
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const k of shuffled(Object.keys(v), random)) {
        // defineProperty: a key named __proto__ must stay an own key.
        Object.defineProperty(out, k, {
          value: walk((v as Record<string, unknown>)[k], k),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    return v;
  };
  return walk(value, undefined) as T;
}

export type YamlStyle = Pick<
  ToStringOptions,
  'indent' | 'collectionStyle' | 'defaultStringType' | 'lineWidth'
>;

export const yamlStyleArb: fc.Arbitrary<YamlStyle> = fc.record({
  indent: fc.constantFrom(2, 4),
  collectionStyle: fc.constantFrom('any' as const, 'block' as const, 'flow' as const),
  defaultStringType: fc.constantFrom('PLAIN' as const, 'QUOTE_DOUBLE' as const, 'QUOTE_SINGLE' as const),
  lineWidth: fc.constantFrom(0, 40, 80),
});

export function toYaml(value: unknown, style: YamlStyle = {}): string {
  return stringify(value, { ...style, aliasDuplicateObjects: false }) ?? '';
}
