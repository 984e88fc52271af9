/**
 * A session with Temporal for the migration operations: the connection and client (checked for
 * cutover's search attributes when opened), every call with a deadline and an error that says what
 * to check, and whether a worker polls the task queue.
 */
import { Client, Connection } from '@temporalio/client';
import { CutoverError } from '../../core/errors.js';
import {
  connectionOptions,
  connectTimeoutMs,
  isNamespaceNotFound,
  noNamespace,
  probe,
  type TemporalSettings,
  unreachable,
  withDeadline,
} from './connection.js';
import { dataConverter } from './payload-codec.js';
import { requireSearchAttributes } from './search-attributes.js';
import { hostQueue } from './workflow-definitions.js';

/** Every call has a deadline; a query needs a worker, and none may be running. */
export const callTimeoutMs = 15_000;

/** temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW (the proto package is not a dependency of ours). */
const taskQueueTypeWorkflow = 1;
/** …TASK_QUEUE_TYPE_ACTIVITY: a host's queue has activity pollers only. */
const taskQueueTypeActivity = 2;
/** A poller not seen for this long is gone: a live one polls again within about a minute. */
export const stalePollerMs = 90_000;

export class TemporalSession {
  private pollersSeenUntil = 0;

  private constructor(
    readonly settings: TemporalSettings,
    private readonly connection: Connection,
    readonly client: Client,
  ) {}

  static async connect(settings: TemporalSettings): Promise<TemporalSession> {
    let connection: Connection;
    try {
      await probe(settings);
      connection = await withDeadline(
        Connection.connect({ ...connectionOptions(settings), connectTimeout: connectTimeoutMs }),
        connectTimeoutMs + 1000,
      );
    } catch (error) {
      throw unreachable(settings, error);
    }
    try {
      await requireSearchAttributes(connection.operatorService, settings);
    } catch (error) {
      // An open connection would keep the process alive after the error is reported.
      await connection.close().catch(() => undefined);
      throw error;
    }
    const client = new Client({ connection, namespace: settings.namespace, dataConverter });
    return new TemporalSession(settings, connection, client);
  }

  async close(): Promise<void> {
    await this.connection.close();
  }

  /** Runs a call with a deadline; a missing answer says what to check. */
  async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      // The gRPC deadline ends the call itself (a query nobody answers would otherwise keep the
      // process alive after the error); the outer one also bounds what is not a gRPC call.
      return await withDeadline(
        this.connection.withDeadline(Date.now() + callTimeoutMs, fn),
        callTimeoutMs + 1_000,
      );
    } catch (error) {
      if (error instanceof CutoverError) throw error;
      if (isNamespaceNotFound(error)) throw noNamespace(this.settings);
      // The client's ServiceError says only "Failed to query Workflow"; the gRPC status is its cause.
      const message = causeChain(error);
      // A query the service could not have answered (the workflow exists: else WorkflowNotFound):
      // a worker killed stays listed as a poller for a while, and the service answers with the
      // deadline, 'no poller seen', or a sticky queue's failure, depending on when it is asked.
      if (/no poller seen|worker may be down|Failed to query Workflow/.test(message))
        throw this.deadWorker(what);
      if (/no answer within|UNAVAILABLE|DEADLINE_EXCEEDED|ECONNREFUSED/.test(message)) {
        if (/update/i.test(message)) throw this.deadWorker(what);
        throw new CutoverError(
          'TEMPORAL_UNREACHABLE',
          `Temporal at WORKFLOW_HOST=${this.settings.address} did not answer ${what}: ${message.split('\n')[0]} (is a worker running? \`cutover worker\`)`,
        );
      }
      throw error;
    }
  }

  /**
   * Whether a worker polls the task queue: queries and updates need one, and without one they would
   * wait the whole call deadline. A positive answer is kept for a while (follows poll often).
   */
  async workerPolls(): Promise<boolean> {
    if (Date.now() < this.pollersSeenUntil) return true;
    const response = await this.call('for the workers of the task queue', () =>
      this.client.workflowService.describeTaskQueue({
        namespace: this.settings.namespace,
        taskQueue: { name: this.settings.taskQueue },
        taskQueueType: taskQueueTypeWorkflow,
      }),
    );
    const polls = (response.pollers ?? []).length > 0;
    if (polls) this.pollersSeenUntil = Date.now() + 10_000;
    return polls;
  }

  /**
   * Whether a worker polls `host`'s queue (hostQueue) now, and when one last did. A live worker's
   * long poll is renewed at least every minute; a poller last seen longer ago than
   * `stalePollerMs` is one that died (Temporal lists it for a few minutes more).
   */
  async hostPollers(host: string): Promise<{ polled: boolean; lastSeen: number | null }> {
    const response = await this.call(`for the workers of host ${host}`, () =>
      this.client.workflowService.describeTaskQueue({
        namespace: this.settings.namespace,
        taskQueue: { name: hostQueue(this.settings.taskQueue, host) },
        taskQueueType: taskQueueTypeActivity,
      }),
    );
    let lastSeen: number | null = null;
    let polled = false;
    for (const poller of response.pollers ?? []) {
      const seconds = poller.lastAccessTime?.seconds;
      if (seconds === undefined || seconds === null) {
        polled = true;
        continue;
      }
      const at = Number(seconds.toString()) * 1000 + Math.floor((poller.lastAccessTime?.nanos ?? 0) / 1e6);
      if (Date.now() - at < stalePollerMs) polled = true;
      lastSeen = lastSeen === null ? at : Math.max(lastSeen, at);
    }
    return { polled, lastSeen };
  }

  /** Of `hosts`, those no worker polls now (hostPollers). */
  async absentHosts(hosts: readonly string[]): Promise<string[]> {
    const seen = await Promise.all(hosts.map((host) => this.hostPollers(host)));
    return hosts.filter((_, i) => !seen[i]?.polled);
  }

  /** A query or update no worker answered although one is listed as polling (it died since). */
  deadWorker(what: string): CutoverError {
    return new CutoverError(
      'RUNNER_UNREACHABLE',
      `no cutover worker answered ${what} on task queue "${this.settings.taskQueue}" at WORKFLOW_HOST=${this.settings.address} (one that died stays listed as polling for a minute or so): start one with \`cutover worker\` (or \`cutover server\` without --no-worker), with the same TEMPORAL_TASK_QUEUE`,
    );
  }

  /** What a migration started with no worker polling waits for, said once to whoever follows it. */
  queued(): string {
    return `queued: no cutover worker polls task queue "${this.settings.taskQueue}" at WORKFLOW_HOST=${this.settings.address}; the migration starts when one does (start one with \`cutover worker\`, or \`cutover server\` without --no-worker, with the same TEMPORAL_TASK_QUEUE)`;
  }

  noWorker(what: string): CutoverError {
    return new CutoverError(
      'RUNNER_UNREACHABLE',
      `no cutover worker polls task queue "${this.settings.taskQueue}" at WORKFLOW_HOST=${this.settings.address}, and ${what} needs one: start one with \`cutover worker\` (or \`cutover server\` without --no-worker), with the same TEMPORAL_TASK_QUEUE`,
    );
  }
}

/** An error's message and its causes' (a gRPC status under a client's ServiceError), one line each. */
function causeChain(error: unknown): string {
  const parts: string[] = [];
  let at: unknown = error;
  for (let depth = 0; at !== undefined && at !== null && depth < 5; depth += 1) {
    parts.push(at instanceof Error ? `${at.name}: ${at.message}` : String(at));
    at = at instanceof Error ? at.cause : undefined;
  }
  return parts.join('\n');
}
