#!/usr/bin/env node
// A tiny HTTP app for the examples: one replica of a component on the `process` driver.
//
//   PORT     the port to listen on (the process driver gives every replica its own)
//   VERSION  reported by GET / so you can watch traffic move from blue to green
//   HOST     the address to bind, default 127.0.0.1
//   UNHEALTHY=1  GET /healthz always answers 503 (a broken release, for the demo's failed gate)
//
//   GET /         200 {"version": "...", "pid": 1234}
//   GET /healthz  200 ok (503 once shutting down, so probes and the router stop sending traffic)
//   GET /slow?ms=N  like GET /, answered after N ms (at most 60 s): a long request, to watch a drain
//
// On SIGTERM or SIGINT it stops accepting connections, lets in-flight requests finish, then exits 0.
import http from 'node:http';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const version = process.env.VERSION ?? process.env.CUTOVER_VERSION ?? 'dev';
// Optional artificial latency per request (ms), handy to see drain wait for in-flight requests.
const delayMs = Number(process.env.RESPONSE_DELAY_MS ?? 0);
const unhealthy = process.env.UNHEALTHY === '1';

let shuttingDown = false;

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const reply = () => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, { error: 'method not allowed' }, { allow: 'GET, HEAD' });
    } else if (url.pathname === '/healthz') {
      if (shuttingDown) send(res, 503, 'shutting down\n');
      else if (unhealthy) send(res, 503, 'unhealthy (UNHEALTHY=1)\n');
      else send(res, 200, 'ok\n');
    } else if (url.pathname === '/') {
      send(res, 200, { version, pid: process.pid });
    } else if (url.pathname === '/slow') {
      const ms = Math.min(60_000, Math.max(0, Number(url.searchParams.get('ms') ?? 1000)));
      setTimeout(() => send(res, 200, { version, pid: process.pid, slowMs: ms }), ms);
    } else {
      send(res, 404, { error: 'not found' });
    }
  };
  if (delayMs > 0) setTimeout(reply, delayMs);
  else reply();
});

function send(res, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : `${JSON.stringify(body)}\n`;
  const type = typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(text),
    ...(shuttingDown ? { connection: 'close' } : {}),
    ...headers,
  });
  res.end(text);
}

server.keepAliveTimeout = 5_000;

server.on('error', (error) => {
  console.error(`server error: ${error.message}`);
  process.exit(1);
});

server.listen(port, host, () => {
  console.log(`listening on http://${host}:${port} version=${version} pid=${process.pid}`);
});

function shutdown(signal) {
  if (shuttingDown) return;
  shuttingDown = true;
  console.log(`${signal}: draining, no new connections`);
  // Stop accepting; close idle keep-alive sockets now, busy ones after their response.
  server.close(() => {
    console.log('drained, exiting');
    process.exit(0);
  });
  server.closeIdleConnections();
  // Safety net, below the process driver's default stopTimeout (10s) so we exit before SIGKILL.
  setTimeout(() => {
    console.error('drain took too long, exiting');
    process.exit(0);
  }, 8_000).unref();
}

process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
