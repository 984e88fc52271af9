/**
 * `host:port`, parsed in one place: the topology's checks, the router's table and listeners, the
 * drivers, the health probes and the Temporal probe all read addresses with these functions, so an
 * address one part accepts is an address every part accepts. Pure (core/), so the loader may use it.
 */

/** A `host:port` split for node:net: an IPv6 host without its brackets (`[::1]:8080` → `::1`). */
export interface HostPort {
  host: string;
  port: number;
}

export const minPort = 1;
export const maxPort = 65_535;

/**
 * The syntax only: `host:port` or `[v6]:port`, the port 1 to 5 digits (in range or not), the host
 * non-empty, and without `:` unless bracketed. Null for anything else. For a caller that reports an
 * out-of-range port itself (the topology's checks); everyone else uses `parseHostPort`.
 */
export function splitHostPort(address: string): HostPort | null {
  const sep = address.lastIndexOf(':');
  if (sep <= 0) return null;
  let host = address.slice(0, sep);
  const portText = address.slice(sep + 1);
  if (!/^[0-9]{1,5}$/.test(portText)) return null;
  if (host.startsWith('[')) {
    if (!host.endsWith(']')) return null;
    host = host.slice(1, -1);
  } else if (host.includes(':')) {
    return null;
  }
  return host === '' || host.includes('[') || host.includes(']') ? null : { host, port: Number(portText) };
}

/**
 * An address to connect to or listen on: `host:port` with the port in 1-65535. An `http://` prefix
 * and a trailing slash are tolerated because drivers that print addresses sometimes add them.
 * Returns null for anything else, so a bad address is reported instead of thrown.
 */
export function parseHostPort(address: string): HostPort | null {
  const split = splitHostPort(address.replace(/^http:\/\//i, '').replace(/\/$/, ''));
  return split && split.port >= minPort && split.port <= maxPort ? split : null;
}
