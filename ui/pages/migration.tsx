/**
 * One migration, live: its state (GET /v1/migrations/{id}) read again whenever its log (followed
 * as Server-Sent Events) gets a line, so a step shows as soon as the engine writes it; the stages
 * as waves, what it waits for, the route weights, the analyses, the actions and the log.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { lifecycleText, time } from '../format.js';
import { Analyses } from '../parts/analyses.js';
import { HoldPanel } from '../parts/hold.js';
import { LogView } from '../parts/log-view.js';
import { ProblemLine } from '../parts/problem.js';
import { Resolve } from '../parts/resolve.js';
import { Stages } from '../parts/stages.js';
import { Stateful } from '../parts/stateful.js';
import { usePoll } from '../parts/use-poll.js';
import { VerbBar, verbRequests } from '../parts/verbs.js';
import { RouteWeights, weightsFromLog } from '../parts/weights.js';
import { href } from '../route.js';
import type { Session } from '../session-type.js';
import type { LogLineJson, MigrationDetail } from '../types.js';

/** Read again this often too, for what the log does not say (a runner that died). */
const refreshMs = 10_000;

export function MigrationPage({ id, session }: { id: string; session: Session }) {
  const { client } = session;
  const detail = usePoll(
    (signal) => client.get<MigrationDetail>(`/v1/migrations/${id}`, signal),
    refreshMs,
    id,
  );
  const [lines, setLines] = useState<LogLineJson[]>([]);
  const [streamProblem, setStreamProblem] = useState<Error | null>(null);
  const reload = useRef(detail.reload);
  reload.current = detail.reload;

  useEffect(() => {
    const stop = new AbortController();
    void client.follow(
      `/v1/migrations/${id}/logs?follow=true`,
      (event) => {
        if (event.event === 'reset') setLines([]);
        else if (event.event === 'log') {
          const line = JSON.parse(event.data) as LogLineJson;
          setLines((old) => [...old, line]);
        }
        setStreamProblem(null);
        reload.current();
      },
      stop.signal,
      setStreamProblem,
    );
    return () => stop.abort();
  }, [client, id]);

  const d = detail.value;
  if (d === null) {
    return (
      <>
        <h1>Migration {id}</h1>
        <ProblemLine error={detail.error} />
        {detail.error === null && <p class="loading">Asking the server…</p>}
      </>
    );
  }
  const { summary, state } = d;
  const weights = weightsFromLog(lines);
  const last = [...weights.values()].map((points) => points.at(-1)).find((p) => p !== undefined) ?? null;
  const operator = session.who.role === 'operator';
  return (
    <>
      <h1>
        Migration <span class="mono">{summary.id}</span>
      </h1>
      <ProblemLine error={detail.error ?? streamProblem} />
      <dl class="facts card">
        <dt>Environment</dt>
        <dd>
          <a href={href({ page: 'history', environment: summary.environment, state: '' })}>
            {summary.environment}
          </a>
        </dd>
        <dt>State</dt>
        <dd>
          <span class={`badge ${summary.lifecycle}`} data-field="lifecycle">
            {lifecycleText(summary.lifecycle)}
          </span>{' '}
          <span data-field="status">{summary.status}</span>
        </dd>
        <dt>Progress</dt>
        <dd>
          {summary.actionsDone} of {summary.actionsTotal} actions
        </dd>
        <dt>Started</dt>
        <dd>
          {time(summary.startedAt)}
          {summary.startedBy ? ` by ${summary.startedBy}` : ''}
        </dd>
        {summary.endedAt && (
          <>
            <dt>Ended</dt>
            <dd>{time(summary.endedAt)}</dd>
          </>
        )}
        {summary.reason && (
          <>
            <dt>Reason</dt>
            <dd data-field="reason">{summary.reason}</dd>
          </>
        )}
        <dt>Plan</dt>
        <dd class="mono">{summary.planId}</dd>
      </dl>
      <HoldPanel detail={d} lines={lines} weight={last} />
      {operator && <VerbBar client={client} requests={verbRequests(d)} onDone={detail.reload} />}
      <Resolve detail={d} client={client} operator={operator} onDone={detail.reload} />
      <Stages detail={d} weight={last?.percent ?? null} />
      <Stateful detail={d} now={Date.now()} />
      <RouteWeights lines={lines} until={summary.endedAt ? Date.parse(summary.endedAt) : Date.now()} />
      <Analyses analyses={state.analyses} />
      <LogView lines={lines} />
    </>
  );
}
