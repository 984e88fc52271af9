import type { ObservedRoute } from '../../core/observed.js';
import type { Route } from '../../core/topology/types.js';
import { readIfExists } from './driver-files.js';
import { routeKey, servedAsRecorded } from './managed-balancer.js';
import { nginxFiles, nginxSpec, readSidecar, renderNginxConfig, servedGeneration } from './nginx-driver.js';
import type { RouteCallContext } from './types.js';

/**
 * A route of the nginx driver as it is now: `edited` when the generated file is not the one the
 * driver renders from its sidecar (someone changed or replaced it); `not_served` when the sidecar
 * has no such route, or its listener does not answer with the file's generation (nginx is down,
 * or runs an older configuration); else `served`, with the split the sidecar recorded.
 */
export async function observeNginxRoute(
  ctx: RouteCallContext,
  route: string,
  spec: Route,
): Promise<ObservedRoute> {
  const seen = { route, listen: spec.listen };
  const files = nginxFiles(ctx.baseDir, nginxSpec(ctx, route));
  const sidecar = await readSidecar(files.sidecar);
  const entry = sidecar.routes[routeKey(ctx.environment, route)];
  if (!entry) return { ...seen, state: 'not_served', detail: `${files.sidecar} has no such route` };
  const rendered = renderNginxConfig(sidecar);
  const text = await readIfExists(files.config);
  if (text !== rendered.text) {
    const how = text === null ? 'is missing' : 'is not the one cutover wrote';
    return { ...seen, state: 'edited', detail: `${files.config} ${how}` };
  }
  const served = await servedGeneration(entry.listen);
  if (typeof served !== 'object' || served.generation !== rendered.generation) {
    const what = typeof served === 'object' ? `generation ${served.generation}` : served;
    const detail = `${entry.listen} does not serve generation ${rendered.generation} of ${files.config} (answer: ${what})`;
    return { ...seen, state: 'not_served', detail };
  }
  return servedAsRecorded(seen, entry);
}
