/**
 * The stateful components of a migration: each one's replication lag as its health gate last
 * measured it (`summary.replication`), and the switch under the router's write hold
 * (`state.switch`): which way, since when and within what budget requests are held, what is
 * fenced, and which slot takes the writes.
 */
import { duration, time } from '../format.js';
import type { MigrationDetail } from '../types.js';

function lag(ms: number | null, bytes: number | null): string {
  const parts = [ms === null ? null : `${ms} ms`, bytes === null ? null : `${bytes} bytes`].filter(Boolean);
  return parts.length === 0 ? 'unknown' : parts.join(', ');
}

export function Stateful({ detail, now }: { detail: MigrationDetail; now: number }) {
  const figures = detail.summary.replication ?? [];
  const sw = detail.state.switch;
  if (figures.length === 0 && sw === undefined) return null;
  return (
    <section aria-labelledby="stateful-title" class="card">
      <h2 id="stateful-title">Stateful components</h2>
      {sw && (
        <p data-field="switch">
          Switch {sw.direction === 'to_green' ? 'to green' : 'back to blue'}:{' '}
          {sw.released
            ? 'done, traffic released to the new primary'
            : `writes held since ${time(new Date(sw.heldAt).toISOString())}, ${duration(Math.max(0, sw.heldAt + sw.budgetMs - now))} of its ${duration(sw.budgetMs)} budget left`}
          {sw.fenced.length > 0 ? `; fenced: ${sw.fenced.join(', ')}` : ''}
          {Object.keys(sw.primary).length > 0
            ? `; primary: ${Object.entries(sw.primary)
                .map(([c, slot]) => `${c} ${slot}`)
                .join(', ')}`
            : ''}
        </p>
      )}
      {figures.length > 0 && (
        <table>
          <caption>Replication lag (green behind blue)</caption>
          <thead>
            <tr>
              <th scope="col">Component</th>
              <th scope="col">Lag</th>
              <th scope="col">Max lag</th>
              <th scope="col">Measured</th>
              <th scope="col">Gate</th>
            </tr>
          </thead>
          <tbody>
            {figures.map((f) => (
              <tr key={f.component}>
                <th scope="row">{f.component}</th>
                <td>{lag(f.lagMs, f.lagBytes)}</td>
                <td>{f.maxLagMs} ms</td>
                <td>{time(f.measuredAt)}</td>
                <td>{f.waiting ? 'waits for it' : 'within'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
