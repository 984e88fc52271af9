/**
 * Two reference proxies for the CPU-per-request comparison of bench/router-bench.js: what one Node
 * process must spend per proxied request at the least, so that the router's figure against nginx's
 * can be read against what Node allows. Neither is a proxy to use: GET without a body only, answers
 * with a Content-Length only, one request at a time per connection, no checks.
 *
 *   node bench/proxy-floors.js <pipe|llhttp> <listen port> <upstream host:port>
 *
 * - `pipe`: bytes through, nothing parsed: each client connection gets one upstream connection of
 *   its own and every read is written to the other side: one read and one write on each side per
 *   request, as nginx does. The floor of any proxy in Node.
 * - `llhttp`: requests parsed by Node's own HTTP parser (llhttp, the parser Node's HTTP server
 *   runs) straight from the socket, without Node's HTTP server (no IncomingMessage, no
 *   ServerResponse, no stream per request); headers by the router's rules (forward-headers.ts),
 *   sent with the router's client (UpstreamPools), the answer's head and body in one write. What
 *   the router's data path costs without Node's HTTP server. `HTTPParser` is Node's internal
 *   parser binding (node:_http_common), not a public API.
 *
 * It prints `ready <mode>` on stdout once it listens on 127.0.0.1.
 */
import { HTTPParser, methods } from 'node:_http_common';
import { connect, createServer } from 'node:net';
import {
  clientResponseHeaders,
  upstreamRequestHead,
  upstreamRequestHeaders,
} from '../dist/router/forward-headers.js';
import { UpstreamExchange } from '../dist/router/upstream-exchange.js';
import { UpstreamPools } from '../dist/router/upstream-pools.js';

const [mode, listenPort, upstream] = process.argv.slice(2);
const [upstreamHost, upstreamPort] = upstream.split(':');

function pipeServer() {
  return createServer((client) => {
    client.setNoDelay(true);
    const server = connect({ host: upstreamHost, port: Number(upstreamPort), noDelay: true });
    client.on('data', (data) => server.write(data));
    server.on('data', (data) => client.write(data));
    const close = () => {
      client.destroy();
      server.destroy();
    };
    client.on('error', close);
    server.on('error', close);
    client.on('close', close);
    server.on('close', close);
  });
}

const kOnHeadersComplete = HTTPParser.kOnHeadersComplete | 0;
const kOnMessageComplete = HTTPParser.kOnMessageComplete | 0;

/** One client connection: its parser, and the request being answered. */
class Connection {
  head = '';
  method = 'GET';
  url = '/';
  rawHeaders = [];

  constructor(socket, pools) {
    this.socket = socket;
    this.pools = pools;
    this.parser = new HTTPParser();
    this.parser.initialize(HTTPParser.REQUEST, {}, 0, 0);
    this.parser[kOnHeadersComplete] = (_major, _minor, headers, method, url) => {
      this.method = methods[method];
      this.url = url;
      this.rawHeaders = headers;
      return 0;
    };
    this.parser[kOnMessageComplete] = () => this.send();
    this.parser.consume(socket._handle);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.parser.unconsume();
      this.parser.free();
    });
  }

  send() {
    // upstreamRequestHeaders reads what an IncomingMessage has: rawHeaders and the socket.
    const { headers } = upstreamRequestHeaders(
      { rawHeaders: this.rawHeaders, socket: this.socket },
      upstream,
    );
    const exchange = new UpstreamExchange(
      this.method,
      upstreamRequestHead(this.method, this.url, headers),
      'none',
      this,
      60_000,
      5_000,
    );
    this.pools.get(upstream).send(exchange);
  }

  upstreamConnected() {}

  upstreamHead(status, reason, raw) {
    const headers = clientResponseHeaders(raw, 'blue', false);
    let head = `HTTP/1.1 ${status} ${reason}\r\n`;
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
    this.head = `${head}\r\n`;
  }

  upstreamBody(chunk, last) {
    const head = this.head;
    this.head = '';
    if (head !== '' && last) this.socket.write(head + chunk.toString('latin1'), 'latin1');
    else {
      if (head !== '') this.socket.write(head, 'latin1');
      if (chunk.length > 0) this.socket.write(Buffer.from(chunk));
    }
    return true;
  }

  upstreamFailed() {
    this.socket.destroy();
  }
}

function llhttpServer() {
  const pools = new UpstreamPools();
  return createServer({ noDelay: true }, (socket) => new Connection(socket, pools));
}

const servers = { pipe: pipeServer, llhttp: llhttpServer };
if (!(mode in servers))
  throw new Error(`usage: proxy-floors.js <${Object.keys(servers).join('|')}> <port> <upstream>`);
const server = servers[mode]();
server.listen(Number(listenPort), '127.0.0.1', () => process.stdout.write(`ready ${mode}\n`));
process.on('SIGTERM', () => process.exit(0));
