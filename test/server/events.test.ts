/**
 * `GET /v1/events`: every migration's notifications as Server-Sent Events, CloudEvents JSON in each,
 * streamed while the migration runs, and resumed after a `Last-Event-ID`.
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

interface Received extends EventSourceMessage {
  at: number;
}

/** Reads the event stream until `enough` holds, then hangs up. */
async function readEvents(
  headers: Record<string, string>,
  enough: (events: Received[]) => boolean,
  onOpen: () => Promise<void> = async () => {},
): Promise<Received[]> {
  const stop = new AbortController();
  const timeout = setTimeout(() => stop.abort(), 30_000);
  const response = await fetch(`${server.url}/v1/events`, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: stop.signal,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: Received[] = [];
  const parser = createParser({ onEvent: (event) => events.push({ ...event, at: Date.now() }) });
  const decoder = new TextDecoder();
  await onOpen();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (enough(events)) break;
    }
  } finally {
    clearTimeout(timeout);
    stop.abort();
  }
  return events;
}

it('streams a migration’s events while it runs, as CloudEvents, and resumes after a Last-Event-ID', async () => {
  let id = '';
  const completedOf = (events: Received[]) =>
    events.some((e) => e.event === 'dev.cutover.migration.completed' && e.data.includes(id));
  const events = await readEvents(
    {},
    (all) => id !== '' && completedOf(all),
    async () => {
      // A 2 s bake: the migration is still running when its first events are streamed.
      const r = await api.post('/v1/apply', demoApply({ name: 'events', bake: '2s', commit: 'auto' }));
      expect(r.status).toBe(202);
      id = r.json.summary.id as string;
      started.push(id);
    },
  );
  const mine = events.filter((e) => e.data.includes(`"subject":"${id}"`));
  expect(mine.map((e) => e.event)).toEqual([
    'dev.cutover.migration.started',
    'dev.cutover.migration.completed',
  ]);
  const [first, last] = mine.map((e) => ({ ...e, json: JSON.parse(e.data) })) as Array<
    Received & { json: Record<string, unknown> }
  >;
  expect(first?.json).toMatchObject({
    specversion: '1.0',
    type: 'dev.cutover.migration.started',
    source: 'cutover/events',
    subject: id,
    data: { environment: 'events', migration: id, severity: 'info' },
  });
  expect(first?.id).toBe(first?.json.id);
  // Streamed as it ran: the start came through before the 2 s bake was over.
  expect((last?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThan(1_000);

  // A client that lost the stream after `started` gets what followed, at once.
  const resumed = await readEvents({ 'last-event-id': first?.id ?? '' }, completedOf);
  expect(resumed.filter((e) => e.data.includes(`"subject":"${id}"`)).map((e) => e.id)).toEqual([last?.id]);
}, 60_000);

it('resumes in time order across environments: an older migration’s later event is not lost', async () => {
  const type = (name: string) => `dev.cutover.migration.${name}`;
  const of = (events: Received[], id: string, name: string) =>
    events.find((e) => e.event === type(name) && e.data.includes(`"subject":"${id}"`));
  // A (the older id) in enva and B in envb, both waiting for a manual commit.
  let a = '';
  let b = '';
  const waiting = await readEvents(
    {},
    (all) => a !== '' && b !== '' && !!of(all, a, 'awaiting_commit') && !!of(all, b, 'awaiting_commit'),
    async () => {
      for (const name of ['enva', 'envb']) {
        const r = await api.post('/v1/apply', demoApply({ name, commit: 'manual' }));
        expect(r.status).toBe(202);
        started.push(r.json.summary.id as string);
      }
      [a, b] = started.slice(-2) as [string, string];
    },
  );
  expect(a < b).toBe(true);
  const bWaiting = of(waiting, b, 'awaiting_commit')?.id as string;
  // A commits after B's awaiting_commit: a client resuming from that event must get A's completed.
  expect((await api.post(`/v1/migrations/${a}/commit`)).status).toBe(202);
  expect(await api.waitForEnd(a)).toMatchObject({ lifecycle: 'completed' });
  const resumed = await readEvents(
    { 'last-event-id': bWaiting },
    (all) => !!of(all, b, 'completed'),
    async () => {
      expect((await api.post(`/v1/migrations/${b}/commit`)).status).toBe(202);
    },
  );
  const ours = (events: Received[]) =>
    events.filter((e) => e.data.includes(`"subject":"${a}"`) || e.data.includes(`"subject":"${b}"`));
  expect(ours(resumed).map((e) => [e.event, JSON.parse(e.data).subject])).toEqual([
    [type('completed'), a],
    [type('completed'), b],
  ]);

  // The first look is history in time order, not migration by migration.
  const aStarted = of(waiting, a, 'started')?.id as string;
  const history = ours(await readEvents({ 'last-event-id': aStarted }, (all) => !!of(all, b, 'completed')));
  const times = history.map((e) => Date.parse(JSON.parse(e.data).time as string));
  expect(times).toEqual([...times].sort((x, y) => x - y));
  expect(history.map((e) => `${JSON.parse(e.data).subject}:${e.event}`)).toEqual(
    expect.arrayContaining([
      `${b}:${type('started')}`,
      `${a}:${type('completed')}`,
      `${b}:${type('completed')}`,
    ]),
  );
  expect(history).toHaveLength(5); // B started, A and B awaiting_commit, A and B completed
}, 90_000);
