/**
 * The MigrationService of a cutover server (`--server URL`): every operation is a request to its
 * API, with the same results, errors and messages as the local engine's. Topology files are read
 * by the caller and sent as text with their path, so the server names them (and resolves their
 * relative paths) the same way.
 */
import type { EnvironmentStatus, EnvironmentSummary } from '../../core/environment-status.js';
import { CutoverError, TopologyInvalidError } from '../../core/errors.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import { isFinal, type LogLine, type MigrationState } from '../../core/migration/types.js';
import type { Plan } from '../../core/plan/types.js';
import { Remote } from './http-client.js';
import { followElsewhere, type MigrationService } from './service-types.js';

const fullId = /^mig_[0-9a-z]{26}$/;

/** `token`: sent as a bearer token (CUTOVER_TOKEN). */
export function httpService(url: string, token: string | undefined): MigrationService {
  const remote = new Remote(url, token);
  const origin = remote.base.origin;
  const runs = `on ${origin}`;
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
      const page: { items: MigrationSummary[]; nextCursor: string | null } = (
        await remote.json<{ items: MigrationSummary[]; nextCursor: string | null }>(
          'GET',
          `/v1/migrations?${query}`,
        )
      ).body;
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return out;
  }

  const service: MigrationService = {
    where: origin,
    reachAgain: ` --server ${origin}`,
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
    currentLayout: async () => {
      throw notHere('reading the recorded layout');
    },
    observe: async () => {
      throw notHere('observing what runs');
    },
    async start(request) {
      if (request.replace !== undefined && request.replace.length > 0) throw notHere('--replace');
      const answer = await remote.json<{ migration: MigrationSummary | null; planId: string }>(
        'POST',
        '/v1/apply',
        {
          topology: request.text,
          path: request.file,
          ...(request.planId === undefined ? {} : { planId: request.planId }),
        },
      );
      const { migration, planId } = answer.body;
      if (migration === null) return { created: false, planId };
      return { created: true, summary: migration, planId, runs, runnerPid: migration.runnerPid };
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
      return (
        await remote.json<{ summary: MigrationSummary; state: MigrationState }>('GET', `/v1/migrations/${id}`)
      ).body;
    },
    /** Log lines; with `follow`, as they are written (Server-Sent Events), until the migration ends. */
    async *logs(id, options) {
      if (!options.follow) {
        for (const line of (await remote.text(`/v1/migrations/${id}/logs`)).split('\n')) {
          if (line.trim() !== '') yield JSON.parse(line) as LogLine;
        }
        return;
      }
      for await (const event of remote.events(`/v1/migrations/${id}/logs?follow=true`)) {
        if (event.event === 'log') yield JSON.parse(event.data) as LogLine;
        if (event.event === 'end') return;
        if (event.event === 'shutdown') {
          throw new CutoverError('SERVER_UNREACHABLE', `the cutover server at ${origin} is shutting down`);
        }
      }
    },
    // `by`: the server records the caller its token names.
    async verb(id, verb) {
      const answer = await remote.json<{ migration: MigrationSummary; recovered: boolean }>(
        'POST',
        `/v1/migrations/${id}/${verb}`,
      );
      return { summary: answer.body.migration, recovered: answer.body.recovered };
    },
    async inFlight(environment) {
      const running = (await listAll({ environment })).find((m) => !isFinal(m.lifecycle));
      return running?.id ?? null;
    },
    async status(environment) {
      return (
        await remote.json<EnvironmentStatus>('GET', `/v1/environments/${encodeURIComponent(environment)}`)
      ).body;
    },
    async environments() {
      return (await remote.json<{ items: EnvironmentSummary[] }>('GET', '/v1/environments')).body.items;
    },
    // The server logs the take-down's lines itself.
    async down(environment) {
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
    async close() {},
  };
  return service;
}
