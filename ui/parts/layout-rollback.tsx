/**
 * `rollback --to` from the history: go back to the layout a completed migration committed. The plan
 * is asked first (a dry run, nothing started) and shown in the confirmation; confirming starts the
 * migration back with that plan's id, so a layout that moved meanwhile is refused, not surprised.
 */
import { useState } from 'preact/hooks';
import { renderPlanText } from '../../views/render-plan-text.js';
import { plainStyle } from '../../views/style.js';
import { ApiError, type Client } from '../api.js';
import { href } from '../route.js';
import type { MigrationSummaryJson, Plan } from '../types.js';
import { Confirm, type Request } from './verbs.js';

interface DryRun {
  plan: Plan;
  target: { serial: number; migrationId?: string };
  currentSerial: number;
}

function problemText(error: unknown): string {
  return error instanceof ApiError ? `${error.code}: ${error.detail}` : (error as Error).message;
}

export function RollbackTo({ client, migration }: { client: Client; migration: MigrationSummaryJson }) {
  const [asking, setAsking] = useState<Request | null>(null);
  const [answer, setAnswer] = useState<string | null>(null);
  const path = `/v1/environments/${encodeURIComponent(migration.environment)}/rollback`;

  const plan = async () => {
    setAnswer(null);
    try {
      const dry = await client.post<DryRun>(path, { to: migration.id, dryRun: true });
      setAsking({
        label: `Go back to serial ${dry.target.serial}`,
        question: `Environment ${migration.environment} is at serial ${dry.currentSerial}. Go back to serial ${dry.target.serial}, the layout ${migration.id} committed, as a new green-blue migration with this plan?`,
        detail: renderPlanText(dry.plan, { style: plainStyle }),
        path,
        body: { to: migration.id, planId: dry.plan.planId },
        danger: true,
      });
    } catch (error) {
      setAnswer(`Go back: refused — ${problemText(error)}`);
    }
  };

  const run = async (request: Request) => {
    try {
      const started = await client.post<{ summary: MigrationSummaryJson | null }>(request.path, request.body);
      setAsking(null);
      if (started.summary === null) setAnswer('Go back: nothing to change, the layout is already that one');
      else location.hash = href({ page: 'migration', id: started.summary.id });
    } catch (error) {
      setAsking(null);
      setAnswer(`Go back: refused — ${problemText(error)}`);
    }
  };

  return (
    <>
      <button type="button" class="quiet" data-rollback-to={migration.id} onClick={() => void plan()}>
        Go back to this layout
      </button>
      {answer && (
        <span class="problem" role="status">
          {' '}
          {answer}
        </span>
      )}
      {asking && (
        <Confirm request={asking} busy={false} onYes={() => void run(asking)} onNo={() => setAsking(null)} />
      )}
    </>
  );
}
