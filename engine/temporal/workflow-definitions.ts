/**
 * What the client and the workflows share: the workflow ids, the signals, queries and updates by
 * name and type, and the inputs and outputs of the workflows. No workflow code here, so a client
 * imports it without the workflows (each workflow is a file of its own; workflows.ts lists them
 * for the worker's bundle). Deterministic code only, like the workflows that import it.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CurrentLayout } from '../../core/layout.js';
import type {
  LogLine,
  MigrationSpec,
  MigrationState,
  ResolveHow,
  Verb,
  VerbOptions,
} from '../../core/migration/types.js';

/** A log line with its position, so that a follower asks only for what it has not seen. */
export interface SeqLine extends LogLine {
  seq: number;
}

export interface MigrationStatus {
  state: MigrationState;
  logs: SeqLine[];
}

export interface MigrationInput {
  spec: MigrationSpec;
  /**
   * Set when the workflow continued as new: where it stood. The state goes without its spec (that is
   * `spec` above): the spec holds the plan and both topologies, the bulk of the state, and carried
   * twice it doubled the largest payload of a migration (past Temporal's 2 MB limit on a payload at
   * a few hundred components). An older input with the spec inside is read the same.
   */
  resume?: {
    state: Omit<MigrationState, 'spec'> & { spec?: MigrationSpec };
    logs: SeqLine[];
    seq: number;
    /** The events applied so far (1 = the start): a notification's id carries its event's number. */
    events?: number;
  };
  /**
   * A run started to resolve undo steps left for a person of a migration that had ended (`resume`:
   * where it ended). The resolve Update comes with its start; without one within
   * `resolveWaitMs`, the run ends as the migration had.
   */
  resolving?: true;
}

/** `resolve`: which migration (the workflow id is the environment's), how, one step or all, and who. */
export interface ResolveArgs {
  migrationId: string;
  how: ResolveHow;
  step?: string;
  by?: string;
}

/** The options (`promote --full`) are a third argument, absent from callers before them. */
export const verbUpdate = defineUpdate<MigrationState, [Verb, string | undefined, VerbOptions?]>('verb');
/** Undo steps left for a person: run again or marked done (core/migration/resolve-policy.ts). */
export const resolveUpdate = defineUpdate<MigrationState, [ResolveArgs]>('resolve');
/** The state, and the kept log lines after `afterSeq` (0: all kept). */
export const statusQuery = defineQuery<MigrationStatus, [number]>('status');

/** Log lines kept in workflow state; older ones are dropped (the history has everything). */
export const keptLogLines = 1000;
/** Continue as new past this many history events (Temporal's own suggestion comes first). */
export const maxHistoryEvents = 5000;

export function environmentWorkflowId(environment: string): string {
  return `cutover-environment-${environment}`;
}

export function migrationWorkflowId(environment: string): string {
  return `cutover-migration-${environment}`;
}

export const recordLayoutSignal = defineSignal<[CurrentLayout]>('recordLayout');
export const layoutQuery = defineQuery<CurrentLayout>('layout');
/** An earlier layout, while kept (to tell a stale plan from a different one). */
export const layoutAtQuery = defineQuery<CurrentLayout | null, [number]>('layoutAt');
/**
 * How many earlier layouts an environment keeps unless told otherwise: the process that starts a
 * migration sends its CUTOVER_KEEP_LAYOUTS (keepLayoutsSignal), since a workflow cannot read the
 * environment. The same default as local mode's (engine/store/layout-store.ts).
 */
export const defaultKeptLayouts = 20;
export interface EnvironmentInput {
  environment: string;
  layout?: CurrentLayout;
  earlier?: CurrentLayout[];
  /** How many earlier layouts to keep (CUTOVER_KEEP_LAYOUTS of the last starter); default 20. */
  keep?: number;
}

/**
 * CUTOVER_KEEP_LAYOUTS of the process starting a migration (sent with every start, so the last
 * starter's setting holds): applied, like local mode's, when the next layout is recorded.
 */
export const keepLayoutsSignal = defineSignal<[number]>('keepLayouts');

export interface DownInput {
  /** The layout to take down, as the environment workflow had it when the caller asked. */
  layout: CurrentLayout;
  /** Recorded with the empty layout: a repeated signal of the same take-down changes nothing. */
  downId: string;
  fallbackBaseDir: string;
}

export interface DownOutput {
  components: string[];
  routes: string[];
  logs: LogLine[];
}

/**
 * The task queue of one host's worker (`cutover worker --host NAME` polls it beside the shared
 * one): the calls that touch that host's machine are scheduled there (core/migration/command-host.ts).
 */
export function hostQueue(taskQueue: string, host: string): string {
  return `${taskQueue}@${host}`;
}

export function observeWorkflowId(environment: string, lookId: string): string {
  return `cutover-observe-${environment}-${lookId}`;
}
