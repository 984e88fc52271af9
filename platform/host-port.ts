/** A `host:port` as the table writes it (`127.0.0.1:8080`, `[::1]:8080`), split for node:net. */
export interface HostPort {
  host: string;
  port: number;
}

/**
 * Parses `host:port`; an `http://` prefix and a trailing slash are tolerated because drivers that
 * print addresses sometimes add them. Returns null for anything else, so a bad table entry is
 * reported instead of thrown.
 */
export function parseHostPort(address: string): HostPort | null {
  const bare = address.replace(/^http:\/\//i, '').replace(/\/$/, '');
  const sep = bare.lastIndexOf(':');
  if (sep <= 0) return null;
  let host = bare.slice(0, sep);
  const portText = bare.slice(sep + 1);
  if (!/^[0-9]{1,5}$/.test(portText)) return null;
  const port = Number(portText);
  if (port < 1 || port > 65_535) return null;
  if (host.startsWith('[')) {
    if (!host.endsWith(']')) return null;
    host = host.slice(1, -1);
  } else if (host.includes(':')) {
    return null;
  }
  return host === '' ? null : { host, port };
}
