import type { ObservedRoute } from '../../core/observed.js';
import type { Route } from '../../core/topology/types.js';
import {
  type CaddyInstance,
  caddyPaths,
  canonicalJson,
  renderEdgeServers,
  renderSplitServers,
} from './caddy-config.js';
import { liveConfig, readRecord } from './caddy-process.js';
import { routeKey, servedAsRecorded } from './managed-balancer.js';
import type { RouteCallContext } from './types.js';

/**
 * A route of the caddy driver as Caddy serves it now, read back from the two Caddys' live
 * configurations (`GET /config/`): `not_served` when the record has no such route, a Caddy does
 * not answer, or a server of the route is missing; `edited` when a server of the route is not the
 * one cutover loaded (an upstream removed, a weight changed through the admin API by hand); else
 * `served`, with the split the record holds, which is then the one Caddy runs.
 */
export async function observeCaddyRoute(
  ctx: RouteCallContext,
  route: string,
  spec: Route,
): Promise<ObservedRoute> {
  const seen = { route, listen: spec.listen };
  const paths = caddyPaths(ctx.stateDir.root);
  const entry = (await readRecord(paths.record)).routes[routeKey(ctx.environment, route)];
  if (!entry) return { ...seen, state: 'not_served', detail: `${paths.record} has no such route` };
  const expected: Record<CaddyInstance, Record<string, unknown>> = {
    edge: renderEdgeServers(entry, paths),
    split: renderSplitServers(entry, paths),
  };
  for (const instance of ['edge', 'split'] as const) {
    const live = (await liveConfig(paths, instance)) as LiveConfig | null;
    if (live === null)
      return { ...seen, state: 'not_served', detail: `caddy (${instance}) for ${paths.dir} does not answer` };
    const servers = live.apps?.http?.servers ?? {};
    for (const [name, want] of Object.entries(expected[instance])) {
      const have = servers[name];
      if (have === undefined)
        return { ...seen, state: 'not_served', detail: `caddy (${instance}) has no server ${name}` };
      if (canonicalJson(have) !== canonicalJson(want))
        return {
          ...seen,
          state: 'edited',
          edit: 'caddy configuration edited',
          detail: `caddy (${instance}) server ${name} is not the one cutover loaded (${differenceOf(have, want)})`,
        };
    }
  }
  return servedAsRecorded(seen, entry);
}

interface LiveConfig {
  apps?: { http?: { servers?: Record<string, unknown> } };
}

/** What differs, in a few words: the upstreams when they do ("upstreams a, b; cutover's: a, a, b"). */
function differenceOf(have: unknown, want: unknown): string {
  const dials = (server: unknown) =>
    (
      (server as { routes?: { handle?: { upstreams?: { dial?: string }[] }[] }[] }).routes?.[0]?.handle?.[0]
        ?.upstreams ?? []
    ).map((u) => shortDial(u.dial ?? '?'));
  const [now, then] = [dials(have), dials(want)];
  if (now.join() !== then.join())
    return `upstreams ${now.join(', ') || 'none'}; cutover's: ${then.join(', ')}`;
  return 'settings differ';
}

/** A split socket by its name (`s-<id>-green`), an address as it is. */
function shortDial(dial: string): string {
  const socket = /\/([^/]+)\.sock$/.exec(dial);
  return socket ? (socket[1] as string) : dial;
}
