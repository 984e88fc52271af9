/**
 * The activities of the migration workflow: one driver call each, through the same
 * `executeCommand` as the local runner. A call heartbeats while it runs, so a worker that dies is
 * noticed and the call goes to another worker (drivers are idempotent); a cancelled call (a pause
 * or rollback interrupting a health gate) stops its driver before the workflow moves on.
 */
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { CurrentLayout } from '../../core/layout.js';
import type { Command, LogLine, MigrationState } from '../../core/migration/types.js';
import type { ObservedLayout } from '../../core/observed.js';
import { stopRouterIfIdle } from '../drivers/router-driver.js';
import { observeLayout } from '../observe/observe-layout.js';
import { processRedactor } from '../redact/process-redactor.js';
import { type CommandResult, type DriverSet, executeCommand } from '../runner/execute-command.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { type DownPart, takeDownPart } from '../services/down.js';
import type { StateDir } from '../store/state-dir.js';
import { type DeliverInput, deliverNotification } from './notify-activity.js';

export interface ActivityDeps {
  /** The worker's state directory: where drivers keep their local records (process slots, routes). */
  stateDir: StateDir;
  drivers: DriverSet;
  /** The worker's secrets (decided where it starts). */
  secrets: ProcessSecrets;
}

export interface CommandOutcome {
  result: CommandResult;
  /** What the driver said while it ran, for the migration's log. */
  lines: LogLine[];
}

export interface DownPartInput {
  /** The layout, with only the part's own route or component and slot (see downWorkflow). */
  layout: CurrentLayout;
  part: DownPart;
  /** The topology file's directory on the caller's side, when the layout records none. */
  fallbackBaseDir: string;
}

export interface ObserveInput {
  /** The recorded layout, as the environment workflow keeps it. */
  layout: CurrentLayout;
  /** Where relative paths resolve when the layout records no directory; default beside the worker's state directory. */
  fallbackBaseDir?: string;
}

export interface CutoverActivities {
  runCommand(state: MigrationState, command: Command): Promise<CommandOutcome>;
  /** `topology down`: removes one route or retires one live slot; returns the driver's lines. */
  takeDownPart(input: DownPartInput): Promise<LogLine[]>;
  /** `topology down`, last: stops this worker's router if no route of any environment is left. */
  stopRouterIfIdle(): Promise<LogLine[]>;
  /**
   * What runs of the layout, as this worker's drivers see it (its state directory holds the slots'
   * and the router's records). Reads only; each driver call is bounded (observe-layout.ts).
   */
  observeLayout(input: ObserveInput): Promise<ObservedLayout>;
  /** One notification to one target (notify-activity.ts); returns the result's log line. */
  deliverNotification(input: DeliverInput): Promise<LogLine[]>;
}

/** Often enough that a cancellation (pause, rollback) reaches a running call within about a second. */
const heartbeatEveryMs = 1_000;

export function createActivities(deps: ActivityDeps): CutoverActivities {
  return {
    async runCommand(state, command) {
      const context = Context.current();
      const lines: LogLine[] = [];
      if (context.info.attempt > 1) {
        lines.push({
          at: Date.now(),
          level: 'warn',
          kind: 'driver',
          message: `${command.kind} is run again (attempt ${context.info.attempt}): the worker that ran it stopped answering`,
        });
      }
      const beat = setInterval(() => context.heartbeat(), heartbeatEveryMs);
      try {
        const result = await executeCommand(state, command, {
          stateDir: deps.stateDir,
          drivers: deps.drivers,
          secrets: deps.secrets,
          signal: context.cancellationSignal,
          log: (message) => lines.push({ at: Date.now(), level: 'info', kind: 'driver', message }),
        });
        // What goes into the workflow's history (its journal), masked as the local runner's
        // journal is: a replica's or a hook's output may hold a secret this worker gave it.
        return processRedactor(deps.secrets.env).value({ result, lines });
      } finally {
        clearInterval(beat);
      }
    },
    async takeDownPart(input) {
      const context = Context.current();
      const lines: LogLine[] = [];
      const log = (message: string) => lines.push({ at: Date.now(), level: 'info', kind: 'driver', message });
      const beat = setInterval(() => context.heartbeat(), heartbeatEveryMs);
      try {
        await takeDownPart({
          stateDir: deps.stateDir,
          layout: input.layout,
          part: input.part,
          drivers: deps.drivers,
          fallbackBaseDir: input.fallbackBaseDir,
          call: { signal: context.cancellationSignal, log },
          secrets: deps.secrets,
        });
        return lines;
      } finally {
        clearInterval(beat);
      }
    },
    async observeLayout(input) {
      const context = Context.current();
      const beat = setInterval(() => context.heartbeat(), heartbeatEveryMs);
      try {
        return await observeLayout(deps.stateDir, input.layout, {
          drivers: deps.drivers,
          fallbackBaseDir: input.fallbackBaseDir ?? path.dirname(deps.stateDir.root),
          signal: context.cancellationSignal,
        });
      } finally {
        clearInterval(beat);
      }
    },
    deliverNotification: (input) => deliverNotification(input, deps.secrets),
    async stopRouterIfIdle() {
      const lines: LogLine[] = [];
      await stopRouterIfIdle(deps.stateDir, (message) =>
        lines.push({ at: Date.now(), level: 'info', kind: 'driver', message }),
      );
      return lines;
    },
  };
}
