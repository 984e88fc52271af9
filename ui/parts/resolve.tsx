/**
 * Undo steps that kept failing and were left for a person (`state.ending.skipped`): each with its
 * error, and for an operator the two ways to resolve it (run again, or mark done by hand).
 */
import { useState } from 'preact/hooks';
import type { Client } from '../api.js';
import { ApiError } from '../api.js';
import type { MigrationDetail } from '../types.js';
import { Confirm, type Request } from './verbs.js';

export function Resolve({
  detail,
  client,
  operator,
  onDone,
}: {
  detail: MigrationDetail;
  client: Client;
  operator: boolean;
  onDone: () => void;
}) {
  const [asking, setAsking] = useState<Request | null>(null);
  const [answer, setAnswer] = useState<string | null>(null);
  const left = (detail.state.ending?.skipped ?? []).filter((s) => s.resolved === undefined);
  if (left.length === 0 && answer === null) return null;
  const id = detail.summary.id;
  const run = async (request: Request) => {
    try {
      await client.post(request.path, request.body);
      setAnswer(`${request.label}: accepted`);
    } catch (error) {
      setAnswer(
        `${request.label}: refused — ${error instanceof ApiError ? `${error.code}: ${error.detail}` : (error as Error).message}`,
      );
    }
    setAsking(null);
    onDone();
  };
  return (
    <section aria-labelledby="resolve-title" class="card">
      <h2 id="resolve-title">Left for a person</h2>
      <ul>
        {left.map((s) => (
          <li key={s.command.id}>
            <strong>{s.what}</strong> ({s.command.id}): {s.error}
            {operator && (
              <span class="buttons">
                <button
                  type="button"
                  onClick={() =>
                    setAsking({
                      label: `Run ${s.what} again`,
                      question: `Run "${s.what}" again until it succeeds?`,
                      path: `/v1/migrations/${id}/resolve`,
                      body: { how: 'retry', step: s.command.id },
                    })
                  }
                >
                  Run again
                </button>
                <button
                  type="button"
                  class="danger"
                  onClick={() =>
                    setAsking({
                      label: `Mark ${s.what} done`,
                      question: `Mark "${s.what}" as done by hand? Only say so once you have done it yourself.`,
                      path: `/v1/migrations/${id}/resolve`,
                      body: { how: 'skip', step: s.command.id },
                      danger: true,
                    })
                  }
                >
                  Mark done
                </button>
              </span>
            )}
          </li>
        ))}
      </ul>
      <p role="status">{answer ?? ''}</p>
      {asking && (
        <Confirm request={asking} busy={false} onYes={() => void run(asking)} onNo={() => setAsking(null)} />
      )}
    </section>
  );
}
