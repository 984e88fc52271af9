/**
 * `cutover proxy routes`: what the router serves now (its `GET /routes`) for a person: each route's
 * split, addresses and requests in flight, its hold, and a TLS route's certificates with their
 * expiry, flagged when within `certificateWarningDays` or past, and a reload that failed. Pure:
 * takes the snapshot, the time and a style, returns text.
 */
import {
  certificateExpiry,
  certificateWarningDays,
  type RouteCertificatesInfo,
} from '../core/certificate-expiry.js';
import type { Style } from './style.js';

/** What the renderer reads of a route of the router's `RoutesSnapshot` (router/control-types.ts). */
export interface ProxyRouteView {
  listen: string;
  preview?: string;
  greenPercent: number;
  blue: readonly string[];
  green: readonly string[];
  inFlight: { blue: number; green: number };
  hold?: { id: string; held: number; pause?: unknown };
  tls?: RouteCertificatesInfo;
}

/** What the renderer reads of the router's `RoutesSnapshot`. */
export interface ProxyRoutesView {
  routes: Readonly<Record<string, ProxyRouteView>>;
  problems: readonly string[];
  unbound?: readonly { routeKey: string; address: string; cause: string; opening?: boolean }[];
}

const dayMs = 86_400_000;

/** `2026-11-25 15:04:05 UTC`. */
function when(iso: string): string {
  return `${iso.replace('T', ' ').slice(0, 19)} UTC`;
}

export function renderProxyRoutesText(snapshot: ProxyRoutesView, nowMs: number, style: Style): string {
  const keys = Object.keys(snapshot.routes).sort();
  const lines: string[] = [];
  if (keys.length === 0) lines.push(style.dim('The router serves no route.'));
  for (const key of keys)
    lines.push(...routeLines(key, snapshot.routes[key] as ProxyRouteView, nowMs, style));
  for (const u of snapshot.unbound ?? [])
    lines.push(
      u.opening
        ? style.dim(`${u.routeKey}: opening ${u.address}`)
        : style.red(`! ${u.routeKey}: cannot listen on ${u.address}: ${u.cause}`),
    );
  for (const problem of snapshot.problems) lines.push(style.red(`! ${problem}`));
  return `${lines.join('\n')}\n`;
}

function routeLines(key: string, route: ProxyRouteView, nowMs: number, style: Style): string[] {
  const inFlight = route.inFlight.blue + route.inFlight.green;
  const hold = route.hold
    ? `  ${style.yellow(`${route.hold.pause === undefined ? 'write hold' : 'paused'}, ${route.hold.held} held`)}`
    : '';
  const scheme = route.tls ? 'https' : 'http';
  const lines = [
    `${style.bold(key)}  ${scheme} ${route.listen}  blue ${100 - route.greenPercent}% / green ${route.greenPercent}%  in flight ${inFlight}${hold}`,
    `  blue   ${route.blue.join(', ') || '-'}`,
    `  green  ${route.green.join(', ') || '-'}`,
  ];
  if (route.preview !== undefined) lines.push(`  preview ${route.preview} (to green)`);
  if (route.tls) lines.push(...certificateLines(route.tls, nowMs, style));
  return lines;
}

function certificateLines(tls: RouteCertificatesInfo, nowMs: number, style: Style): string[] {
  const loaded = tls.loadedAt === undefined ? '' : style.dim(` (loaded ${when(tls.loadedAt)})`);
  const lines = [`  certificates${loaded}`];
  const rows = tls.certificates.map((c) => ({
    c,
    names: c.names.join(', '),
    until: until(c.notAfter, nowMs),
  }));
  const namesWidth = Math.max(0, ...rows.map((r) => r.names.length));
  const untilWidth = Math.max(0, ...rows.map((r) => r.until.length));
  for (const { c, names, until } of rows) {
    const columns = `${names.padEnd(namesWidth)}  ${until.padEnd(untilWidth)}  ${c.file}`;
    lines.push(`    ${expiryFlagged(columns, c.notAfter, nowMs, style)}`);
  }
  if (tls.certificates.length === 0) lines.push(style.red('    none served'));
  if (tls.problem !== undefined) {
    const at = tls.failedAt === undefined ? '' : ` at ${when(tls.failedAt)}`;
    const kept =
      tls.certificates.length > 0 ? '; the certificates above, loaded before, are still served' : '';
    const verb = tls.certificates.length > 0 ? 'reload' : 'load';
    lines.push(style.red(`    ! ${verb} failed${at}: ${tls.problem}${kept}`));
  }
  return lines;
}

/** `until 2026-11-30 (2 days left)`, `until 2026-11-20 (expired 8 days ago)`. */
function until(notAfter: string, nowMs: number): string {
  const leftMs = Date.parse(notAfter) - nowMs;
  return `until ${notAfter.slice(0, 10)} (${leftMs > 0 ? `${span(leftMs)} left` : `expired ${span(-leftMs)} ago`})`;
}

/** A certificate's line, flagged at its end when it expires within `certificateWarningDays` or has. */
function expiryFlagged(line: string, notAfter: string, nowMs: number, style: Style): string {
  const expiry = certificateExpiry(notAfter, nowMs);
  switch (expiry) {
    case 'expired':
      return style.red(`${line}  ! expired`);
    case 'expiring':
      return style.yellow(`${line}  ! expires within ${certificateWarningDays} days`);
    case 'valid':
      return line;
  }
}

/** `90 days`, `1 day`, `5 h`, `12 min`: the expiry's distance, short. */
function span(ms: number): string {
  if (ms >= 2 * dayMs) return `${Math.floor(ms / dayMs)} days`;
  if (ms >= dayMs) return '1 day';
  if (ms >= 3_600_000) return `${Math.floor(ms / 3_600_000)} h`;
  return `${Math.max(1, Math.floor(ms / 60_000))} min`;
}

/** `--json`: the router's snapshot as it is, one object. */
export function renderProxyRoutesJson(snapshot: ProxyRoutesView): string {
  return `${JSON.stringify(snapshot, null, 2)}\n`;
}
