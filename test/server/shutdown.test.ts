/**
 * Graceful shutdown: SIGTERM while a migration runs (and a log stream is open) stops the server
 * promptly with exit 0; the migration goes on in its own process, and a new server on the same
 * state directory shows it and sees it end.
 */
import { createParser } from 'eventsource-parser';
import { afterAll, expect, it } from 'vitest';
import { alive, waitGone } from '../support/processes.js';
import { Api, demoApply, type MigrationSummary, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let cleanupApi: Api | undefined;
let startedId: string | undefined;

afterAll(async () => {
  try {
    // A test that failed half way: cancel what it left in flight (the harness kills it otherwise).
    if (cleanupApi && startedId) await cleanupApi.cancelAndWait(startedId).catch(() => undefined);
  } finally {
    await harness.cleanup();
  }
}, 60_000);

it('SIGTERM: exit 0 promptly, even with an open log stream; the migration goes on and ends', async () => {
  const stateDir = await harness.stateDir();
  const first = await harness.start({ stateDir });
  const api = await Api.connect(first.url);
  cleanupApi = api;

  // A 5 s bake: still in flight when the server stops.
  const r = await api.post('/v1/apply', demoApply({ name: 'shutdown', bake: '5s', commit: 'auto' }));
  expect(r.status).toBe(202);
  const id = r.json.summary.id as string;
  startedId = id;
  const runnerPid = r.json.summary.runnerPid as number;
  expect(runnerPid).toBeGreaterThan(0);

  // An open stream, with lines already through.
  const response = await fetch(`${first.url}/v1/migrations/${id}/logs?follow=true`);
  const events: string[] = [];
  const parser = createParser({ onEvent: (e) => events.push(e.event ?? 'message') });
  const decoder = new TextDecoder();
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  while (!events.includes('log')) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  expect(events).toContain('log');
  const streamEnded = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  })();

  const t0 = Date.now();
  const exit = await first.stop('SIGTERM');
  const took = Date.now() - t0;
  expect(exit).toEqual({ code: 0, signal: null });
  expect(took).toBeLessThan(5000);
  await streamEnded;
  expect(events).not.toContain('end');
  expect(events.at(-1)).toBe('shutdown');
  expect(first.stderr()).toMatch(/SIGTERM: finishing requests in flight/);

  // The migration's process lives on without the server.
  expect(alive(runnerPid)).toBe(true);

  // A new server on the same state directory shows it, and sees it end.
  const second = await harness.start({ stateDir });
  const api2 = await Api.connect(second.url);
  cleanupApi = api2;
  const list = await api2.get('/v1/migrations?environment=shutdown');
  expect(list.json.items.map((m: MigrationSummary) => m.id)).toEqual([id]);
  const inFlight = list.json.items[0] as MigrationSummary;
  // Still going, or done by now: never stopped with the server.
  expect(['running', 'committing', 'completed']).toContain(inFlight.lifecycle);
  const ended = await api2.waitForEnd(id);
  expect(ended.lifecycle).toBe('completed');
  startedId = undefined;
  await waitGone(runnerPid);
  expect((await second.stop()).code).toBe(0);
}, 60_000);
