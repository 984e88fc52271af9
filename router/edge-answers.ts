import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseHostPort } from '../core/host-port.js';
import { type ProxyListener, refuseRequest } from './proxy-request.js';
import type { RouteListener } from './route-listeners.js';
import type { Binding, RouteState } from './routing-state.js';

/**
 * What the router answers itself on a TLS route's edge: the redirect listener's 308 to https, and
 * Strict-Transport-Security on answers over TLS. True when the request was answered here.
 */
export function answerAtEdge(
  listener: RouteListener,
  binding: Binding,
  route: RouteState,
  req: IncomingMessage,
  res: ServerResponse,
  client: ProxyListener,
): boolean {
  if (binding.kind === 'redirect') {
    redirectToHttps(route, req, res, client);
    return true;
  }
  const hsts = route.tls?.hstsHeader;
  if (hsts !== undefined && listener.protocol.type === 'tls')
    res.setHeader('strict-transport-security', hsts);
  return false;
}

/**
 * 308 to the same host and target on https, at the route's TLS port (left out when 443). 308, not
 * 301: the method and body are kept. A request without Host goes to the listen address's host.
 */
function redirectToHttps(
  route: RouteState,
  req: IncomingMessage,
  res: ServerResponse,
  client: ProxyListener,
): void {
  const listen = parseHostPort(route.listen);
  const port = listen === null || listen.port === 443 ? '' : `:${listen.port}`;
  const host = hostName(req.headers.host) ?? bracketed(listen?.host ?? 'localhost');
  const location = `https://${host}${port}${req.url ?? '/'}`;
  refuseRequest(req, res, client, 308, `cutover: ${location}\n`, { location });
}

/** The host of a Host header, without its port; brackets kept around an IPv6 address. */
function hostName(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    return end < 0 ? undefined : value.slice(0, end + 1);
  }
  const colon = value.indexOf(':');
  return colon < 0 ? value : value.slice(0, colon);
}

function bracketed(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
