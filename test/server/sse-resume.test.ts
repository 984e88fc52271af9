/**
 * A client resuming an event stream with a Last-Event-ID that names nothing of this server: the
 * log stream (an id past the log's end, or not a count) and the event feed (not an event id, or a
 * migration the server does not know) say so in an event `reset` before anything else, and say
 * where the stream goes on from. Before, the log replayed from line 1 under ids the client took for
 * lines after its own, and the feed started silently.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Api, demoApply, ServerHarness, type ServerProcess } from '../support/server.js';

const harness = new ServerHarness();
let server: ServerProcess;
let api: Api;
const started: string[] = [];

beforeAll(async () => {
  ({ server, api } = await harness.serve({ args: ['--rate-limit', '0'] }));
}, 30_000);

afterAll(() => harness.cancelThenCleanup(api, started), 60_000);

/** The events of a stream, until `enough` says so (or the server ends it). */
async function read(
  path: string,
  headers: Record<string, string>,
  enough: (events: EventSourceMessage[]) => boolean = () => false,
): Promise<EventSourceMessage[]> {
  const stop = new AbortController();
  const response = await fetch(`${server.url}${path}`, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: AbortSignal.any([stop.signal, AbortSignal.timeout(30_000)]),
  });
  expect(response.status).toBe(200);
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event) });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (enough(events)) break;
    }
  } finally {
    stop.abort();
  }
  return events;
}

let id: string;
let whole: EventSourceMessage[];

beforeAll(async () => {
  const r = await api.post('/v1/apply', demoApply({ name: 'resume-reset' }));
  id = r.json.summary.id as string;
  started.push(id);
  await api.waitForEnd(id);
  whole = (await read(`/v1/migrations/${id}/logs?follow=true`, {})).filter((e) => e.event === 'log');
  expect(whole.length).toBeGreaterThan(5);
}, 60_000);

it('a log Last-Event-ID past the end: `reset` with the reason, then the log from line 1 with its own ids', async () => {
  const events = await read(`/v1/migrations/${id}/logs?follow=true`, { 'last-event-id': '9999' });
  expect(events[0]?.event).toBe('reset');
  expect(JSON.parse(events[0]?.data as string)).toEqual({
    lastEventId: '9999',
    lines: whole.length,
    reason: `Last-Event-ID 9999 is past the end of this log (${whole.length} lines): the log follows from its first line`,
  });
  const logs = events.filter((e) => e.event === 'log');
  expect(logs.map((e) => [e.id, e.data])).toEqual(whole.map((e) => [e.id, e.data]));
  expect(events.at(-1)?.event).toBe('end');
});

it('a log Last-Event-ID that is not a count: `reset`, then the whole log', async () => {
  const events = await read(`/v1/migrations/${id}/logs?follow=true`, { 'last-event-id': 'abc' });
  expect(events[0]?.event).toBe('reset');
  expect(JSON.parse(events[0]?.data as string).reason).toMatch(/^Last-Event-ID "abc" is not a line position/);
  expect(events.filter((e) => e.event === 'log')).toHaveLength(whole.length);
});

it('a log Last-Event-ID at the end: no reset, nothing but `end`', async () => {
  const events = await read(`/v1/migrations/${id}/logs?follow=true`, {
    'last-event-id': String(whole.length),
  });
  expect(events.map((e) => e.event)).toEqual(['end']);
});

it('an event feed Last-Event-ID that is not an event id, or names an unknown migration: `reset` first', async () => {
  const isReset = (events: EventSourceMessage[]) => events.some((e) => e.event === 'reset');
  const garbage = await read('/v1/events', { 'last-event-id': 'garbage' }, isReset);
  expect(garbage[0]?.event).toBe('reset');
  expect(JSON.parse(garbage[0]?.data as string)).toEqual({
    lastEventId: 'garbage',
    reason:
      'Last-Event-ID "garbage" is not an event id of this server (<migration>.<journal line>.<index>): events follow from now on',
  });
  const unknown = 'mig_00000000000000000000000000.3.0';
  const pruned = await read('/v1/events', { 'last-event-id': unknown }, isReset);
  expect(pruned[0]?.event).toBe('reset');
  expect(JSON.parse(pruned[0]?.data as string).reason).toMatch(
    /^Last-Event-ID mig_0{26}\.3\.0 names migration mig_0{26}, which this server does not know/,
  );
});

it('an event feed Last-Event-ID of a known event: no reset, the events after it', async () => {
  const feed = await read('/v1/events', { 'last-event-id': `${id}.1.0` }, (events) =>
    events.some((e) => e.data.includes('"completed"')),
  );
  expect(feed.map((e) => e.event)).not.toContain('reset');
  expect(feed.some((e) => e.id?.startsWith(`${id}.`))).toBe(true);
});
