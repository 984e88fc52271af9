import type { HooksFile } from './hook-types.js';

/** The shape of a topology file once it passed the JSON Schema: optional fields, durations as text. */
export interface TopologyFile {
  apiVersion: 'cutover/v1';
  kind: 'Topology';
  metadata: { name: string; description?: string; labels?: Record<string, string> };
  drivers?: Record<string, DriverFile>;
  components: Record<string, ComponentFile>;
  routes?: Record<string, RouteFile>;
  strategy?: {
    bake?: string;
    commit?: 'auto' | 'manual';
    parallelism?: number;
    hostWait?: string;
    hooks?: HooksFile;
  };
  notify?: Record<string, NotifyTargetFile>;
}

interface NotifyFilterFile {
  severity?: 'info' | 'warning' | 'error';
  events?: string[];
  timeout?: string;
  retries?: number;
}

type UrlFile = string | { secret: string };

export type NotifyTargetFile =
  | (NotifyFilterFile & { type: 'webhook'; url: UrlFile; signingSecret: { secret: string } })
  | (NotifyFilterFile & { type: 'slack'; url: UrlFile })
  | (NotifyFilterFile & { type: 'command'; command: string[] });

export type DriverFile = (
  | { type: 'process'; stopTimeout?: string; address?: string }
  | { type: 'exec'; dir: string; timeout?: string }
  | {
      type: 'container';
      engine?: 'podman' | 'docker';
      host?: string;
      runtime?: string;
      config?: string;
      network?: string;
      stopTimeout?: string;
      hosts?: Record<
        string,
        { host?: string; runtime?: string; config?: string; labels?: Record<string, string> }
      >;
    }
  | { type: 'postgres'; bin?: string; database?: string; init?: string; runAs?: string; user?: string }
  | { type: 'redis'; appendfsync?: 'always' | 'everysec'; bin?: string }
  | { type: 'router' }
  | { type: 'nginx'; configFile: string; reload?: string[] }
  | { type: 'haproxy'; bin?: string }
  | { type: 'caddy'; bin?: string }
) & { runsOn?: string };

export interface ComponentFile {
  driver: string;
  version: string;
  run?: { command: string[]; cwd?: string };
  image?: string;
  command?: string[];
  ports?: { container: number; host?: number }[];
  volumes?: string[];
  resources?: { cpus?: number; memory?: string };
  user?: string;
  network?: string;
  pull?: 'never' | 'missing' | 'always';
  stopTimeout?: string;
  env?: Record<string, string | { secret: string } | { ref: string; format?: string }>;
  replicas?: number;
  placement?: { labels?: Record<string, string> };
  dependsOn?: string[];
  health?: HealthFile;
  stateful?: boolean;
  replicate?: {
    maxLag?: string;
    timeout?: string;
    command?: string[];
    dataDir?: string;
    writeHold?: string;
    maxHeld?: number;
  };
}

export interface HealthFile {
  http?: { path: string; expectStatus?: number; bodyMatch?: string };
  tcp?: Record<string, never>;
  command?: string[];
  interval?: string;
  timeout?: string;
  successThreshold?: number;
  failureThreshold?: number;
  deadline?: string;
}

export interface RouteFile {
  listen: string;
  to: string;
  driver?: string;
  preview?: string;
  shift?: (number | ShiftStepFile)[];
  drain?: { timeout?: string };
  upstreamTimeout?: string;
  bodyTimeout?: string;
  queueTimeout?: string;
  tls?: RouteTlsFile;
  h2c?: boolean;
}

export interface RouteTlsFile {
  certificates: { cert: string; key: string }[];
  minVersion?: 'TLSv1.2' | 'TLSv1.3';
  http2?: boolean;
  redirectHttp?: string;
  hsts?: { maxAge: string; includeSubDomains?: boolean; preload?: boolean };
}

/** A shift step written as an object: its weight, and how it dwells. */
export interface ShiftStepFile {
  weight: number;
  hold?: string;
  analysis?: unknown;
}

/** The weight of a shift step as written (a number, or an object's `weight`). */
export function stepWeight(step: number | ShiftStepFile): number {
  return typeof step === 'number' ? step : step.weight;
}
