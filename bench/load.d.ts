/** Types of bench/load.js, for the TypeScript tests that use it. */
export interface LoadRecord {
  sentAt: number;
  /** How much later than scheduled the generator sent it (ms). */
  lateMs?: number;
  /** Which wakeup of the fixed-rate timer sent it (1, 2, …): one request per wakeup. */
  wakeup?: number;
  doneAt?: number;
  ms: number;
  status: number;
  version?: string;
  slot?: string;
  error?: string;
}

export interface LoadResult {
  requests: number;
  failed: number;
  failures: LoadRecord[];
  rate: number;
  p50: number;
  p99: number;
  lateP99: number;
  lateMax: number;
  versions: Record<string, number>;
  records: LoadRecord[];
}

export interface Load {
  /** When the load started (ms since the epoch); records' sentAt count from here. */
  origin: number;
  records: LoadRecord[];
  /** The generator's process with `ownProcess` (else this one). */
  pid: number;
  stop(): Promise<LoadResult>;
}

export function startLoad(options: {
  url: string;
  rate: number;
  timeoutMs?: number;
  maxRequests?: number;
  /**
   * Requests in flight at most (256 by default); one due past it is not sent but recorded as failed
   * ('load generator saturated'). Those past 64 wait in the generator for a connection.
   */
  maxInFlight?: number;
  /** Send from a child process in its own session (its own scheduling group), not a worker thread. */
  ownProcess?: boolean;
  /**
   * Over HTTP/2: h2 by ALPN for an https URL, h2c with prior knowledge for http; streams over 4
   * sessions. An https URL without it is HTTP/1.1 over TLS. Certificates are not checked.
   */
  http2?: boolean;
}): Load;
export function summarize(records: LoadRecord[], seconds: number): LoadResult;
export function formatLoad(result: LoadResult): string;
