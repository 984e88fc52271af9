/**
 * Every environment: its serial, what serves (components by slot and version, replicas healthy,
 * routes and their weights), its drift and the migration in flight. Read again every few seconds.
 */

import { useState } from 'preact/hooks';
import { time } from '../format.js';
import { ProblemLine } from '../parts/problem.js';
import { usePoll } from '../parts/use-poll.js';
import { href } from '../route.js';
import type { Session } from '../session-type.js';
import type { EnvironmentStatus, EnvironmentSummary } from '../types.js';

/**
 * How often the page asks again: each answer observes every driver, and a request per environment
 * counts against the token's rate limit (600 a minute by default), so a second more per environment.
 */
const refreshMs = 5000;
const refreshPerEnvironmentMs = 1000;

export function EnvironmentsPage({ session }: { session: Session }) {
  const [count, setCount] = useState(0);
  const { value, error } = usePoll(
    async (signal) => {
      const list = await session.client.get<{ items: EnvironmentSummary[] }>('/v1/environments', signal);
      setCount(list.items.length);
      return Promise.all(
        list.items.map((e) =>
          session.client.get<EnvironmentStatus>(
            `/v1/environments/${encodeURIComponent(e.environment)}`,
            signal,
          ),
        ),
      );
    },
    Math.max(refreshMs, refreshPerEnvironmentMs * count),
    'environments',
  );
  return (
    <>
      <h1>Environments</h1>
      <ProblemLine error={error} />
      {value === null && error === null && <p class="loading">Asking the server…</p>}
      {value?.length === 0 && (
        <p>
          No environment yet. Start one with <code>cutover topology migrate -f topology.yaml</code> (with{' '}
          <code>--server</code> naming this server).
        </p>
      )}
      {value && value.length > 0 && (
        <div class="environments">
          {value.map((status) => (
            <Environment key={status.environment} status={status} />
          ))}
        </div>
      )}
    </>
  );
}

function Environment({ status }: { status: EnvironmentStatus }) {
  const id = `env-${status.environment}`;
  return (
    <section class="card" aria-labelledby={id} data-environment={status.environment}>
      <h2 id={id}>{status.environment}</h2>
      <dl class="facts">
        <dt>Serial</dt>
        <dd data-field="serial">{status.serial}</dd>
        <dt>Committed</dt>
        <dd>{time(status.committedAt)}</dd>
        <dt>Drift</dt>
        <dd data-field="drift">
          {status.drift.length === 0
            ? 'none'
            : `${status.drift.length} difference${status.drift.length === 1 ? '' : 's'}`}
        </dd>
        <dt>In flight</dt>
        <dd data-field="migration">
          {status.migration === null ? (
            'no migration'
          ) : (
            <>
              <a href={href({ page: 'migration', id: status.migration.id })}>{status.migration.id}</a>{' '}
              {status.migration.status}
            </>
          )}
        </dd>
      </dl>
      {status.drift.length > 0 && (
        <ul class="drift">
          {status.drift.map((d) => (
            <li key={`${d.kind}:${d.name}`}>
              {d.kind} {d.name}: {d.reason}
            </li>
          ))}
        </ul>
      )}
      <table>
        <caption>Components</caption>
        <thead>
          <tr>
            <th scope="col">Component</th>
            <th scope="col">Version</th>
            <th scope="col">Slot</th>
            <th scope="col">Replicas healthy</th>
          </tr>
        </thead>
        <tbody>
          {status.components.map((c) => {
            const healthy = c.replicas.filter(
              (r) => r.state === 'running' && r.health.result !== 'failing',
            ).length;
            return (
              <tr key={`${c.name}:${c.slot}`} data-component={c.name}>
                <th scope="row">{c.name}</th>
                <td>{c.version}</td>
                <td>{c.slot}</td>
                <td data-field="healthy">
                  {healthy}/{c.replicas.length}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {status.routes.length > 0 && (
        <table>
          <caption>Routes</caption>
          <thead>
            <tr>
              <th scope="col">Route</th>
              <th scope="col">Listens on</th>
              <th scope="col">To</th>
              <th scope="col">Blue / green</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {status.routes.map((r) => (
              <tr key={r.name} data-route={r.name}>
                <th scope="row">{r.name}</th>
                <td>{r.listen}</td>
                <td>{r.to}</td>
                <td data-field="weights">
                  {r.weights.blue} % / {r.weights.green} %
                </td>
                <td>{r.state}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
