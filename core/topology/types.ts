import type { AnalysisSettings } from '../analysis/analysis-settings.js';
import type { NotifyEventName, Severity } from '../notify/types.js';
import type { DurationMs } from './duration.js';
import type { ComponentEnvValue, SecretRef } from './env-value.js';
import type { Hooks } from './hook-types.js';

export type { ComponentEnvValue, DependencyRef, EnvValue, SecretRef } from './env-value.js';

/**
 * The validated, normalised model of a topology file: defaults applied, durations in milliseconds,
 * `dependsOn` sorted. Two files that mean the same layout normalise to deeply equal models, which is
 * what makes plans independent of key order and spelling.
 */
export interface Topology {
  apiVersion: 'cutover/v1';
  kind: 'Topology';
  metadata: Metadata;
  drivers: Record<string, DriverSpec>;
  components: Record<string, Component>;
  routes: Record<string, Route>;
  strategy: Strategy;
  /** Notification targets by name; absent when the file has none, so older models and plans stay as they were. */
  notify?: Record<string, NotifyTarget>;
}

export interface Metadata {
  name: string;
  description?: string;
  labels: Record<string, string>;
}

export type DriverType = DriverSpec['type'];

/**
 * Every driver may name the host whose worker runs its calls (`runsOn`, Temporal mode: `cutover
 * worker --host NAME`); absent, any worker runs them. Kept only when set, so models and plans of
 * topologies without hosts stay as they were.
 */
export type DriverSpec = (
  | { type: 'process'; stopTimeout: DurationMs; address?: string }
  | { type: 'exec'; dir: string; timeout: DurationMs }
  | ContainerDriverSpec
  | PostgresDriverSpec
  | RedisDriverSpec
  | { type: 'router' }
  | { type: 'nginx'; configFile: string; reload: string[] }
  | { type: 'haproxy'; bin?: string }
  | CaddyDriverSpec
) & { runsOn?: string };

/** Routes served by Caddy, which the driver starts in the state directory (engine/drivers/caddy-*.ts). */
export interface CaddyDriverSpec {
  /** The caddy program; absent: `caddy` on the PATH (Debian's /usr/bin/caddy). */
  bin?: string;
  type: 'caddy';
}

export type ComponentDriverType = 'process' | 'exec' | 'container' | 'postgres' | 'redis';

/**
 * PostgreSQL clusters, one per slot (engine/drivers/postgres-*.ts). Fields in alphabetical order
 * (see normalize.ts); optional ones are kept only when set, and resolved where the runner runs.
 */
export interface PostgresDriverSpec {
  /** Directory of the server programs (initdb, postgres, pg_ctl); absent: Debian's, else the PATH. */
  bin?: string;
  /** The application's database, owned by `user`. */
  database: string;
  /** An SQL file run as `user` in a new cluster (a first deployment), relative to the topology file. */
  init?: string;
  /** The OS user that runs initdb and the server; absent: the runner's user, `postgres` if that is root. */
  runAs?: string;
  type: 'postgres';
  /** The application's role (LOGIN); fenced with default_transaction_read_only at a switch. */
  user: string;
}

/**
 * A redis-server per slot (engine/drivers/redis-*.ts). Fields in alphabetical order (see
 * normalize.ts); `bin` is kept only when set, and resolved where the runner runs.
 */
export interface RedisDriverSpec {
  /** The AOF's fsync policy: `everysec` (default) or `always` (fsync before each reply). */
  appendfsync: 'always' | 'everysec';
  /** Directory of redis-server; absent: the PATH (Debian's /usr/bin). */
  bin?: string;
  type: 'redis';
}

/**
 * A container engine's settings (engine/drivers/container-*.ts). Fields in alphabetical order (see
 * normalize.ts); optional ones are kept only when set. `engine` absent: chosen where the runner runs
 * (podman if on the PATH, else docker), never in the model, which must not depend on the machine.
 */
export interface ContainerDriverSpec {
  /** A containers.conf (podman's CONTAINERS_CONF), relative to the topology file. */
  config?: string;
  engine?: 'podman' | 'docker';
  /** A remote engine: ssh://, tcp:// or unix:// (CONTAINER_HOST / DOCKER_HOST). */
  host?: string;
  /** Several engines by name, instead of `host`: components are placed by their labels (placement.ts). */
  hosts?: Record<string, ContainerHost>;
  /** The network of components that name none; absent: the engine's default. */
  network?: string;
  /** The OCI runtime (podman --runtime). */
  runtime?: string;
  stopTimeout: DurationMs;
  type: 'container';
}

/** One engine of a driver's `hosts`: its connection, and the labels placement matches. */
export interface ContainerHost {
  config?: string;
  /** Absent: the local engine. */
  host?: string;
  labels: Record<string, string>;
  runtime?: string;
}

export type ImagePull = 'never' | 'missing' | 'always';

/** A published port: `container` inside, `host` on 127.0.0.1 when fixed (else free, per replica). */
export interface ContainerPort {
  container: number;
  host?: number;
}

export interface ContainerResources {
  cpus?: number;
  memory?: string;
}
export type RouteDriverType = 'router' | 'nginx' | 'haproxy' | 'caddy';
/** The driver types that serve routes, in the order messages name them. */
export const routeDriverTypes: readonly RouteDriverType[] = ['router', 'nginx', 'haproxy', 'caddy'];
export function isRouteDriverType(type: string | undefined): type is RouteDriverType {
  return (routeDriverTypes as readonly (string | undefined)[]).includes(type);
}

export interface Component {
  driver: string;
  version: string;
  run?: { command: string[]; cwd?: string };
  // Container driver fields (absent on other drivers, so their models and plans stay as they were).
  /** Image tag or `name@sha256:` digest. */
  image?: string;
  /** argv replacing the image's command. */
  command?: string[];
  ports?: ContainerPort[];
  /** `source:/path[:ro|rw]`: a host directory (starts with / or .) or a volume of the slot. */
  volumes?: string[];
  resources?: ContainerResources;
  user?: string;
  network?: string;
  /** Set (default `missing`) on every component with an image. */
  pull?: ImagePull;
  stopTimeout?: DurationMs;
  /** Values, secrets by name, and references to dependencies (resolved per call, never stored). */
  env: Record<string, ComponentEnvValue>;
  replicas: number;
  placement: { labels: Record<string, string> };
  dependsOn: string[];
  health?: Health;
  stateful: boolean;
  replicate?: Replicate;
}

/** Exactly one probe is set; the model keeps the file's shape so plan changes show familiar paths. */
export interface Health {
  http?: { path: string; expectStatus: number; bodyMatch?: string };
  tcp?: Record<string, never>;
  command?: string[];
  interval: DurationMs;
  timeout: DurationMs;
  successThreshold: number;
  failureThreshold: number;
  deadline: DurationMs;
}

export interface Replicate {
  maxLag: DurationMs;
  timeout: DurationMs;
  command?: string[];
  dataDir?: string;
  /** The switch's write hold budget (default defaults.writeHoldMs). */
  writeHold?: DurationMs;
  /** The most requests the switch holds (default defaults.maxHeld). */
  maxHeld?: number;
}

export interface Route {
  listen: string;
  to: string;
  /** Name of a router, nginx or caddy driver; undefined means the built-in router. */
  driver?: string;
  preview?: string;
  /** Percentages of traffic on green, increasing, ending at 100. */
  shift: number[];
  /**
   * The steps of `shift` that dwell, by weight ascending (`{ weight, hold, analysis }` in the file).
   * Absent when no step holds, so models, digests and plans of routes without holds stay as they were.
   */
  holds?: StepHold[];
  drain: { timeout: DurationMs };
  /**
   * Longest silence of an upstream while its answer is awaited; undefined: the route driver's
   * default (60 s). Left out rather than defaulted, so that topologies without it, their plans
   * and plan ids stay as they were.
   */
  upstreamTimeout?: DurationMs;
  /** Longest silence of a client in the middle of its request body (408 then); as upstreamTimeout, left out when not given. */
  bodyTimeout?: DurationMs;
  /** Longest wait for a free connection to an upstream whose connections are all busy (503 then); as upstreamTimeout. */
  queueTimeout?: DurationMs;
  /** TLS termination on `listen` (built-in router only); absent: plain HTTP, as before. */
  tls?: RouteTls;
  /** HTTP/2 with prior knowledge on a plain `listen` (built-in router only); left out unless true. */
  h2c?: true;
}

/**
 * A route's TLS settings. Certificate paths are kept as written (relative to the topology file);
 * the route driver resolves them, and the engine checks the files before a plan uses them.
 */
export interface RouteTls {
  certificates: { cert: string; key: string }[];
  minVersion: 'TLSv1.2' | 'TLSv1.3';
  http2: boolean;
  redirectHttp?: string;
  hsts?: { maxAge: DurationMs; includeSubDomains: boolean; preload: boolean };
}

/**
 * A shift step that dwells: `hold` long (or until `promote`, manual) before the next step. With
 * `analysis`, the hold is a measured window of the route's traffic, judged by its checks.
 * Invariant (check-topology): analysis only with a hold of a duration.
 */
export interface StepHold {
  weight: number;
  hold: DurationMs | 'manual';
  analysis?: AnalysisSettings;
}

export interface Strategy {
  bake: DurationMs;
  commit: 'auto' | 'manual';
  /**
   * How many driver calls a migration runs at once (`defaults.parallelism` when absent). Kept only
   * when the file sets it, so layouts recorded before it existed plan no settings change.
   */
  parallelism?: number;
  /**
   * How long a call placed on a host waits for a worker of that host before it fails (Temporal
   * mode); absent, the call's own bound. Kept only when the file sets it, as `parallelism`.
   */
  hostWait?: DurationMs;
  /**
   * Hooks run at fixed points of the migration (core/topology/hook-types.ts). Absent when the file
   * has none, so models, digests and plans of topologies without hooks stay as they were.
   */
  hooks?: Hooks;
}

/** A target's URL, or a secret reference when the URL is itself a credential (a Slack webhook). */
export type NotifyUrl = string | SecretRef;

/** Fields every target has; fields in alphabetical order (see normalize.ts). */
interface NotifyFilter {
  /** Only these events; absent: all. */
  events?: NotifyEventName[];
  /** Attempts after the first. */
  retries: number;
  /** The least severity sent. */
  severity: Severity;
  /** One attempt's timeout. */
  timeout: DurationMs;
}

export type NotifyTarget =
  | (NotifyFilter & { type: 'webhook'; url: NotifyUrl; signingSecret: SecretRef })
  | (NotifyFilter & { type: 'slack'; url: NotifyUrl })
  | (NotifyFilter & { type: 'command'; command: string[] });

export const defaults = {
  replicas: 1,
  processStopTimeoutMs: 10_000,
  containerStopTimeoutMs: 10_000,
  imagePull: 'missing',
  execTimeoutMs: 300_000,
  nginxReload: ['nginx', '-s', 'reload'],
  healthIntervalMs: 1_000,
  healthTimeoutMs: 2_000,
  healthSuccessThreshold: 1,
  healthFailureThreshold: 3,
  healthDeadlineMs: 120_000,
  httpExpectStatus: 200,
  replicateMaxLagMs: 1_000,
  replicateTimeoutMs: 300_000,
  /** The switch of a stateful component holds requests at most this long (then it is undone). */
  writeHoldMs: 2_000,
  /** And at most this many requests (the next ones get 503 with Retry-After). */
  maxHeld: 1_000,
  postgresDatabase: 'app',
  postgresUser: 'app',
  redisAppendfsync: 'everysec' as const,
  shift: [100],
  drainTimeoutMs: 30_000,
  bakeMs: 0,
  commit: 'auto',
  /** Driver calls a migration runs at once, like Terraform's default of 10 operations. */
  parallelism: 10,
  notifySeverity: 'info',
  notifyTimeoutMs: 5_000,
  notifyRetries: 3,
} as const;
