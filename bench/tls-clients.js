/**
 * TLS clients for the router-tls bench, run as a process of their own (a core of their own on two),
 * so that the client's half of each handshake does not slow the server measured:
 *
 *   node bench/tls-clients.js handshakes <host:port> <seconds> <concurrency>
 *   node bench/tls-clients.js h2 <host:port> <seconds> <sessions> <streams per session>
 *
 * `handshakes`: full handshakes (no session resumption, TLS 1.3, ALPN http/1.1), each connection
 * closed once it is up. `h2`: GET / over HTTP/2 sessions, each keeping its streams busy. Prints one
 * line of JSON: `{ done, failed, seconds }`.
 */
import http2 from 'node:http2';
import tls from 'node:tls';

const [mode, address, secondsText, a, b] = process.argv.slice(2);
const [host, port] = address.split(':');
const seconds = Number(secondsText);
const until = performance.now() + seconds * 1000;
let done = 0;
let failed = 0;

function handshakes(concurrency) {
  const one = () =>
    new Promise((resolve) => {
      const socket = tls.connect({
        host,
        port: Number(port),
        servername: 'bench.test',
        rejectUnauthorized: false,
        ALPNProtocols: ['http/1.1'],
        // A new session every time: no ticket kept from the last one.
        session: undefined,
      });
      socket.once('secureConnect', () => {
        done++;
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        failed++;
        resolve();
      });
    });
  const worker = async () => {
    while (performance.now() < until) await one();
  };
  return Promise.all(Array.from({ length: concurrency }, worker));
}

function h2(sessions, streams) {
  const connect = () => {
    const s = http2.connect(`https://${address}`, { rejectUnauthorized: false, servername: 'bench.test' });
    s.on('error', () => undefined);
    s.on('goaway', () => Object.assign(s, { goneAway: true }));
    return s;
  };
  const all = Array.from({ length: sessions }, connect);
  // A session the server ended (GOAWAY) is replaced for the next streams.
  const live = (index) => {
    const s = all[index];
    if (!s.closed && !s.destroyed && !s.goneAway) return s;
    all[index] = connect();
    return all[index];
  };
  const stream = (index) =>
    new Promise((resolve) => {
      let req;
      try {
        req = live(index).request({ ':path': '/' });
      } catch {
        failed++;
        resolve();
        return;
      }
      req.on('response', (headers) => {
        if (headers[':status'] === 200) done++;
        else failed++;
      });
      req.resume();
      req.on('close', resolve);
      req.on('error', () => {
        failed++;
        resolve();
      });
    });
  const workers = all.flatMap((_, index) =>
    Array.from({ length: streams }, async () => {
      while (performance.now() < until) await stream(index);
    }),
  );
  return Promise.all(workers).then(() => {
    for (const s of all) s.close();
  });
}

const started = performance.now();
await (mode === 'handshakes' ? handshakes(Number(a)) : h2(Number(a), Number(b)));
process.stdout.write(`${JSON.stringify({ done, failed, seconds: (performance.now() - started) / 1000 })}\n`);
