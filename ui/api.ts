/**
 * The dashboard's only way to the server: the public /v1 API, with the signed-in token as a
 * bearer header (never in a URL). Problems (RFC 9457) become ApiError with their code and detail,
 * shown to the user as the server wrote them. Live logs and events are Server-Sent Events read
 * through fetch (EventSource cannot send a header), resumed with Last-Event-ID after a drop.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

/** How long a dropped stream waits before it is opened again. */
const reconnectDelayMs = 1000;

export class Client {
  constructor(
    readonly token: string | null,
    /** Called on a 401: the token is not (or no longer) valid. */
    private readonly onUnauthorized: () => void,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token === null ? extra : { ...extra, authorization: `Bearer ${this.token}` };
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.answer<T>(
      await fetch(path, { headers: this.headers({ accept: 'application/json' }), signal: signal ?? null }),
    );
  }

  async post<T>(path: string, body?: unknown): Promise<T> {
    const init: RequestInit = {
      method: 'POST',
      headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    return this.answer<T>(await fetch(path, init));
  }

  private async answer<T>(response: Response): Promise<T> {
    const text = await response.text();
    if (response.ok) return (text === '' ? null : JSON.parse(text)) as T;
    let problem: { code?: string; detail?: string } = {};
    try {
      problem = JSON.parse(text) as typeof problem;
    } catch {
      // not a problem document: the status says it
    }
    if (response.status === 401) this.onUnauthorized();
    throw new ApiError(
      response.status,
      problem.code ?? `HTTP_${response.status}`,
      problem.detail ?? (text.slice(0, 200) || response.statusText),
    );
  }

  /**
   * Follows an event stream until `signal` aborts or the server sends `end`: each event to
   * `onEvent`, in order; a dropped connection is opened again from the last id seen.
   */
  async follow(
    path: string,
    onEvent: (event: EventSourceMessage) => void,
    signal: AbortSignal,
    onError: (error: Error) => void = () => {},
  ): Promise<void> {
    let lastId: string | undefined;
    let ended = false;
    while (!signal.aborted && !ended) {
      try {
        const headers = this.headers({ accept: 'text/event-stream' });
        if (lastId !== undefined) headers['last-event-id'] = lastId;
        const response = await fetch(path, { headers, signal });
        if (!response.ok || response.body === null) await this.answer(response);
        const parser = createParser({
          onEvent(event) {
            if (event.id !== undefined) lastId = event.id;
            if (event.event === 'end') ended = true;
            onEvent(event);
          },
        });
        const reader = (response.body as ReadableStream<Uint8Array>)
          .pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>)
          .getReader();
        for (let next = await reader.read(); !next.done; next = await reader.read()) parser.feed(next.value);
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ApiError && (error.status === 401 || error.status === 404)) {
          onError(error);
          return;
        }
        onError(error as Error);
      }
      if (!ended && !signal.aborted) await delay(reconnectDelayMs, signal);
    }
  }
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
