import { createServer, type Server } from 'node:net';
import { createServer as createTlsServer, type SecureContextOptions } from 'node:tls';
import type { CertificateStore } from './certificate-store.js';
import type { ListenerProtocol, TlsProtocol } from './route-tls.js';

/**
 * A TLS handshake must be over within this long (Node's default is 120 s): nginx gives a new
 * connection its client_header_timeout, 60 s, for the handshake and the head together.
 */
export const tlsHandshakeTimeoutMs = 60_000;

/**
 * The server of one route listener, plain TCP or TLS, and the event that hands it a client: the
 * router reads HTTP/1.1 on it itself (http1-connection.ts), HTTP/2 goes to Node's (http2-clients.ts).
 */
export interface ListenerServer {
  server: Server;
  /** 'secureConnection' over TLS: 'connection' is then the TCP socket, before its handshake. */
  connectionEvent: 'connection' | 'secureConnection';
}

/**
 * The server for a listener speaking `protocol`. Over TLS the certificates are the store's for the
 * route the listener serves now (`routeKey()`): SNI picks one at each handshake, and a client
 * without SNI gets the first, renewed whenever the store's change. Throws when the route has no
 * usable certificate (the listener then stays unopened, the reason reported as its failure).
 */
export function listenerServer(
  protocol: ListenerProtocol,
  routeKey: () => string,
  certificates: CertificateStore,
): ListenerServer {
  if (protocol.type === 'http')
    return { server: createServer({ noDelay: true }), connectionEvent: 'connection' };
  return { server: tlsServer(protocol, routeKey, certificates), connectionEvent: 'secureConnection' };
}

function tlsServer(protocol: TlsProtocol, routeKey: () => string, certificates: CertificateStore): Server {
  let served = certificates.current(routeKey());
  if (!served)
    throw new Error(
      `no usable certificate for ${routeKey()}: ${certificates.problem(routeKey()) ?? 'none loaded'}`,
    );
  const settings: SecureContextOptions & { ALPNProtocols: string[] } = {
    minVersion: protocol.minVersion,
    ALPNProtocols: protocol.http2 ? ['h2', 'http/1.1'] : ['http/1.1'],
  };
  const server = createTlsServer({
    noDelay: true,
    ...settings,
    ...served.fallback.options,
    handshakeTimeout: tlsHandshakeTimeoutMs,
    SNICallback: (servername, done) => done(null, certificates.current(routeKey())?.pick(servername).context),
  });
  // Clients without SNI get the first certificate: the server's own context, renewed here while
  // it listens (a server that failed to listen is dropped, and must not stay subscribed).
  const renew = () => {
    const now = certificates.current(routeKey());
    if (!now || now === served) return;
    served = now;
    server.setSecureContext({ ...settings, ...now.fallback.options });
  };
  server.once('listening', () => {
    renew();
    server.once('close', certificates.onChange(renew));
  });
  return server;
}
