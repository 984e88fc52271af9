/**
 * WebSocket upstreams and clients for the router's upgrade tests (`ws`, a devDependency: Node 20
 * has no stable WebSocket client). An upstream greets each connection with its name, echoes every
 * message as `name:message`, answers plain HTTP with its name, refuses the handshake on `/refuse`
 * (403, as an app's auth would), closes with 4001 when told `close`, and records the close code of
 * each connection it had and what came on its connections, in the order they came.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { WebSocket, WebSocketServer } from 'ws';
import type { Resources } from '../support/resources.js';

export interface WsUpstream {
  name: string;
  address: string;
  /** Close codes the upstream received, one per connection that closed. */
  closes: number[];
  /** Connections open now. */
  open(): number;
  /**
   * What reached it (`GET /path`, `upgrade /path`), in the order its connections were accepted:
   * the order the router sent them in, whichever connection's bytes were parsed first.
   */
  arrivals(): string[];
}

export async function startWsUpstream(resources: Resources, name: string): Promise<WsUpstream> {
  const accepted = new WeakMap<object, number>();
  const seen: { connection: number; what: string }[] = [];
  const note = (req: IncomingMessage, what: string) =>
    seen.push({ connection: accepted.get(req.socket) ?? -1, what: `${what} ${req.url}` });
  const server = createServer((req, res) => {
    note(req, req.method ?? 'GET');
    req.resume();
    res.setHeader('x-upstream', name);
    res.end(name);
  });
  let connections = 0;
  server.on('connection', (socket) => accepted.set(socket, connections++));
  server.on('upgrade', (req: IncomingMessage) => note(req, 'upgrade'));
  const closes: number[] = [];
  const wss = new WebSocketServer({
    server,
    verifyClient: (info, callback) =>
      info.req.url === '/refuse' ? callback(false, 403, 'not allowed here') : callback(true),
  });
  wss.on('connection', (socket) => {
    // A frame that is not one (bytes nginx tunnels after a handshake's body) ends that connection only.
    socket.on('error', () => undefined);
    socket.send(`hello ${name}`);
    socket.on('message', (data, binary) => {
      if (binary) socket.send(data, { binary: true });
      else if (String(data) === 'close') socket.close(4001, 'upstream closes');
      else socket.send(`${name}:${String(data)}`);
    });
    socket.on('close', (code) => closes.push(code));
  });
  const address = await resources.listen(server);
  resources.add(() => {
    for (const client of wss.clients) client.terminate();
    wss.close();
  });
  return {
    name,
    address,
    closes,
    open: () => wss.clients.size,
    arrivals: () => [...seen].sort((a, b) => a.connection - b.connection).map((s) => s.what),
  };
}

/** A client connection through the router: the slot that greeted it, what it received, how it closed. */
export interface WsClient {
  socket: WebSocket;
  /** The upstream that greeted it (`hello <name>`). */
  greetedBy: string;
  received: string[];
  /** Resolves with the close code once the connection closed, and when (Date.now()). */
  closed: Promise<{ code: number; at: number }>;
  /** Sends `text` and resolves with the next message. */
  ask(text: string): Promise<string>;
}

export async function openWs(resources: Resources, listen: string, path = '/'): Promise<WsClient> {
  const socket = new WebSocket(`ws://${listen}${path}`);
  resources.add(() => socket.terminate());
  const received: string[] = [];
  const waiting: ((message: string) => void)[] = [];
  const greeted = new Promise<string>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('message', (data) => {
      const text = String(data);
      if (received.length === 0) resolve(text.replace(/^hello /, ''));
      received.push(text);
      waiting.shift()?.(text);
    });
  });
  const closed = new Promise<{ code: number; at: number }>((resolve) =>
    socket.once('close', (code) => resolve({ code, at: Date.now() })),
  );
  const greetedBy = await greeted;
  socket.on('error', () => undefined);
  return {
    socket,
    greetedBy,
    received,
    closed,
    ask: (text) =>
      new Promise((resolve) => {
        waiting.push(resolve);
        socket.send(text);
      }),
  };
}

/** The router's or the upstream's answer to a handshake it did not upgrade. */
export interface WsRefusal {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Sends a WebSocket handshake that must not be upgraded; resolves with the answer it got. */
export function refusedWs(resources: Resources, listen: string, path = '/'): Promise<WsRefusal> {
  const socket = new WebSocket(`ws://${listen}${path}`);
  resources.add(() => socket.terminate());
  return new Promise((resolve, reject) => {
    socket.once('open', () => reject(new Error(`the handshake for ${path} was upgraded`)));
    socket.once('error', reject);
    socket.once('unexpected-response', (_req, res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
  }).finally(() => socket.on('error', () => undefined)) as Promise<WsRefusal>;
}
