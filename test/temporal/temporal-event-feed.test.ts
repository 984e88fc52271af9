/**
 * GET /v1/events in Temporal mode resumes by time (a pure unit test: a fake client answering the
 * list and the notifications query). Told migration by migration, resuming after a newer
 * migration's event lost an older migration's later one.
 */
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { CloudEvent } from '../../core/notify/types.js';
import { followTemporalEvents } from '../../engine/temporal/temporal-event-feed.js';

const A = 'mig_01aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'mig_01bbbbbbbbbbbbbbbbbbbbbbbb';
const event = (migration: string, seq: number, ms: number) =>
  ({
    id: `${migration}.${seq}.0`,
    time: new Date(ms).toISOString(),
    type: 'dev.cutover.migration.x',
  }) as CloudEvent;

function fakeClient(events: Record<string, CloudEvent[]>, queries: string[] = []): Client {
  return {
    workflow: {
      async *list({ query }: { query: string }) {
        queries.push(query);
        for (const migration of Object.keys(events)) {
          yield {
            workflowId: `wf-${migration}`,
            runId: `run-${migration}`,
            memo: { migrationId: migration },
            status: { name: 'RUNNING' },
            startTime: new Date(0),
          };
        }
      },
      getHandle: (workflowId: string) => ({
        query: async (_q: unknown, after: number) =>
          (events[workflowId.replace('wf-', '')] ?? []).filter((e) => Number(e.id.split('.')[1]) > after),
      }),
    },
  } as unknown as Client;
}

describe('Temporal event feed', () => {
  it('resumes after B.3.0 at t=1000 with A.5.0 at t=2000, older migration A still running', async () => {
    const queries: string[] = [];
    const client = fakeClient(
      {
        [A]: [event(A, 1, 500), event(A, 5, 2000)],
        [B]: [event(B, 1, 800), event(B, 3, 1000), event(B, 4, 3000)],
      },
      queries,
    );
    const stop = new AbortController();
    const got: string[] = [];
    for await (const e of followTemporalEvents(client, {
      signal: stop.signal,
      taskQueue: 'cutover-a',
      after: `${B}.3.0`,
      pollMs: 10,
    })) {
      got.push(e.id);
      if (got.length === 2) stop.abort();
    }
    expect(got).toEqual([`${A}.5.0`, `${B}.4.0`]);
    // Only this deployment's migrations: another task queue's are another deployment's.
    expect(queries[0]).toContain("TaskQueue = 'cutover-a'");
  });

  it('tells, without a Last-Event-ID, what a migration said after the feed began though its first look saw it', async () => {
    // The first look took a while (list and queries under load): B started and ended meanwhile.
    // What A said before the feed began is history, not told.
    const now = Date.now();
    const client = fakeClient({
      [A]: [event(A, 1, now - 60_000)],
      [B]: [event(B, 1, now + 1_000), event(B, 2, now + 2_000)],
    });
    const stop = new AbortController();
    const got: string[] = [];
    // Nothing more comes after the first look: the feed is stopped after a few polls.
    const timer = setTimeout(() => stop.abort(), 500);
    try {
      for await (const e of followTemporalEvents(client, { signal: stop.signal, taskQueue: 'q', pollMs: 10 }))
        got.push(e.id);
    } finally {
      clearTimeout(timer);
    }
    expect(got).toEqual([`${B}.1.0`, `${B}.2.0`]);
  });
});
