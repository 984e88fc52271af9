/**
 * A minimal reverse proxy for bench/router-client-bench.js, in one of two builds that differ only in
 * the upstream client, so that the bench compares the clients and nothing else:
 *
 *   node bench/router-client-proxy.js <own|undici> <listen port> <upstream host:port>
 *
 * - `own`: the router's client, UpstreamPools / UpstreamExchange (router/upstream-pool.ts, which
 *   parses responses with router/http1-response.ts), from dist/.
 * - `undici`: undici's `Pool` and its `dispatch` (llhttp compiled to WebAssembly): the `undici`
 *   package when it is installed, else the copy Node bundles for `fetch` (not exported by Node; its
 *   Pool class is reached through the global dispatcher that the first `fetch` installs).
 *
 * Both do what the router's data path does for a GET without a body: the client's headers go
 * through the router's own rules (router/forward-headers.ts: hop-by-hop headers dropped,
 * X-Forwarded-* added), the upstream is reached over a keep-alive pool (at most 256 connections,
 * idle ones closed after 4 s, as upstream-pool.ts), the response head is forwarded as a raw list
 * with the same rules, and the body streams to the client with backpressure, its first small chunk
 * sent with the head in one write as proxy-request.ts does. Routing, in-flight counting, retries and
 * request bodies are left out (a request with a body is answered 501): they are the same code
 * whichever client carries the request.
 *
 * It prints `ready <client>` on stdout once it listens on 127.0.0.1.
 */
import { createServer } from 'node:http';
import {
  clientResponseHeaders,
  upstreamRequestHead,
  upstreamRequestHeaders,
} from '../dist/router/forward-headers.js';
import { UpstreamExchange } from '../dist/router/upstream-exchange.js';
import { upstreamMaxSockets } from '../dist/router/upstream-pool.js';
import { UpstreamPools } from '../dist/router/upstream-pools.js';

const [client, listenPort, upstream] = process.argv.slice(2);
/** As the router's defaults for a route (upstreamTimeout, queueTimeout). */
const upstreamTimeoutMs = 60_000;
const queueTimeoutMs = 5_000;
/** As upstream-pool.ts: an idle connection is closed below Node's server keepAliveTimeout (5 s). */
const idleSocketTimeoutMs = 4_000;
/** Up to this size, the first chunk of a response body goes out in one write with the headers. */
const inlineFirstChunkBytes = 16 * 1024;

/** The client side of one request: what proxy-request.ts does with an upstream's answer. */
class ClientSide {
  firstBodyChunk = true;
  awaitingDrain = false;
  /** Set by each client: resumes reading the upstream once the client drained. */
  resumeUpstream = null;

  constructor(res) {
    this.res = res;
  }

  head(status, reason, raw) {
    const { res } = this;
    if (res.destroyed) return;
    try {
      res.writeHead(status, reason, clientResponseHeaders(raw, 'blue', false));
    } catch (error) {
      this.fail(error);
    }
  }

  /** Answers false when the client cannot take more now. */
  body(chunk, last) {
    const { res } = this;
    if (res.destroyed || res.writableEnded) return true;
    const inline = this.firstBodyChunk && chunk.length <= inlineFirstChunkBytes;
    this.firstBodyChunk = false;
    const more =
      chunk.length === 0 ? true : inline ? res.write(chunk.toString('latin1'), 'latin1') : res.write(chunk);
    if (last) {
      const socket = res.socket;
      if (socket) while (socket.writableCorked > 0) socket.uncork();
      res.end();
      return true;
    }
    if (!more && !this.awaitingDrain) {
      this.awaitingDrain = true;
      res.once('drain', () => {
        this.awaitingDrain = false;
        this.resumeUpstream?.();
      });
    }
    return more;
  }

  fail(error) {
    const { res } = this;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    const text = `bench proxy: the upstream did not answer: ${error.message}\n`;
    res.writeHead(502, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

/** The router's client: one UpstreamExchange per request on the address's UpstreamPool. */
function ownClient(address) {
  const pools = new UpstreamPools();
  class OwnRequest extends ClientSide {
    upstreamConnected() {}
    upstreamHead(status, reason, headers) {
      this.head(status, reason, headers);
    }
    upstreamBody(chunk, last) {
      return this.body(chunk, last);
    }
    upstreamFailed(_failure, error) {
      this.fail(error);
    }
  }
  return (req, res, headers) => {
    const request = new OwnRequest(res);
    const method = req.method ?? 'GET';
    const exchange = new UpstreamExchange(
      method,
      upstreamRequestHead(method, req.url ?? '/', headers),
      'none',
      request,
      upstreamTimeoutMs,
      queueTimeoutMs,
    );
    request.resumeUpstream = () => exchange.resume();
    res.once('close', () => {
      if (!res.writableFinished) exchange.abort();
    });
    pools.get(address).send(exchange);
  };
}

/** undici's Pool: `dispatch` with a handler object (undici's lowest-level request API). */
async function undiciClient(address) {
  const { Pool, source } = await loadUndiciPool();
  const origin = `http://${address}`;
  const pool = new Pool(origin, {
    connections: upstreamMaxSockets,
    pipelining: 1,
    keepAliveTimeout: idleSocketTimeoutMs,
    keepAliveMaxTimeout: idleSocketTimeoutMs,
    headersTimeout: upstreamTimeoutMs,
    bodyTimeout: upstreamTimeoutMs,
  });
  class UndiciRequest extends ClientSide {
    abortUpstream = null;
    onConnect(abort) {
      this.abortUpstream = abort;
    }
    onHeaders(status, rawHeaders, resume, statusText) {
      this.resumeUpstream = resume;
      // undici hands the raw head as Buffers; the router's header rules work on strings.
      const raw = new Array(rawHeaders.length);
      for (let i = 0; i < rawHeaders.length; i++) raw[i] = rawHeaders[i].toString('latin1');
      this.head(status, statusText, raw);
      return true;
    }
    onData(chunk) {
      return this.body(chunk, false);
    }
    onComplete() {
      this.body(empty, true);
    }
    onError(error) {
      this.fail(error);
    }
  }
  const empty = Buffer.alloc(0);
  const handle = (req, res, headers) => {
    const request = new UndiciRequest(res);
    res.once('close', () => {
      if (!res.writableFinished) request.abortUpstream?.(new Error('the client went away'));
    });
    try {
      pool.dispatch({ origin, path: req.url ?? '/', method: req.method ?? 'GET', headers }, request);
    } catch (error) {
      // undici refuses some headers outright (Expect, Transfer-Encoding on a request it frames, …).
      request.fail(error);
    }
  };
  handle.source = source;
  return handle;
}

/**
 * undici's Pool class: from the package if installed; else from Node's own copy, which Node does not
 * export: the first `fetch` installs its global Agent, and an Agent keeps a Pool per origin.
 */
async function loadUndiciPool() {
  try {
    const undici = await import('undici');
    return { Pool: undici.Pool, source: 'undici package' };
  } catch {
    // Not installed: Node's bundled copy below.
  }
  await fetch('data:,');
  const Agent = globalThis[Symbol.for('undici.globalDispatcher.1')]?.constructor;
  if (typeof Agent !== 'function') throw new Error("Node's bundled undici was not found");
  const agent = new Agent({ connections: 2 });
  const clients = Object.getOwnPropertySymbols(agent).find((s) => s.description === 'clients');
  // A dispatch to an origin that refuses nothing yet: the Agent makes its Pool at once.
  const handler = { onConnect() {}, onHeaders() {}, onData() {}, onComplete() {}, onError() {} };
  agent.dispatch({ origin: 'http://127.0.0.1:9', path: '/', method: 'GET' }, handler);
  const pool = [...agent[clients].values()][0];
  const Pool = pool?.constructor;
  await agent.destroy().catch(() => undefined);
  if (Pool?.name !== 'Pool') throw new Error("Node's bundled undici keeps no Pool where expected");
  return { Pool, source: `undici ${process.versions.undici} bundled with Node ${process.version}` };
}

const forward =
  client === 'own' ? ownClient(upstream) : client === 'undici' ? await undiciClient(upstream) : null;
if (!forward || !listenPort || !upstream) {
  console.error('usage: node bench/router-client-proxy.js <own|undici> <listen port> <upstream host:port>');
  process.exit(2);
}
const server = createServer((req, res) => {
  req.on('error', () => {});
  res.on('error', () => {});
  const { headers, body } = upstreamRequestHeaders(req, upstream);
  if (body !== 'none') {
    res.writeHead(501, { 'content-length': '0', connection: 'close' });
    res.end();
    return;
  }
  forward(req, res, headers);
});
server.listen(Number(listenPort), '127.0.0.1', () => {
  console.log(`ready ${client === 'own' ? 'router/upstream-pool.ts' : forward.source}`);
});
process.on('SIGTERM', () => process.exit(0));
