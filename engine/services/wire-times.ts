/**
 * The API serves times as ISO 8601 strings (views/migration-json.ts makes them); the engine's
 * types hold epoch milliseconds. The http MigrationService reads them back here, the inverse of
 * views/migration-json.ts: keep the two in step.
 */
import type { ReplicationFigure } from '../../core/migration/replication-lag.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { LogLine, MigrationState } from '../../core/migration/types.js';

/** An ISO time (or, from a server older than the JSON contract, epoch milliseconds) as milliseconds. */
function ms(value: unknown): number;
function ms(value: unknown | null): number | null;
function ms(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return value;
  const parsed = Date.parse(String(value));
  return Number.isNaN(parsed) ? null : parsed;
}

type Wire<T> = { [K in keyof T]: unknown };

export function summaryFromWire(s: Wire<MigrationSummary>): MigrationSummary {
  const figures = Array.isArray(s.replication) ? (s.replication as Wire<ReplicationFigure>[]) : undefined;
  return {
    ...(s as MigrationSummary),
    ...(figures === undefined
      ? {}
      : {
          replication: figures.map((f) => ({
            ...(f as ReplicationFigure),
            measuredAt: ms(f.measuredAt) ?? 0,
          })),
        }),
    startedAt: ms(s.startedAt) ?? 0,
    updatedAt: ms(s.updatedAt) ?? 0,
    committedAt: ms(s.committedAt),
    endedAt: ms(s.endedAt),
  };
}

export function stateFromWire(state: Wire<MigrationState>): MigrationState {
  const spec = state.spec as Wire<MigrationState['spec']>;
  return {
    ...(state as MigrationState),
    spec: { ...(spec as MigrationState['spec']), createdAt: ms(spec.createdAt) ?? 0 },
    startedAt: ms(state.startedAt) ?? 0,
    updatedAt: ms(state.updatedAt) ?? 0,
    committedAt: ms(state.committedAt),
    endedAt: ms(state.endedAt),
  };
}

export function logLineFromWire(line: Wire<LogLine>): LogLine {
  return { ...(line as LogLine), at: ms(line.at) ?? 0 };
}
