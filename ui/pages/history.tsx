/**
 * Migrations, newest first, a page at a time (`GET /v1/migrations` with its cursor): the server
 * pages, so a history of thousands loads as fast as one of twenty. Filtered by environment and
 * state; the filters are in the address, so a filtered view can be shared.
 */
import { useState } from 'preact/hooks';
import { lifecycleText, time } from '../format.js';
import { RollbackTo } from '../parts/layout-rollback.js';
import { ProblemLine } from '../parts/problem.js';
import { usePoll } from '../parts/use-poll.js';
import { href } from '../route.js';
import type { Session } from '../session-type.js';
import type { Lifecycle, MigrationList } from '../types.js';

const pageSize = 25;

const lifecycles: Lifecycle[] = [
  'running',
  'paused',
  'awaiting_promotion',
  'awaiting_commit',
  'committing',
  'rolling_back',
  'completed',
  'rolled_back',
  'cancelled',
  'failed',
];

export function HistoryPage({
  session,
  environment,
  state,
}: {
  session: Session;
  environment: string;
  state: string;
}) {
  // The cursors of the pages before this one (the first page has none).
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const query = new URLSearchParams({ limit: String(pageSize) });
  if (environment !== '') query.set('environment', environment);
  if (state !== '') query.set('state', state);
  if (cursor !== undefined) query.set('cursor', cursor);
  const path = `/v1/migrations?${query}`;
  const { value, error } = usePoll(
    (signal) => session.client.get<MigrationList>(path, signal),
    cursor ? null : 5000,
    path,
  );
  const operator = session.who.role === 'operator';
  const filter = (next: { environment?: string; state?: string }) => {
    setCursors([]);
    location.hash = href({ page: 'history', environment, state, ...next });
  };
  return (
    <>
      <h1>History</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label for="filter-environment">Environment</label>
        <input
          id="filter-environment"
          value={environment}
          placeholder="all"
          onChange={(e) => filter({ environment: (e.target as HTMLInputElement).value.trim() })}
        />
        <label for="filter-state">State</label>
        <select
          id="filter-state"
          value={state}
          onChange={(e) => filter({ state: (e.target as HTMLSelectElement).value })}
        >
          <option value="">all</option>
          {lifecycles.map((l) => (
            <option key={l} value={l}>
              {lifecycleText(l)}
            </option>
          ))}
        </select>
      </form>
      <ProblemLine error={error} />
      {value && (
        <>
          <table class="history">
            <caption>
              {value.items.length === 0
                ? 'No migration matches.'
                : `Page ${cursors.length + 1}, newest first`}
            </caption>
            <thead>
              <tr>
                <th scope="col">Migration</th>
                <th scope="col">Environment</th>
                <th scope="col">State</th>
                <th scope="col">Started</th>
                <th scope="col">By</th>
                <th scope="col">Actions done</th>
                {operator && <th scope="col">Layout</th>}
              </tr>
            </thead>
            <tbody>
              {value.items.map((m) => (
                <tr key={m.id} data-migration={m.id}>
                  <th scope="row">
                    <a class="mono" href={href({ page: 'migration', id: m.id })}>
                      {m.id}
                    </a>
                  </th>
                  <td>{m.environment}</td>
                  <td>
                    <span class={`badge ${m.lifecycle}`}>{lifecycleText(m.lifecycle)}</span> {m.reason ?? ''}
                  </td>
                  <td>{time(m.startedAt)}</td>
                  <td>{m.startedBy ?? '—'}</td>
                  <td>
                    {m.actionsDone}/{m.actionsTotal}
                  </td>
                  {operator && (
                    <td>
                      {m.lifecycle === 'completed' && <RollbackTo client={session.client} migration={m} />}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
          <nav class="pages" aria-label="Pages of history">
            <button
              type="button"
              disabled={cursors.length === 0}
              onClick={() => setCursors(cursors.slice(0, -1))}
            >
              Newer
            </button>
            <button
              type="button"
              disabled={value.nextCursor === null}
              onClick={() => value.nextCursor && setCursors([...cursors, value.nextCursor])}
            >
              Older
            </button>
          </nav>
        </>
      )}
    </>
  );
}
