/**
 * Following a migration's log over Server-Sent Events: `event: log` per line as the migration
 * writes it, then `event: end` with its summary once it has ended.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Api,
  demoApply,
  type MigrationSummary,
  ServerHarness,
  type ServerProcess,
  unknownId,
} from '../support/server.js';

const harness = new ServerHarness();
let server: ServerProcess;
let api: Api;
const started: string[] = [];

beforeAll(async () => {
  ({ server, api } = await harness.serve({ args: ['--rate-limit', '0'] }));
}, 30_000);

afterAll(() => harness.cancelThenCleanup(api, started), 60_000);

interface Received extends EventSourceMessage {
  at: number;
}

/** Reads an event stream to its end: every event, with the time it arrived. */
async function follow(
  id: string,
  headers: Record<string, string> = {},
): Promise<{ type: string | null; events: Received[] }> {
  const response = await fetch(`${server.url}/v1/migrations/${id}/logs?follow=true`, {
    headers,
    signal: AbortSignal.timeout(30_000),
  });
  expect(response.status).toBe(200);
  const events: Received[] = [];
  const parser = createParser({ onEvent: (event) => events.push({ ...event, at: Date.now() }) });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
  }
  return { type: response.headers.get('content-type'), events };
}

it('streams log lines while the migration runs, then `end` with its summary', async () => {
  // A 2 s bake between the first lines and the end.
  const r = await api.post('/v1/apply', demoApply({ name: 'follow', bake: '2s', commit: 'auto' }));
  expect(r.status).toBe(202);
  const id = r.json.summary.id as string;
  started.push(id);

  const { type, events } = await follow(id);
  expect(type).toMatch(/^text\/event-stream/);
  const logs = events.filter((e) => e.event === 'log');
  const ends = events.filter((e) => e.event === 'end');
  expect(events.map((e) => e.event).filter((e) => e !== 'log' && e !== 'end')).toEqual([]);
  expect(ends).toHaveLength(1);
  expect(events.at(-1)?.event).toBe('end');

  const { summary } = JSON.parse((ends[0] as Received).data) as { summary: MigrationSummary };
  api.contract.component('MigrationSummary', summary);
  expect(summary).toMatchObject({ id, lifecycle: 'completed' });
  expect(summary.endedAt).not.toBeNull();

  // Lines arrived as they were written: the first well before the migration ended.
  expect(logs.length).toBeGreaterThan(5);
  const first = logs[0] as Received;
  expect(first.at).toBeLessThan(Date.parse(summary.endedAt as string));
  expect((ends[0] as Received).at - first.at).toBeGreaterThan(1000);

  // Every line is a LogLine, and the stream carried the whole log, in order.
  const lines = logs.map((e) => JSON.parse(e.data));
  for (const line of lines) api.contract.component('LogLine', line);
  const log = await api.get(`/v1/migrations/${id}/logs`);
  expect(lines).toEqual(
    log.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l)),
  );
  expect(lines.some((l) => l.stage === 'bake')).toBe(true);
});

it('following a migration that has ended: its whole log, then `end` at once', async () => {
  const r = await api.post('/v1/apply', demoApply({ name: 'follow-late' }));
  const id = r.json.summary.id as string;
  started.push(id);
  await api.waitForEnd(id);
  const t0 = Date.now();
  const { events } = await follow(id);
  expect(Date.now() - t0).toBeLessThan(5000);
  expect(events.filter((e) => e.event === 'log').length).toBeGreaterThan(5);
  expect(events.at(-1)?.event).toBe('end');
  expect(JSON.parse(events.at(-1)?.data as string).summary.lifecycle).toBe('completed');
});

it('every log event has an id; a client resuming with Last-Event-ID gets the events after it', async () => {
  const r = await api.post('/v1/apply', demoApply({ name: 'resume-stream' }));
  const id = r.json.summary.id as string;
  started.push(id);
  await api.waitForEnd(id);
  const whole = (await follow(id)).events.filter((e) => e.event === 'log');
  expect(whole.map((e) => e.id)).toEqual(whole.map((_, i) => String(i + 1)));

  const resumed = (await follow(id, { 'last-event-id': '3' })).events;
  const logs = resumed.filter((e) => e.event === 'log');
  expect(logs.map((e) => e.data)).toEqual(whole.slice(3).map((e) => e.data));
  expect(logs[0]?.id).toBe('4');
  expect(resumed.at(-1)?.event).toBe('end');
});

it('404 and 400 as problems, not streams', async () => {
  const unknown = await api.get(`/v1/migrations/${unknownId}/logs?follow=true`);
  expect(unknown.status).toBe(404);
  expect(unknown.json.code).toBe('MIGRATION_NOT_FOUND');
  const bad = await api.get('/v1/migrations/nope/logs?follow=true');
  expect(bad.status).toBe(400);
});
