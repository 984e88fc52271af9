/**
 * The MigrationService of a cutover server (`--server URL`): every operation is a request to its
 * API, with the same results, errors and messages as the local engine's. Topology files are read
 * by the caller and sent as text with their path, so the server names them (and resolves their
 * relative paths) the same way.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvironmentStatus, EnvironmentSummary } from '../../core/environment-status.js';
import { CutoverError, TopologyInvalidError } from '../../core/errors.js';
import { type MigrationSummary, withResumeCommand } from '../../core/migration/summary.js';
import { isFinal, type LogLine } from '../../core/migration/types.js';
import type { SavedPlan } from '../../core/plan/saved-plan.js';
import type { Plan } from '../../core/plan/types.js';
import { Remote, StreamLostError } from './http-client.js';
import { formatRollbackTarget } from './rollback-source.js';
import {
  followElsewhere,
  type MigrationService,
  type RollbackPlan,
  type StartResult,
} from './service-types.js';
import { logLineFromWire, stateFromWire, summaryFromWire } from './wire-times.js';

/** A summary as the API serves it (times as ISO strings), before summaryFromWire. */
type WireSummary = Parameters<typeof summaryFromWire>[0];
/** A state as the API serves it, before stateFromWire. */
type WireState = Parameters<typeof stateFromWire>[0];

const fullId = /^mig_[0-9a-z]{26}$/;

/** How many times in a row a lost log stream is reconnected before following gives up. */
const streamReconnects = 5;
/** The pause before reconnecting a lost log stream. */
const streamReconnectDelayMs = 250;

/** `token`: sent as a bearer token (CUTOVER_TOKEN). */
export function httpService(url: string, token: string | undefined): MigrationService {
  const remote = new Remote(url, token);
  const origin = remote.base.origin;
  const runs = `on ${origin}`;
  const reachAgain = ` --server ${origin}`;
  /** A dead runner's migration is resumed through this server, not with the server's own options. */
  const reached = (summary: MigrationSummary): MigrationSummary =>
    withResumeCommand(summary, `cutover topology migration resume ${summary.id}${reachAgain}`);
  const notHere = (what: string) =>
    new CutoverError(
      'NOT_SUPPORTED',
      `${what} is not available through a cutover server (${origin}); run it on the server's machine`,
    );

  /** Every migration the server knows, newest first. */
  async function listAll(filter: { environment?: string; state?: string }): Promise<MigrationSummary[]> {
    const out: MigrationSummary[] = [];
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams({ limit: '100' });
      if (filter.environment !== undefined) query.set('environment', filter.environment);
      if (filter.state !== undefined) query.set('state', filter.state);
      if (cursor !== null) query.set('cursor', cursor);
      const page: { items: WireSummary[]; nextCursor: string | null } = (
        await remote.json<{ items: WireSummary[]; nextCursor: string | null }>(
          'GET',
          `/v1/migrations?${query}`,
        )
      ).body;
      out.push(...page.items.map((s) => reached(summaryFromWire(s))));
      cursor = page.nextCursor;
    } while (cursor !== null);
    return out;
  }

  /** A POST that starts a migration (or finds nothing to change), as StartResult. */
  async function startBy(route: string, body: Record<string, unknown>): Promise<StartResult> {
    const answer = await remote.json<{ summary: WireSummary | null; planId: string; notice?: string }>(
      'POST',
      route,
      body,
    );
    const { planId, notice } = answer.body;
    if (answer.body.summary === null) return { created: false, planId };
    const summary = reached(summaryFromWire(answer.body.summary));
    return {
      created: true,
      summary,
      planId,
      runs,
      runnerPid: summary.runnerPid,
      ...(typeof notice === 'string' ? { notice } : {}),
    };
  }

  const service: MigrationService = {
    where: origin,
    reachAgain,
    dashboard: new URL('/ui/', origin).href,
    lookAgainMs: 1_000, // a request
    async validate(source) {
      try {
        const { body } = await remote.json<{ environment: string; components: number; routes: number }>(
          'POST',
          '/v1/validate',
          { topology: source.text, path: source.file },
        );
        return { ok: true, environment: body.environment, components: body.components, routes: body.routes };
      } catch (error) {
        if (error instanceof TopologyInvalidError) return { ok: false, diagnostics: error.diagnostics };
        throw error;
      }
    },
    async plan(desired, against, options = {}) {
      // The server observes what runs on its machine when it plans against its record.
      if (options.refresh === false) throw notHere('planning without observing (--refresh=false)');
      if (options.replace !== undefined && options.replace.length > 0) throw notHere('--replace');
      const body: Record<string, unknown> = { topology: desired.text, path: desired.file };
      if (against.kind === 'text') {
        body.against = against.source.text;
        body.againstPath = against.source.file;
      } else if (against.kind === 'empty') {
        body.against = null;
      }
      return (await remote.json<Plan>('POST', '/v1/plan', body)).body;
    },
    // The server answers what a saved plan needs: the plan and the layout it was planned against.
    async planLive(desired, options = {}) {
      if (options.refresh === false) throw notHere('planning without observing (--refresh=false)');
      if (options.replace !== undefined && options.replace.length > 0) throw notHere('--replace');
      const body = { topology: desired.text, path: desired.file, saved: true };
      const saved = (await remote.json<SavedPlan>('POST', '/v1/plan', body)).body;
      return { plan: saved.plan, against: saved.plannedAgainst };
    },
    currentLayout: async () => {
      throw notHere('reading the recorded layout');
    },
    layoutAt: async () => {
      throw notHere('reading an earlier recorded layout');
    },
    observe: async () => {
      throw notHere('observing what runs');
    },
    // The server finds the recorded layout in its own state and resolves its paths on its machine.
    async planRollback(environment, request) {
      return (
        await remote.json<RollbackPlan>('POST', `/v1/environments/${environment}/rollback`, {
          to: formatRollbackTarget(request.to),
          dryRun: true,
        })
      ).body;
    },
    startRollback: (environment, request) =>
      startBy(`/v1/environments/${environment}/rollback`, {
        to: formatRollbackTarget(request.to),
        ...(request.planId === undefined ? {} : { planId: request.planId }),
      }),
    async start(request) {
      if (request.replace !== undefined && request.replace.length > 0) throw notHere('--replace');
      return startBy('/v1/apply', {
        topology: request.text,
        path: request.file,
        ...(request.planId === undefined ? {} : { planId: request.planId }),
        ...(request.baseSerial === undefined ? {} : { baseSerial: request.baseSerial }),
        // Who starts it is the server's to say (the token's name), never the client's.
        ...(request.commit === undefined ? {} : { commit: request.commit }),
        ...(request.parallelism === undefined ? {} : { parallelism: request.parallelism }),
      });
    },
    attach: async (id, onLine) => followElsewhere(service, id, runs, onLine),
    list: (filter) => listAll(filter),
    /** A full id, from an id or a unique prefix (with or without `mig_`), as the local engine finds them. */
    async find(prefix) {
      const wanted = (prefix.startsWith('mig_') ? prefix : `mig_${prefix}`).toLowerCase();
      if (fullId.test(wanted)) return wanted;
      const matches = (await listAll({})).filter((m) => m.id.startsWith(wanted));
      if (matches.length === 1) return (matches[0] as MigrationSummary).id;
      if (matches.length === 0) {
        throw new CutoverError(
          'MIGRATION_NOT_FOUND',
          `no migration ${prefix} on ${origin} (see \`cutover topology migration list --all\`)`,
        );
      }
      const ids = matches.map((m) => m.id).slice(0, 5);
      throw new CutoverError(
        'MIGRATION_AMBIGUOUS',
        `${prefix} matches ${matches.length} migrations: ${ids.join(', ')}${matches.length > 5 ? ', …' : ''}`,
      );
    },
    async show(id) {
      const { body } = await remote.json<{ summary: WireSummary; state: WireState }>(
        'GET',
        `/v1/migrations/${id}`,
      );
      return { summary: reached(summaryFromWire(body.summary)), state: stateFromWire(body.state) };
    },
    /** Log lines; with `follow`, as they are written (Server-Sent Events), until the migration ends. */
    // biome-ignore lint/correctness/useYield: refuses before the first event
    async *events() {
      throw notHere('following the event stream (GET /v1/events) from the CLI');
    },
    async *logs(id, options) {
      if (!options.follow) {
        for (const line of (await remote.text(`/v1/migrations/${id}/logs`)).split('\n')) {
          if (line.trim() !== '') yield logLineFromWire(JSON.parse(line) as LogLine);
        }
        return;
      }
      // A stream that ends without `end` was lost (a proxy, the network): reconnect with the last
      // event's id, and the server goes on after it; a bounded number of times in a row.
      let lastEventId: string | undefined;
      let cause = 'the stream ended';
      for (let lost = 0; ; ) {
        let delivered = false;
        try {
          for await (const event of remote.events(`/v1/migrations/${id}/logs?follow=true`, lastEventId)) {
            if (event.id !== undefined) lastEventId = event.id;
            if (event.event === 'log') {
              delivered = true;
              yield logLineFromWire(JSON.parse(event.data) as LogLine);
            }
            if (event.event === 'end') return;
            if (event.event === 'shutdown') {
              throw new CutoverError(
                'SERVER_UNREACHABLE',
                `the cutover server at ${origin} is shutting down`,
              );
            }
          }
        } catch (error) {
          // A stream cut mid-body is lost (reconnected below); a refused connection is
          // SERVER_UNREACHABLE at once.
          if (!(error instanceof StreamLostError) || options.signal?.aborted) throw error;
          cause = error.message;
        }
        if (options.signal?.aborted) return;
        lost = delivered ? 1 : lost + 1;
        if (lost > streamReconnects) {
          throw new CutoverError(
            'SERVER_UNREACHABLE',
            `the log stream of ${id} from ${origin} ended ${streamReconnects + 1} times in a row without its end (${cause}); follow it again with \`cutover topology migration logs ${id} --follow --server ${origin}\``,
          );
        }
        await sleep(streamReconnectDelayMs);
      }
    },
    // `by`: the server records the caller its token names.
    async verb(id, verb, _by, options) {
      const answer = await remote.json<{ summary: WireSummary; recovered: boolean }>(
        'POST',
        `/v1/migrations/${id}/${verb}`,
        options?.full ? { full: true } : undefined,
      );
      return { summary: reached(summaryFromWire(answer.body.summary)), recovered: answer.body.recovered };
    },
    // `by`: the server records the caller its token names.
    async resolve(id, request) {
      const answer = await remote.json<{ summary: WireSummary; state: WireState }>(
        'POST',
        `/v1/migrations/${id}/resolve`,
        request,
      );
      return {
        summary: reached(summaryFromWire(answer.body.summary)),
        state: stateFromWire(answer.body.state),
      };
    },
    async inFlight(environment) {
      const running = (await listAll({ environment })).find((m) => !isFinal(m.lifecycle));
      return running?.id ?? null;
    },
    async status(environment) {
      const status = (
        await remote.json<EnvironmentStatus>('GET', `/v1/environments/${encodeURIComponent(environment)}`)
      ).body;
      const { migration } = status;
      if (migration === null) return status;
      const resumeWith = `cutover topology migration resume ${migration.id}${reachAgain}`;
      return { ...status, migration: withResumeCommand(migration, resumeWith) };
    },
    async environments() {
      return (await remote.json<{ items: EnvironmentSummary[] }>('GET', '/v1/environments')).body.items;
    },
    // The server logs the take-down's lines itself.
    async down(environment, options) {
      if (options.volumes) throw notHere('topology down --volumes');
      return (
        await remote.json<{ components: string[]; routes: string[] }>(
          'POST',
          `/v1/environments/${environment}/down`,
        )
      ).body;
    },
    hostWorker: async () => {
      throw notHere('hosting a worker');
    },
    adoptOrphans: async () => {
      throw notHere('adopting migrations');
    },
    async close() {},
  };
  return service;
}
