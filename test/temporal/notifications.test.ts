/**
 * Notifications in Temporal mode (issue 21): the migration workflow delivers the same CloudEvents as
 * local mode, from activities on a worker that reads the signing secret itself, beside the
 * migration. A receiver in the test gets started … completed, each signed; a receiver that hangs
 * does not delay the migration's end (what is left goes on in a child workflow), so the next
 * migration starts at once. A real dev server, a real
 * `cutover worker`, a real app behind the real router.
 */
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { killSlots, type Workspace, workspace } from '../support/migrations.js';
import { ServerHarness, type ServerProcess } from '../support/server.js';
import {
  startWorker,
  type TestWorker,
  temporalAddress,
  uniqueTaskQueue,
} from '../support/temporal-worker.js';
import { eventually } from '../support/wait.js';

const hookKey = 'temporal-signing-key-21';

interface Received {
  body: string;
  headers: http.IncomingHttpHeaders;
}

/**
 * Answers 200 to every POST and keeps it; `hang`: accepts and never answers (a number: only the
 * first that many requests).
 */
async function receiver(
  hang: boolean | number = false,
): Promise<{ url: string; got: Received[]; close: () => Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8');
    });
    req.on('end', () => {
      got.push({ body, headers: req.headers });
      if (hang === true || (typeof hang === 'number' && got.length <= hang)) return;
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    got,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

let worker: TestWorker;
let w: Workspace;
let hook: Awaited<ReturnType<typeof receiver>>;
let hang: Awaited<ReturnType<typeof receiver>>;
let hangOnce: Awaited<ReturnType<typeof receiver>>;
const servers = new ServerHarness();

beforeAll(async () => {
  [worker, hook, hang, hangOnce] = await Promise.all([
    // The signing key is set on the worker only: it is read where the delivery runs.
    startWorker({
      address: temporalAddress(),
      taskQueue: uniqueTaskQueue('notify'),
      env: { CUTOVER_SECRET_HOOK_KEY: hookKey },
    }),
    receiver(),
    receiver(true),
    receiver(1),
  ]);
  w = await workspace('test/fixtures/canary', (yaml) =>
    yaml.replace(/name: canary/, `name: notify-${process.pid}-${Date.now().toString(36)}`),
  );
  const first = await cli('topology', 'migrate', '--yes');
  expect(first.code, first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await cli('topology', 'down', '--yes').catch(() => undefined);
  if (worker) killSlots(worker.stateDir);
  // The receivers first: a delivery still waiting on the hanging one is a call in flight, which
  // the worker's SIGTERM lets finish (for up to its grace time, past the 5 s stop() waits).
  await hook?.close();
  await hang?.close();
  await hangOnce?.close();
  await worker?.stop();
  await w?.cleanup();
  await servers.cleanup();
}, 60_000);

const cli = (...args: string[]) => runCli([...args, '-f', w.file], { env: worker.env });

/** Moves the app to `version` with these `notify:` targets (none: no section), timed. */
async function migrate(from: string, to: string, notify = ''): Promise<{ id: string; ms: number }> {
  const text = readFileSync(w.file, 'utf8')
    .replace(/\nnotify:\n[\s\S]*$/, '\n')
    .replace(`version: "${from}"`, `version: "${to}"`);
  writeFileSync(w.file, notify ? `${text}\nnotify:\n${notify}\n` : text);
  const started = Date.now();
  const result = await cli('topology', 'migrate', '--yes', '--json');
  const ms = Date.now() - started;
  if (result.code !== 0) throw new Error(`migrate ${to}: ${result.stderr} ${result.stdout}`);
  const { summary } = JSON.parse(result.stdout) as { summary: { id: string; lifecycle: string } };
  expect(summary.lifecycle).toBe('completed');
  return { id: summary.id, ms };
}

describe('Temporal mode: notifications', () => {
  it('delivers started … completed to a receiver, signed, and a hanging one does not delay the end', {
    timeout: 60_000,
  }, async () => {
    const without = await migrate('1.0.0', '1.1.0');
    const target = (name: string, url: string, extra = '') =>
      `  ${name}:\n    type: webhook\n    url: ${url}\n    signingSecret: { secret: HOOK_KEY }${extra}`;
    const withHooks = await migrate(
      '1.1.0',
      '1.2.0',
      [target('ops', hook.url), target('slow', hang.url, '\n    timeout: 30s\n    retries: 0')].join('\n'),
    );
    // Waiting on the hanging receiver would add its 30 s timeout; the rest is slack for a loaded
    // machine (ci59, beside a benchmark: 9.2 s against 4.0 s without the hooks).
    expect(withHooks.ms).toBeLessThan(without.ms * 2 + 10_000);

    await eventually(
      () => hook.got.some((r) => r.body.includes('"dev.cutover.migration.completed"')),
      20_000,
      () => `the completed event; got ${hook.got.length} events`,
    );
    const events = hook.got.map(
      (r) =>
        JSON.parse(r.body) as { type: string; id: string; subject: string; data: Record<string, unknown> },
    );
    expect(events.map((e) => [e.type.replace('dev.cutover.migration.', ''), e.data.weight ?? null])).toEqual([
      ['started', null],
      ['step_reached', 100],
      ['completed', null],
    ]);
    expect(events.every((e) => e.subject === withHooks.id)).toBe(true);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect(events.at(-1)?.data).toMatchObject({ versions: { web: { from: '1.1.0', to: '1.2.0' } } });
    for (const r of hook.got) {
      const timestamp = String(r.headers['x-cutover-timestamp']);
      const expected = `sha256=${createHmac('sha256', hookKey).update(`${timestamp}.${r.body}`).digest('hex')}`;
      expect(r.headers['x-cutover-signature']).toBe(expected);
    }
    // The hanging receiver got the first event (again from the child the run handed it to) and
    // never answered.
    expect(hang.got.length).toBeGreaterThan(0);
    expect(new Set(hang.got.map((r) => (JSON.parse(r.body) as { type: string }).type))).toEqual(
      new Set(['dev.cutover.migration.started']),
    );

    // Each result is a line of the migration's log (the status query's). The migration's run ends
    // at its last event (\`migrate\` returns there), after handing what is left to a child.
    let logs = '';
    await eventually(
      async () => {
        logs = (await cli('topology', 'migration', 'logs', withHooks.id)).stdout;
        return logs.includes('handed to workflow');
      },
      20_000,
      () => logs,
    );
    expect(logs).toMatch(
      /notify ops \(webhook http:\/\/127\.0\.0\.1:\d+\/hook\): delivered migration\.started in \d+ ms \(200\)/,
    );
    // The hanging receiver's started and the two events queued behind it, and ops' completed (its
    // delivery starts as the run ends), go to a child workflow…
    expect(logs).toMatch(
      new RegExp(
        `notify: 4 deliveries not done when the migration's run ended: handed to workflow cutover-notify-${withHooks.id}-\\d+`,
      ),
    );
    // …and the run ended when the migration completed, not the receiver's 30 s later.
    const timeOf = (pattern: RegExp) => {
      const [h, m, sec] = (new RegExp(`^(\\S+)\\s+${pattern.source}`, 'm').exec(logs)?.[1] ?? '')
        .split(':')
        .map(Number);
      return ((h as number) * 60 + (m as number)) * 60_000 + (sec as number) * 1000;
    };
    const late = timeOf(/notify: 4 deliveries/) - timeOf(/completed: environment/);
    expect(late).toBeLessThan(3_000);
  });

  it('GET /v1/events streams the same CloudEvents from the workflows, and resumes after a Last-Event-ID', {
    timeout: 60_000,
  }, async () => {
    // A server beside the worker (on its task queue), running no worker itself.
    const server = await servers.start({
      stateDir: await servers.stateDir(),
      args: ['--no-worker', '--rate-limit', '0'],
      env: worker.env,
    });
    let id = '';
    const completed = (events: EventSourceMessage[]) =>
      id !== '' && events.some((e) => e.event === 'dev.cutover.migration.completed' && e.data.includes(id));
    const from = hook.got.length;
    const streamed = await readEvents(server, {}, completed, async () => {
      id = (
        await migrate(
          '1.2.0',
          '1.3.0',
          `  ops:\n    type: webhook\n    url: ${hook.url}\n    signingSecret: { secret: HOOK_KEY }`,
        )
      ).id;
    });
    const mine = streamed.filter((e) => e.data.includes(`"subject":"${id}"`));
    expect(mine.map((e) => e.event)).toEqual([
      'dev.cutover.migration.started',
      'dev.cutover.migration.step_reached',
      'dev.cutover.migration.completed',
    ]);
    // The same events as the webhook got: ids, types, data.
    await eventually(
      () => hook.got.length - from === 3,
      20_000,
      () => `${hook.got.length - from} delivered`,
    );
    expect(mine.map((e) => JSON.parse(e.data))).toEqual(hook.got.slice(from).map((r) => JSON.parse(r.body)));
    expect(mine.map((e) => e.id)).toEqual(mine.map((e) => (JSON.parse(e.data) as { id: string }).id));

    // A client that reconnects after the first gets the rest, from the run that has closed.
    const resumed = await readEvents(server, { 'last-event-id': mine[0]?.id as string }, completed);
    expect(resumed.filter((e) => e.data.includes(id)).map((e) => e.id)).toEqual(
      mine.slice(1).map((e) => e.id),
    );
  });

  it("a migration that has ended holds its workflow id for no delivery: the next migrate starts at once, and the receiver still gets the first one's completed", {
    timeout: 60_000,
  }, async () => {
    // The receiver hangs on its first request (the first migration's started): at the end that
    // delivery is still under way, with step_reached and completed queued behind it.
    const notify = `  slow:\n    type: webhook\n    url: ${hangOnce.url}\n    signingSecret: { secret: HOOK_KEY }\n    timeout: 30s\n    retries: 0`;
    const first = await migrate('1.3.0', '1.4.0', notify);
    // At once: before, the first run stayed open up to 2 s for its deliveries and this failed
    // with MIGRATION_CONFLICT naming the completed migration.
    const second = await migrate('1.4.0', '1.5.0', notify);
    expect(second.id).not.toBe(first.id);
    const completedOf = (id: string) =>
      hangOnce.got.some(
        (r) => r.body.includes('"dev.cutover.migration.completed"') && r.body.includes(`"subject":"${id}"`),
      );
    await eventually(
      () => completedOf(first.id) && completedOf(second.id),
      30_000,
      () => `completed of both; got ${hangOnce.got.map((r) => r.body.slice(0, 80)).join(' | ')}`,
    );
  });
});

/** Reads GET /v1/events until `enough` holds (after `onOpen` once the stream is open), then hangs up. */
async function readEvents(
  server: ServerProcess,
  headers: Record<string, string>,
  enough: (events: EventSourceMessage[]) => boolean,
  onOpen: () => Promise<void> = async () => {},
): Promise<EventSourceMessage[]> {
  const stop = new AbortController();
  const timeout = setTimeout(() => stop.abort(), 40_000);
  const events: EventSourceMessage[] = [];
  try {
    const response = await fetch(`${server.url}/v1/events`, {
      headers: { accept: 'text/event-stream', ...headers },
      signal: stop.signal,
    });
    expect(response.status, await (response.ok ? '' : response.text())).toBe(200);
    const parser = createParser({ onEvent: (event) => events.push(event) });
    const decoder = new TextDecoder();
    const opened = onOpen();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (enough(events)) break;
    }
    await opened;
  } finally {
    clearTimeout(timeout);
    stop.abort();
  }
  return events;
}
