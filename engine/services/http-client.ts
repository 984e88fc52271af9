/**
 * A client of a cutover server's HTTP API (`--server URL` or `CUTOVER_SERVER`, with
 * `CUTOVER_TOKEN`), over http or https (fetch). A problem the server answers becomes the same error
 * the local engine would raise, so front ends print the same lines and exit with the same codes
 * either way.
 */
import { CutoverError, isErrorCode, TopologyInvalidError } from '../../core/errors.js';

interface ProblemBody {
  code?: string;
  detail?: string;
  status?: number;
  migrationId?: string;
  errors?: { file?: string; line?: number; column?: number; path: string; message: string }[];
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
}

/** A stream of events cut mid-body: the connection was lost, not refused. */
export class StreamLostError extends Error {
  override readonly name = 'StreamLostError';
}

export class Remote {
  readonly base: URL;

  constructor(
    url: string,
    private readonly token: string | undefined,
  ) {
    try {
      this.base = new URL(url.endsWith('/') ? url : `${url}/`);
    } catch {
      throw new CutoverError('USAGE', `--server: not a URL: ${url}`);
    }
    if (this.base.protocol !== 'http:' && this.base.protocol !== 'https:') {
      throw new CutoverError('USAGE', `--server: expected an http:// or https:// URL, not ${url}`);
    }
  }

  private async fetch(
    method: string,
    path: string,
    body?: unknown,
    accept = 'application/json',
    extraHeaders: Record<string, string> = {},
  ): Promise<Response> {
    const url = new URL(path.replace(/^\//, ''), this.base);
    const headers: Record<string, string> = { accept, ...extraHeaders };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetch(url, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new CutoverError(
        'SERVER_UNREACHABLE',
        `cannot reach the cutover server at ${this.base.origin}: ${cause?.code ?? cause?.message ?? (error as Error).message}; check that \`cutover server\` runs there, and the URL (--server or CUTOVER_SERVER)`,
      );
    }
  }

  /** A JSON request; a problem answer is thrown as the engine's error. */
  async json<T>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
    const response = await this.fetch(method, path, body);
    const text = await response.text();
    if (response.status >= 400) throw problemError(response.status, text, this.base.origin);
    return { status: response.status, body: JSON.parse(text) as T, headers: response.headers };
  }

  /** A text answer (e.g. JSON lines), as it is. */
  async text(path: string): Promise<string> {
    const response = await this.fetch('GET', path, undefined, 'application/x-ndjson');
    const text = await response.text();
    if (response.status >= 400) throw problemError(response.status, text, this.base.origin);
    return text;
  }

  /**
   * Server-Sent Events, as they arrive, until the server ends the stream. `lastEventId`: the id of
   * the last event a lost stream delivered; the server goes on after it.
   */
  async *events(
    path: string,
    lastEventId?: string,
  ): AsyncGenerator<{ event: string; data: string; id?: string }> {
    const resume: Record<string, string> = lastEventId === undefined ? {} : { 'last-event-id': lastEventId };
    const response = await this.fetch('GET', path, undefined, 'text/event-stream', resume);
    if (response.status >= 400 || !response.body) {
      throw problemError(response.status, await response.text(), this.base.origin);
    }
    const { createParser } = await import('eventsource-parser');
    const queue: { event: string; data: string; id?: string }[] = [];
    const parser = createParser({
      onEvent: (e) =>
        queue.push({
          event: e.event ?? 'message',
          data: e.data,
          ...(e.id === undefined ? {} : { id: e.id }),
        }),
    });
    const decoder = new TextDecoder();
    const chunks = (response.body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await chunks.next();
      } catch (error) {
        // The server went away mid-stream (fetch says "terminated"): the connection, not a bug.
        // The caller may reconnect (Last-Event-ID); when it stops trying, it is SERVER_UNREACHABLE.
        throw new StreamLostError(
          `the connection to the cutover server at ${this.base.origin} was lost: ${(error as Error).message}`,
        );
      }
      if (next.done) return;
      parser.feed(decoder.decode(next.value, { stream: true }));
      while (queue.length > 0) yield queue.shift() as { event: string; data: string; id?: string };
    }
  }
}

function problemError(status: number, text: string, origin: string): CutoverError {
  let problem: ProblemBody = {};
  try {
    problem = JSON.parse(text) as ProblemBody;
  } catch {
    // not a problem document: say what came back
  }
  const detail = problem.detail ?? (text.trim().slice(0, 200) || `HTTP ${status}`);
  if (problem.code === 'TOPOLOGY_INVALID' && problem.errors) {
    return new TopologyInvalidError(
      problem.errors.map((e) => ({
        file: e.file ?? '(request)',
        line: e.line ?? 1,
        column: e.column ?? 1,
        path: e.path,
        message: e.message,
      })),
    );
  }
  if (isErrorCode(problem.code) && problem.code !== 'INTERNAL') {
    return new CutoverError(
      problem.code,
      detail,
      problem.migrationId ? { migrationId: problem.migrationId } : undefined,
    );
  }
  return new CutoverError(
    'SERVER_REFUSED',
    `the cutover server at ${origin} answered ${status}${problem.code ? ` ${problem.code}` : ''}: ${detail}`,
  );
}
