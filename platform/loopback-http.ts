/**
 * One HTTP/1.1 request to a local control endpoint (a runner, the router) or a preview listener,
 * with `node:http`. Not `fetch`: the first `fetch` of a process compiles undici's HTTP parser from
 * WebAssembly, about 30 ms of CPU on a background thread, and the CLI giving a verb, or a runner
 * starting a migration, would spend it on the same cores as the traffic being cut over, at the
 * moment it moves.
 */
import http from 'node:http';

export interface LoopbackRequest {
  method: 'GET' | 'POST';
  /** A host name or address, without brackets or port. */
  host: string;
  port: number;
  /** The path with its query. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface LoopbackAnswer {
  status: number;
  body: string;
}

/** Resolves with the status and the whole body; rejects on a socket error, the timeout or `signal`. */
export function loopbackRequest(options: LoopbackRequest): Promise<LoopbackAnswer> {
  let timer: NodeJS.Timeout | undefined;
  const exchange = new Promise<LoopbackAnswer>((resolve, reject) => {
    const headers: Record<string, string | number> = { ...options.headers };
    if (options.body !== undefined) headers['content-length'] = Buffer.byteLength(options.body);
    const request = http.request(
      {
        method: options.method,
        host: options.host,
        port: options.port,
        path: options.path,
        headers,
        agent: false,
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(options.body);
    // A deadline for the whole exchange, not the socket's idle time.
    timer = setTimeout(
      () => request.destroy(new Error(`no answer within ${options.timeoutMs / 1000} s`)),
      options.timeoutMs,
    );
  });
  return exchange.finally(() => clearTimeout(timer));
}

/** The body as JSON, or `fallback` when it is not JSON (an error page, an empty body). */
export function jsonOr<T>(body: string, fallback: T): T {
  try {
    return JSON.parse(body) as T;
  } catch {
    return fallback;
  }
}
