import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Slot } from './routing-state.js';

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message: a proxy drops
 * them and opens its own connection. Transfer-Encoding stays on requests because Node frames the
 * upstream body by it; on responses Node re-frames for its own client.
 */
const hopByHop = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);

function endToEnd(headers: IncomingHttpHeaders, alsoDrop: readonly string[]): OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  const drop = new Set([...hopByHop, ...named, ...alsoDrop]);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !drop.has(name)) out[name] = value;
  }
  return out;
}

/** Headers sent upstream: the client's, plus who asked (`x-forwarded-*`). */
export function upstreamRequestHeaders(req: IncomingMessage): OutgoingHttpHeaders {
  const headers = endToEnd(req.headers, []);
  const client = req.socket.remoteAddress ?? '';
  const prior = req.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = prior ? `${prior}, ${client}` : client;
  headers['x-forwarded-proto'] ??= 'http';
  if (req.headers.host !== undefined) headers['x-forwarded-host'] ??= req.headers.host;
  return headers;
}

/** Headers sent to the client: the upstream's, plus the slot that answered. */
export function clientResponseHeaders(
  upstream: IncomingMessage,
  slot: Slot,
  closeConnection: boolean,
): OutgoingHttpHeaders {
  const headers = endToEnd(upstream.headers, ['transfer-encoding']);
  headers['x-cutover-slot'] = slot;
  if (closeConnection) headers.connection = 'close';
  return headers;
}
