/**
 * The `cutover topology …` commands through a cutover server. Each does what its local twin does,
 * with the same output and exit codes; topology files are read here and sent as text, with their
 * path (so the server names them, and resolves their relative paths, the same way).
 */

import { CutoverError } from '../../core/errors.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { LogLine, MigrationState, Verb } from '../../core/migration/types.js';
import type { Plan } from '../../core/plan/types.js';
import type { Diagnostic } from '../../core/topology/diagnostic.js';
import { TopologyInvalidError } from '../../engine/api.js';
import { readFileAtRef } from '../../engine/sources/read-file-at-ref.js';
import { readTopologyFile } from '../../engine/sources/read-topology-file.js';
import type { Remote } from './client.js';

/** What `validate` prints, whichever engine answered. */
export type ValidateOutcome =
  | { ok: true; environment: string; components: number; routes: number }
  | { ok: false; diagnostics: Diagnostic[] };

export async function remoteValidate(remote: Remote, file: string): Promise<ValidateOutcome> {
  const topology = await readTopologyFile(file);
  try {
    const { body } = await remote.json<{ environment: string; components: number; routes: number }>(
      'POST',
      '/v1/validate',
      { topology, path: file },
    );
    return { ok: true, ...body };
  } catch (error) {
    if (error instanceof TopologyInvalidError) return { ok: false, diagnostics: error.diagnostics };
    throw error;
  }
}

export type RemoteAgainst =
  | { kind: 'recorded' }
  | { kind: 'file'; file: string }
  | { kind: 'git-ref'; ref: string };

export async function remotePlan(remote: Remote, file: string, against: RemoteAgainst): Promise<Plan> {
  const body: Record<string, unknown> = { topology: await readTopologyFile(file), path: file };
  if (against.kind === 'file') {
    body.against = await readTopologyFile(against.file);
    body.againstPath = against.file;
  } else if (against.kind === 'git-ref') {
    body.against = await readFileAtRef(file, against.ref);
    body.againstPath = `${file}@${against.ref}`;
  }
  return (await remote.json<Plan>('POST', '/v1/plan', body)).body;
}

export async function remoteApply(
  remote: Remote,
  file: string,
  planId: string,
): Promise<MigrationSummary | null> {
  const topology = await readTopologyFile(file);
  const answer = await remote.json<{ migration: MigrationSummary | null }>('POST', '/v1/apply', {
    topology,
    path: file,
    planId,
  });
  return answer.body.migration;
}

const fullId = /^mig_[0-9a-z]{26}$/;

/** Every migration the server knows, newest first. */
export async function remoteListAll(remote: Remote, environment?: string): Promise<MigrationSummary[]> {
  const out: MigrationSummary[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ limit: '100' });
    if (environment !== undefined) query.set('environment', environment);
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

/** In-flight migrations first, then history (the last 10, or all), as the local list shows them. */
export async function remoteList(
  remote: Remote,
  options: { environment?: string; all?: boolean },
): Promise<MigrationSummary[]> {
  const { listSelection } = await import('../../core/migration/summary.js');
  return listSelection(await remoteListAll(remote, options.environment), options.all === true);
}

/** A full id, from an id or a unique prefix (with or without `mig_`), as the local engine finds them. */
export async function remoteResolveId(remote: Remote, prefix: string): Promise<string> {
  const wanted = (prefix.startsWith('mig_') ? prefix : `mig_${prefix}`).toLowerCase();
  if (fullId.test(wanted)) return wanted;
  const matches = (await remoteListAll(remote)).filter((m) => m.id.startsWith(wanted));
  if (matches.length === 1) return (matches[0] as MigrationSummary).id;
  if (matches.length === 0) {
    throw new CutoverError(
      'MIGRATION_NOT_FOUND',
      `no migration ${prefix} on ${remote.base.origin} (see \`cutover topology migration list --all\`)`,
    );
  }
  const ids = matches.map((m) => m.id).slice(0, 5);
  throw new CutoverError(
    'MIGRATION_AMBIGUOUS',
    `${prefix} matches ${matches.length} migrations: ${ids.join(', ')}${matches.length > 5 ? ', …' : ''}`,
  );
}

export async function remoteShow(
  remote: Remote,
  id: string,
): Promise<{ summary: MigrationSummary; state: MigrationState }> {
  return (
    await remote.json<{ summary: MigrationSummary; state: MigrationState }>('GET', `/v1/migrations/${id}`)
  ).body;
}

/** Log lines; with `follow`, as they are written, until the migration ends. */
export async function* remoteLog(remote: Remote, id: string, follow: boolean): AsyncGenerator<LogLine> {
  if (!follow) {
    for (const line of (await remote.text(`/v1/migrations/${id}/logs`)).split('\n')) {
      if (line.trim() !== '') yield JSON.parse(line) as LogLine;
    }
    return;
  }
  for await (const event of remote.events(`/v1/migrations/${id}/logs?follow=true`)) {
    if (event.event === 'log') yield JSON.parse(event.data) as LogLine;
    if (event.event === 'end') return;
    if (event.event === 'shutdown') {
      throw new CutoverError(
        'SERVER_UNREACHABLE',
        `the cutover server at ${remote.base.origin} is shutting down`,
      );
    }
  }
}

export async function remoteVerb(
  remote: Remote,
  id: string,
  verb: Verb,
): Promise<{ summary: MigrationSummary; recovered: boolean }> {
  const answer = await remote.json<{ migration: MigrationSummary; recovered: boolean }>(
    'POST',
    `/v1/migrations/${id}/${verb}`,
  );
  return { summary: answer.body.migration, recovered: answer.body.recovered };
}

export async function remoteDown(
  remote: Remote,
  environment: string,
): Promise<{ components: string[]; routes: string[] }> {
  return (
    await remote.json<{ components: string[]; routes: string[] }>(
      'POST',
      `/v1/environments/${environment}/down`,
    )
  ).body;
}
