/**
 * Migrations as every front end prints and serves them in JSON: the same objects as the engine's,
 * with every time as an ISO 8601 string (UTC, milliseconds). The engine keeps epoch milliseconds;
 * this is the one place they become text, so the CLI's `--json` and the API cannot differ.
 * The http MigrationService reads them back (engine/services/wire-times.ts): keep the two in step.
 */
import { type ActionOutcomeEntry, actionOutcomes } from '../core/migration/action-outcomes.js';
import { figureJson, type ReplicationFigureJson } from '../core/migration/replication-lag.js';
import type { MigrationSummary } from '../core/migration/summary.js';
import type { LogLine, MigrationState } from '../core/migration/types.js';

/** `T` with its time fields (`K`) as ISO strings, null where they were null. */
type WithIsoTimes<T, K extends keyof T> = Omit<T, K> & {
  [P in K]: null extends T[P] ? string | null : string;
};

export type MigrationSummaryJson = Omit<
  WithIsoTimes<MigrationSummary, 'startedAt' | 'updatedAt' | 'committedAt' | 'endedAt'>,
  'replication'
> & { replication?: ReplicationFigureJson[] };
export type LogLineJson = WithIsoTimes<LogLine, 'at'>;
export type MigrationStateJson = Omit<
  WithIsoTimes<MigrationState, 'startedAt' | 'updatedAt' | 'committedAt' | 'endedAt'>,
  'spec'
> & { spec: WithIsoTimes<MigrationState['spec'], 'createdAt'> };

/** Epoch milliseconds as ISO 8601 (`2026-11-25T15:54:59.123Z`). */
export function isoTime(ms: number): string;
export function isoTime(ms: number | null): string | null;
export function isoTime(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function summaryJson(s: MigrationSummary): MigrationSummaryJson {
  const { replication, ...rest } = s;
  return {
    ...rest,
    ...(replication === undefined ? {} : { replication: replication.map(figureJson) }),
    startedAt: isoTime(s.startedAt),
    updatedAt: isoTime(s.updatedAt),
    committedAt: isoTime(s.committedAt),
    endedAt: isoTime(s.endedAt),
  };
}

export function stateJson(state: MigrationState): MigrationStateJson {
  return {
    ...state,
    spec: { ...state.spec, createdAt: isoTime(state.spec.createdAt) },
    startedAt: isoTime(state.startedAt),
    updatedAt: isoTime(state.updatedAt),
    committedAt: isoTime(state.committedAt),
    endedAt: isoTime(state.endedAt),
  };
}

export function logLineJson(line: LogLine): LogLineJson {
  return { ...line, at: isoTime(line.at) };
}

/**
 * `show`: the summary, the whole state, and what became of each action (done, undone, stopped,
 * failed, not run: core/migration/action-outcomes.ts), as the text of `show` marks them.
 */
export function detailJson(detail: { summary: MigrationSummary; state: MigrationState }): {
  summary: MigrationSummaryJson;
  state: MigrationStateJson;
  actions: ActionOutcomeEntry[];
} {
  return {
    summary: summaryJson(detail.summary),
    state: stateJson(detail.state),
    actions: actionOutcomes(detail.state),
  };
}

/** A page of migrations, as `list --json` prints it and `GET /v1/migrations` serves it. */
export function listJson(
  items: readonly MigrationSummary[],
  nextCursor: string | null,
): { items: MigrationSummaryJson[]; nextCursor: string | null } {
  return { items: items.map(summaryJson), nextCursor };
}
