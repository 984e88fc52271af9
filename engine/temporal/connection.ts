/**
 * Temporal mode's settings, from the environment: `WORKFLOW_HOST=host:port` switches it on;
 * `TEMPORAL_NAMESPACE` (default `default`), `TEMPORAL_TASK_QUEUE` (default `cutover`), TLS with
 * `TEMPORAL_TLS_CERT`/`TEMPORAL_TLS_KEY` (client certificate files) and `TEMPORAL_TLS_CA`, or
 * `TEMPORAL_API_KEY` (TLS on). Every connection has a deadline: an unreachable Temporal is one clear
 * error naming WORKFLOW_HOST, never a hang.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { CutoverError } from '../../core/errors.js';
import { type HostPort, parseHostPort } from '../../core/host-port.js';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  tls?: { clientCertPair?: { crt: Buffer; key: Buffer }; serverRootCACertificate?: Buffer } | true;
  apiKey?: string;
}

export function temporalSettings(env: NodeJS.ProcessEnv = process.env): TemporalSettings | null {
  const address = env.WORKFLOW_HOST?.trim();
  if (!address) return null;
  const settings: TemporalSettings = {
    address,
    namespace: env.TEMPORAL_NAMESPACE || 'default',
    taskQueue: env.TEMPORAL_TASK_QUEUE || 'cutover',
  };
  const read = (name: string): Buffer | undefined => {
    const file = env[name];
    if (!file) return undefined;
    try {
      return readFileSync(file);
    } catch (error) {
      throw new CutoverError('USAGE', `${name}=${file}: ${(error as Error).message}`);
    }
  };
  const crt = read('TEMPORAL_TLS_CERT');
  const key = read('TEMPORAL_TLS_KEY');
  const ca = read('TEMPORAL_TLS_CA');
  if (crt || key || ca) {
    if ((crt && !key) || (key && !crt)) {
      throw new CutoverError('USAGE', 'TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together');
    }
    settings.tls = {
      ...(crt && key ? { clientCertPair: { crt, key } } : {}),
      ...(ca ? { serverRootCACertificate: ca } : {}),
    };
  }
  if (env.TEMPORAL_API_KEY) {
    settings.apiKey = env.TEMPORAL_API_KEY;
    settings.tls ??= true;
  }
  return settings;
}

/** How long a connection to Temporal may take before it is reported unreachable. */
export const connectTimeoutMs = 5_000;

/** Address, TLS and API key for Connection.connect and NativeConnection.connect alike. */
export function connectionOptions(settings: TemporalSettings): {
  address: string;
  tls?: TemporalSettings['tls'];
  apiKey?: string;
} {
  return {
    address: settings.address,
    ...(settings.tls ? { tls: settings.tls } : {}),
    ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
  };
}

export function unreachable(settings: TemporalSettings, error: unknown): CutoverError {
  if (isNamespaceNotFound(error)) return noNamespace(settings);
  // The first line, without the gRPC status dump the native client appends.
  const reason = ((error as Error)?.message ?? String(error)).split('\n')[0]?.split(': Status {')[0];
  return new CutoverError(
    'TEMPORAL_UNREACHABLE',
    `cannot reach Temporal at WORKFLOW_HOST=${settings.address} (namespace ${settings.namespace}): ${reason}`,
  );
}

/** The SDKs' ways of saying the namespace does not exist (the client's error, the native worker's). */
export function isNamespaceNotFound(error: unknown): boolean {
  const e = error as Error | undefined;
  return (
    e?.name === 'NamespaceNotFoundError' || /Namespace \S+ (is|was) not found/.test(String(e?.message ?? ''))
  );
}

export function noNamespace(settings: TemporalSettings): CutoverError {
  return new CutoverError(
    'TEMPORAL_UNREACHABLE',
    `Temporal at WORKFLOW_HOST=${settings.address} has no namespace ${settings.namespace} (TEMPORAL_NAMESPACE)`,
  );
}

/**
 * Opens a TCP connection to WORKFLOW_HOST and closes it: a refused connection or an unknown host is
 * reported at once, instead of after the SDKs' connection deadline (they retry until it). Skipped
 * behind a proxy (gRPC honours the proxy variables; a direct connection may rightly fail there).
 */
export function probe(settings: TemporalSettings, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const proxied = ['grpc_proxy', 'https_proxy', 'http_proxy'].some(
    (name) => env[name] || env[name.toUpperCase()],
  );
  const target = hostAndPort(settings.address);
  if (proxied || !target) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const socket = connect(target);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${connectTimeoutMs / 1000} s`));
    }, connectTimeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** Temporal's frontend port, when WORKFLOW_HOST names none. */
const temporalDefaultPort = 7233;

/** `host:port` or `[v6]:port`, or a bare host (Temporal's default port); null for anything else. */
function hostAndPort(address: string): HostPort | null {
  return parseHostPort(address) ?? parseHostPort(`${address}:${temporalDefaultPort}`);
}

/** Rejects when `promise` has not settled within `ms`. */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
