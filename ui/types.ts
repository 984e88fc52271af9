/**
 * The API's payloads as the dashboard reads them: the same types the server serves (views/ and
 * core/ name them), imported as types only, so a field renamed there fails the dashboard's check.
 */
export type { EnvironmentStatus, EnvironmentSummary } from '../core/environment-status.js';
export type { ActionOutcome, ActionOutcomeEntry } from '../core/migration/action-outcomes.js';
export type { AnalysisRecord, Command, Lifecycle, Verb } from '../core/migration/types.js';
export type { Action, Plan } from '../core/plan/types.js';
export type { LogLineJson, MigrationStateJson, MigrationSummaryJson } from '../views/migration-json.js';

import type { ActionOutcomeEntry } from '../core/migration/action-outcomes.js';
import type { MigrationStateJson, MigrationSummaryJson } from '../views/migration-json.js';

export interface MigrationDetail {
  summary: MigrationSummaryJson;
  state: MigrationStateJson;
  actions: ActionOutcomeEntry[];
}

export interface MigrationList {
  items: MigrationSummaryJson[];
  nextCursor: string | null;
}

export interface Whoami {
  name: string;
  role: 'viewer' | 'operator';
  auth: boolean;
}
