/**
 * The operator's verbs on a migration (pause, resume, promote, promote fully, roll back, commit,
 * cancel, resolve): each asks for confirmation in a dialog, then shows the server's answer, as it
 * came (the new status, or the problem with its reason). Which verbs a state allows is the engine's
 * own table (core/migration/verb-policy.ts); a refused one is shown disabled with the reason.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { verbTable } from '../../core/migration/verb-policy.js';
import { ApiError, type Client } from '../api.js';
import type { MigrationDetail, MigrationSummaryJson, Verb } from '../types.js';

export interface Request {
  /** Button text and the dialog's question. */
  label: string;
  question: string;
  /** Shown below the question, as preformatted text (a plan). */
  detail?: string;
  path: string;
  body?: unknown;
  danger?: boolean;
}

const questions: Record<Verb, string> = {
  pause: 'Pause at the next step boundary? Health gates and bake clocks stop until it is resumed.',
  resume: 'Resume the migration (and start a process for it if the one driving it died)?',
  promote: 'Promote to the next shift step?',
  rollback: 'Roll back? Traffic goes back to blue first, then green is removed.',
  commit: 'Commit? Blue is retired: this is the point of no return.',
  cancel: 'Cancel? It ends as a rollback does (traffic back to blue, green removed), recorded as cancelled.',
};

const labels: Record<Verb, string> = {
  pause: 'Pause',
  resume: 'Resume',
  promote: 'Promote',
  rollback: 'Roll back',
  commit: 'Commit',
  cancel: 'Cancel migration',
};

export function verbRequests(detail: MigrationDetail): { request: Request; refused: string | null }[] {
  const { id, lifecycle, runner } = detail.summary;
  const row = verbTable[lifecycle];
  const out: { request: Request; refused: string | null }[] = [];
  for (const verb of ['promote', 'pause', 'resume', 'commit', 'rollback', 'cancel'] as const) {
    // A migration whose process died is picked up by resume, whatever its state in flight.
    const refused = verb === 'resume' && runner === 'dead' ? null : row[verb];
    out.push({
      request: {
        label: labels[verb],
        question: questions[verb],
        path: `/v1/migrations/${id}/${verb}`,
        danger: verb === 'rollback' || verb === 'cancel' || verb === 'commit',
      },
      refused,
    });
    if (verb === 'promote') {
      out.push({
        request: {
          label: 'Promote fully',
          question: 'Promote straight to 100 % green, skipping the remaining steps?',
          path: `/v1/migrations/${id}/promote`,
          body: { full: true },
        },
        refused,
      });
    }
  }
  return out;
}

export function VerbBar({
  client,
  requests,
  onDone,
}: {
  client: Client;
  requests: { request: Request; refused: string | null }[];
  onDone: () => void;
}) {
  const [asking, setAsking] = useState<Request | null>(null);
  const [answer, setAnswer] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);

  const run = async (request: Request) => {
    setBusy(true);
    try {
      const reply = await client.post<{ summary: MigrationSummaryJson }>(request.path, request.body);
      setAnswer({ ok: true, text: `${request.label}: accepted — ${reply.summary.status}` });
    } catch (error) {
      const text = error instanceof ApiError ? `${error.code}: ${error.detail}` : (error as Error).message;
      setAnswer({ ok: false, text: `${request.label}: refused — ${text}` });
    } finally {
      setBusy(false);
      setAsking(null);
      onDone();
    }
  };

  return (
    <section aria-labelledby="verbs-title" class="card verbs">
      <h2 id="verbs-title">Actions</h2>
      <div class="buttons">
        {requests.map(({ request, refused }) => (
          <button
            key={request.label}
            type="button"
            class={request.danger ? 'danger' : ''}
            disabled={refused !== null || busy}
            title={refused === null ? request.question : `Not now: ${refused}`}
            data-verb={request.label}
            onClick={() => setAsking(request)}
          >
            {request.label}
          </button>
        ))}
      </div>
      <p class={`answer ${answer?.ok === false ? 'problem' : ''}`} role="status" data-field="answer">
        {answer?.text ?? ''}
      </p>
      {asking && (
        <Confirm request={asking} busy={busy} onYes={() => void run(asking)} onNo={() => setAsking(null)} />
      )}
    </section>
  );
}

export function Confirm({
  request,
  busy,
  onYes,
  onNo,
}: {
  request: Request;
  busy: boolean;
  onYes: () => void;
  onNo: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="confirm-title" onCancel={onNo} class="confirm">
      <h2 id="confirm-title">{request.label}?</h2>
      <p>{request.question}</p>
      {request.detail && (
        <pre
          class="plan-text"
          // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (WCAG 2.1.1)
          tabIndex={0}
          data-field="confirm-detail"
        >
          {request.detail}
        </pre>
      )}
      <div class="buttons">
        <button
          type="button"
          class={request.danger ? 'danger' : ''}
          disabled={busy}
          onClick={onYes}
          data-confirm="yes"
        >
          {request.label}
        </button>
        <button type="button" class="quiet" onClick={onNo} data-confirm="no">
          Keep it as it is
        </button>
      </div>
    </dialog>
  );
}
