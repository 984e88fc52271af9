/**
 * The replication lag of a migration's switched components (issue 28, DESIGN.md 5a): the health
 * gate waits while green trails blue by more than `replicate.maxLag`. Two records of it:
 *
 * - the episode, journaled: the gate's check that finds green trailing too far reports it
 *   (`lagging` on its result: one `replication_lagging` notice and notification), the gate's
 *   action then waits for it (`wait_lag`), and that wait's end reports the lag within bounds
 *   (`replication_caught_up`). Never a journal line per poll;
 * - the figure, live: what the gate measured last, with when (ReplicationFigure), kept beside the
 *   journal by the runner and shown by `migration show`, `topology status`, the API and the
 *   router's `/metrics`. Not the record: a runner that dies leaves its last figure, marked by its
 *   time.
 */
import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { defaults } from '../topology/types.js';
import type { Command, LagReport, MigrationState } from './types.js';

/** A switched component's lag as the gate last measured it. */
export interface ReplicationFigure {
  component: string;
  /** How far green trails blue in time (ms); null when the driver cannot tell. */
  lagMs: number | null;
  /** And in bytes of the log (where the driver gives it); null when it cannot tell. */
  lagBytes: number | null;
  /** Positions, as the driver names them: what green applied, and blue's. */
  applied: string;
  source: string;
  maxLagMs: number;
  /** Epoch ms of the measure. */
  measuredAt: number;
  /** The gate waits on it: the lag is over maxLag. */
  waiting: boolean;
}

/** A figure as JSON carries it (the API, `--json`): its time as ISO 8601. */
export type ReplicationFigureJson = Omit<ReplicationFigure, 'measuredAt'> & { measuredAt: string };

export function figureJson(figure: ReplicationFigure): ReplicationFigureJson {
  return { ...figure, measuredAt: new Date(figure.measuredAt).toISOString() };
}

/** Whether a lag is within `maxLagMs`: by time when the driver tells it, else nothing left in bytes. */
export function lagWithin(lag: { lagMs: number | null; lagBytes: number | null }, maxLagMs: number): boolean {
  if (lag.lagMs !== null) return lag.lagMs <= maxLagMs;
  return lag.lagBytes === 0;
}

/** The gate's wait for a component's lag, with its bound (`replicate.timeout`). */
export function lagWaitOf(
  s: MigrationState,
  component: string,
): Omit<Extract<Command, { kind: 'wait_lag' }>, 'id'> {
  const replicate = own(s.spec.desired.components, component)?.replicate;
  return { kind: 'wait_lag', component, timeoutMs: replicate?.timeout ?? defaults.replicateTimeoutMs };
}

/** "3s, 5120 bytes": how far green trails; "an unknown amount" when the driver told neither. */
export function describeLagAmount(lag: { lagMs: number | null; lagBytes: number | null }): string {
  const parts: string[] = [];
  if (lag.lagMs !== null) parts.push(formatDuration(Math.max(0, Math.round(lag.lagMs))) || '0s');
  if (lag.lagBytes !== null) parts.push(`${lag.lagBytes} bytes`);
  return parts.length > 0 ? parts.join(', ') : 'an unknown amount';
}

export function laggingMessage(lag: LagReport, timeoutMs: number): string {
  return `replication lagging: green ${lag.component} trails blue by ${describeLagAmount(lag)}, more than maxLag ${formatDuration(lag.maxLagMs)}; the gate waits (at most replicate.timeout ${formatDuration(timeoutMs)})`;
}

export function lagCaughtUpMessage(lag: LagReport | undefined, component: string): string {
  if (!lag) return `replication caught up: green ${component} trails blue by at most maxLag`;
  return `replication caught up: green ${component} trails blue by ${describeLagAmount(lag)} (maxLag ${formatDuration(lag.maxLagMs)})`;
}

/** "db: 3s, 5120 bytes behind (maxLag 1s), measured 15:02:11; the gate waits": a figure for people. */
export function describeFigure(figure: ReplicationFigure, time: (ms: number) => string): string {
  const wait = figure.waiting ? '; the gate waits' : '';
  return `${figure.component}: green trails blue by ${describeLagAmount(figure)} (maxLag ${formatDuration(figure.maxLagMs)}), measured ${time(figure.measuredAt)}${wait}`;
}
