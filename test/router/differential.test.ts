/**
 * The differential test (issue 16): the same edge-case bytes through the router and through a real
 * nginx configured as the nginx route driver configures it, each in front of its own recording
 * upstream. For every case it compares what the upstream executed (method, target, body) and what
 * the client got back (the status of each response).
 *
 * The safety property, asserted for every case: the router never executes a request nginx would
 * not, and never forwards a response nginx refuses as badly framed. Every other difference is
 * pinned in `knownDifferences` (differential-differences.ts), so a new one fails the test.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { differentialCases, type Waits } from './differential-cases.js';
import { knownDifferences } from './differential-differences.js';
import { startNginx } from './differential-nginx.js';
import { rawExchange, scriptedUpstream } from './raw-http.js';
import { eventually, freeListen, Resources, setRoute, startTestRouter, stateDirFor } from './support.js';

const resources = new Resources();
afterAll(() => resources.cleanup());

/**
 * Both proxies' body timeout here (the route's bodyTimeout, nginx's client_body_timeout): a case
 * that sends less body than it declares ends when the proxy gives up on it.
 */
const bodyTimeoutMs = 1_500;
/**
 * A case that leaves a proxy waiting for the rest of a head (`waits: 'head'`) is over once the
 * proxy has sent nothing for this long; only for those cases, whose expected outcome is that
 * silence. Generous, so that a proxy slow to answer on a loaded machine is not read as waiting.
 */
const quietMs = 3_000;
/** Cases in flight at once, per proxy. */
const concurrency = 24;

/** What one proxy did with one case. */
interface Outcome {
  statuses: string[];
  executed: string[];
}

/** An upstream recording what it executed per case: the `/c<n>` or `/r<n>` in the target says whose. */
class Recorder {
  readonly executed = new Map<string, string[]>();
  inProgress = 0;

  record(caseId: string, line: string): void {
    const list = this.executed.get(caseId) ?? [];
    list.push(line);
    this.executed.set(caseId, list);
  }
}

function caseIdOf(target: string): string {
  return /\/([cr]\d+)(?:\/|$)/.exec(target)?.[1] ?? 'unknown';
}

/** The target as nginx sends it (origin form), without the case's prefix. */
function normalTarget(target: string, caseId: string): string {
  return abbreviate(target.replace(/^[a-zA-Z]+:\/\/[^/]*/, '').replace(`/${caseId}`, ''));
}

/** Long runs of one character written as `t×9000`, so that outcomes stay readable. */
function abbreviate(text: string): string {
  return text.replace(/(.)\1{19,}/g, (run, char: string) => `${char}×${run.length}`);
}

/**
 * Node's HTTP server as the upstream of request cases: executed = received to the end of its body.
 * It takes heads larger than either proxy does, so that a head a proxy forwards is executed.
 */
function requestUpstream(recorder: Recorder): Promise<string> {
  const server = createServer({ maxHeaderSize: 64 * 1024 }, (req: IncomingMessage, res: ServerResponse) => {
    const target = req.url ?? '';
    const caseId = caseIdOf(target);
    recorder.inProgress++;
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (!done) recorder.inProgress--;
      done = true;
    };
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      finish();
      const body = Buffer.concat(chunks).toString('latin1');
      recorder.record(caseId, `${req.method} ${normalTarget(target, caseId)} ${JSON.stringify(body)}`);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
    req.on('close', finish);
  });
  server.on('clientError', (error: Error, socket: Socket) => {
    recorder.record('upstream-errors', error.message);
    socket.destroy();
  });
  return resources.listen(server);
}

/** A raw upstream for response cases: reads a head, answers the case's exact bytes, closes. */
async function responseUpstream(recorder: Recorder, answers: Map<string, string>): Promise<string> {
  const upstream = await scriptedUpstream(resources, (head) => {
    const [method = '', target = ''] = head.split(' ');
    const caseId = caseIdOf(target);
    recorder.record(caseId, `${method} ${normalTarget(target, caseId)}`);
    return { bytes: answers.get(caseId) ?? 'HTTP/1.1 500 No Such Case\r\n\r\n', close: true };
  });
  return upstream.address;
}

/**
 * What a client makes of `received`: each response's status, `cut` after one whose body did not
 * arrive whole, `?` for bytes that are not a response. A HEAD (`head`) response has no body.
 */
function responseStatuses(received: string, head: boolean): string[] {
  const out: string[] = [];
  let rest = received;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(rest)?.[1];
    if (status === undefined) return [...out, '?'];
    if (end < 0) return [...out, `${status} cut`];
    const headText = rest.slice(0, end + 2).toLowerCase();
    rest = rest.slice(end + 4);
    const code = Number(status);
    if (head || code < 200 || code === 204 || code === 304) {
      out.push(status);
      continue;
    }
    const length = /\r\ncontent-length: *(\d+)\r\n/.exec(headText)?.[1];
    if (/\r\ntransfer-encoding: *chunked\r\n/.test(headText)) {
      const after = skipChunks(rest);
      if (after === null) return [...out, `${status} cut`];
      rest = after;
    } else if (length !== undefined) {
      if (rest.length < Number(length)) return [...out, `${status} cut`];
      rest = rest.slice(Number(length));
    } else rest = ''; // delimited by the close
    out.push(status);
  }
  return out;
}

/** `text` after a chunked body at its start; null when the body is not complete. */
function skipChunks(text: string): string | null {
  let at = 0;
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    if (lineEnd < 0) return null;
    const size = Number.parseInt(text.slice(at, lineEnd), 16);
    if (Number.isNaN(size)) return null;
    if (size === 0) {
      const end = text.indexOf('\r\n\r\n', lineEnd);
      return end < 0 ? null : text.slice(end + 4);
    }
    at = lineEnd + 2 + size + 2;
    if (at > text.length) return null;
  }
}

/**
 * Writes `bytes` and reads until the proxy closes the connection; what the client got. A case that
 * leaves the proxy waiting ends as its `waits` says (differential-cases.ts): on a complete response
 * (`next request`), or on a quiet period, recorded as `waiting` (`head`). A proxy that leaves any
 * other case open fails the test, naming it.
 */
async function exchange(address: string, name: string, bytes: string, waits?: Waits): Promise<string[]> {
  const head = bytes.startsWith('HEAD ');
  const answered = (received: string) => {
    const statuses = responseStatuses(received, head);
    return statuses.length > 0 && !/cut|\?/.test(statuses[statuses.length - 1] as string);
  };
  try {
    const { received, quiet } = await rawExchange(address, Buffer.from(bytes, 'latin1'), {
      ...(waits === 'next request' ? { until: answered } : {}),
      ...(waits === 'head' ? { quietMs } : {}),
    });
    const statuses = responseStatuses(received, head);
    return quiet ? [...statuses, 'waiting'] : statuses;
  } catch (error) {
    throw new Error(`${name}: ${(error as Error).message}`);
  }
}

/** Runs `tasks` with at most `concurrency` at once. */
async function pooled(tasks: (() => Promise<void>)[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await (tasks[next++] as () => Promise<void>)();
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** One proxy's listeners and the upstreams behind them. */
interface ProxyUnderTest {
  requests: string;
  responses: string;
  requestUpstream: string;
  responseUpstream: string;
  requestRecorder: Recorder;
  responseRecorder: Recorder;
}

const { requests, responses } = differentialCases();
const answers = new Map(responses.map((c, i) => [`r${i}`, c.answer]));
const caseNames = new Map<string, string>([
  ...requests.map((c, i): [string, string] => [`c${i}`, `request: ${c.name}`]),
  ...responses.map((c, i): [string, string] => [`r${i}`, `response: ${c.name}`]),
]);

async function proxyUnderTest(): Promise<ProxyUnderTest> {
  const requestRecorder = new Recorder();
  const responseRecorder = new Recorder();
  return {
    requests: await freeListen(),
    responses: await freeListen(),
    requestUpstream: await requestUpstream(requestRecorder),
    responseUpstream: await responseUpstream(responseRecorder, answers),
    requestRecorder,
    responseRecorder,
  };
}

/**
 * Every case through `proxy`. Request cases run side by side; response cases one after the other:
 * the response upstream closes each connection after its answer, and a proxy that took such a
 * connection for its next request in the moment before the close arrived would fail that request
 * for a reason that belongs to no case.
 */
async function runCases(proxy: ProxyUnderTest, into: Map<string, Outcome>): Promise<void> {
  const requestTasks = requests.map((c, i) => async () => {
    const statuses = await exchange(proxy.requests, `request: ${c.name}`, c.bytes(`/c${i}`), c.waits);
    into.set(`c${i}`, { statuses, executed: [] });
  });
  const responseCases = async () => {
    for (const [i, c] of responses.entries()) {
      const bytes = `${c.method} /r${i}/answer HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n`;
      const statuses = await exchange(proxy.responses, `response: ${c.name}`, bytes);
      into.set(`r${i}`, { statuses, executed: [] });
    }
  };
  await Promise.all([pooled(requestTasks), responseCases()]);
  // Whatever reached the upstream has ended (or been cut) before it is counted.
  await eventually(() => proxy.requestRecorder.inProgress === 0, 10_000);
  for (const [id, outcome] of into)
    outcome.executed =
      (id.startsWith('c') ? proxy.requestRecorder : proxy.responseRecorder).executed.get(id) ?? [];
}

const outcomes = { router: new Map<string, Outcome>(), nginx: new Map<string, Outcome>() };

beforeAll(async () => {
  const [router, nginx] = await Promise.all([proxyUnderTest(), proxyUnderTest()]);
  const stateDir = await stateDirFor(resources);
  for (const kind of ['requests', 'responses'] as const) {
    const upstream = kind === 'requests' ? router.requestUpstream : router.responseUpstream;
    await setRoute(stateDir, kind, {
      listen: router[kind],
      blue: [upstream],
      green: [],
      greenPercent: 0,
      bodyTimeoutMs,
    });
  }
  await startTestRouter(resources, stateDir);
  await startNginx(resources, {
    requests: { listen: nginx.requests, upstream: nginx.requestUpstream, bodyTimeoutMs },
    responses: { listen: nginx.responses, upstream: nginx.responseUpstream, bodyTimeoutMs },
  });
  await Promise.all([runCases(router, outcomes.router), runCases(nginx, outcomes.nginx)]);
}, 120_000);

function describeOutcome(outcome: Outcome | undefined): string {
  if (!outcome) return 'no outcome';
  const executed = outcome.executed.length === 0 ? 'nothing' : outcome.executed.join(' + ');
  return `[${outcome.statuses.join(' ')}] executed ${executed}`;
}

describe('router and nginx: the same bytes', () => {
  it(`runs at least 200 cases`, () => {
    expect(caseNames.size).toBeGreaterThanOrEqual(200);
    expect(outcomes.router.size).toBe(caseNames.size);
    expect(outcomes.nginx.size).toBe(caseNames.size);
  });

  it('never executes a request nginx would not execute', () => {
    const unsafe: string[] = [];
    for (const [id, name] of caseNames) {
      if (!id.startsWith('c')) continue;
      if (knownDifferences[name]?.allowed) continue;
      const nginxExecuted = [...(outcomes.nginx.get(id)?.executed ?? [])];
      for (const request of outcomes.router.get(id)?.executed ?? []) {
        const at = nginxExecuted.indexOf(request);
        if (at < 0)
          unsafe.push(
            `${name}: router executed ${request}; nginx: ${describeOutcome(outcomes.nginx.get(id))}`,
          );
        else nginxExecuted.splice(at, 1);
      }
    }
    expect(unsafe).toEqual([]);
  });

  it('never forwards a response nginx refuses as badly framed', () => {
    const unsafe: string[] = [];
    for (const [id, name] of caseNames) {
      if (!id.startsWith('r')) continue;
      const router = outcomes.router.get(id);
      const nginx = outcomes.nginx.get(id);
      const answered = (outcome: Outcome | undefined) =>
        outcome !== undefined &&
        outcome.statuses.length > 0 &&
        outcome.statuses.every((s) => !/502|cut|\?/.test(s));
      if (!answered(nginx) && answered(router) && knownDifferences[name]?.allowed !== true)
        unsafe.push(`${name}: router ${describeOutcome(router)}; nginx ${describeOutcome(nginx)}`);
    }
    expect(unsafe).toEqual([]);
  });

  it('differs from nginx only where the table of known differences says', () => {
    const found: Record<string, string> = {};
    for (const [id, name] of caseNames) {
      const router = describeOutcome(outcomes.router.get(id));
      const nginx = describeOutcome(outcomes.nginx.get(id));
      if (router !== nginx) found[name] = `router ${router}; nginx ${nginx}`;
    }
    if (process.env.DIFFERENTIAL_REPORT)
      writeFileSync(process.env.DIFFERENTIAL_REPORT, `${JSON.stringify(found, null, 2)}\n`);
    const pinned = Object.fromEntries(
      Object.entries(knownDifferences).map(([name, d]) => [name, d.outcomes]),
    );
    expect(found).toEqual(pinned);
  });
});
