/**
 * What a plan needs to know of container images: the image each container component's `image`
 * names now, asked of its driver's engine before planning (as observed state and secrets' digests
 * are), so that a tag moved to a new build plans a replacement.
 */
import type { ImageDigests } from '../../core/plan/image-changes.js';
import { own } from '../../core/records.js';
import type { Topology } from '../../core/topology/types.js';
import { runEngine } from './container-engine.js';
import { placedEngine } from './container-names.js';
import { normaliseId } from './container-start.js';

/**
 * By component name, the id of the image its tag names in its engine's local store now; the
 * migration's provision runs exactly that id (MigrationSpec.images). Planning never pulls: `plan`,
 * `watch` and `migrate` (which holds the environment's claim meanwhile) would otherwise wait on a
 * registry. A component whose image the store does not have, whose engine cannot be asked, or
 * with `pull: always` (what provision will pull cannot be known without pulling) is left out:
 * unknown, never a change; its provision pulls (or refuses) and records the image it ran.
 * undefined when the topology has no container component, so other plans are made as before.
 */
export async function imageDigestsFor(
  topology: Topology,
  baseDir: string,
  signal: AbortSignal = new AbortController().signal,
): Promise<ImageDigests | undefined> {
  const out: Record<string, string> = {};
  let any = false;
  for (const name of Object.keys(topology.components).sort()) {
    const component = own(topology.components, name);
    const driver = component ? own(topology.drivers, component.driver) : undefined;
    if (!component?.image || driver?.type !== 'container') continue;
    any = true;
    if (component.pull === 'always') continue;
    try {
      const { engine } = placedEngine(component.driver, driver, component.placement.labels, baseDir);
      const found = await runEngine(engine, ['image', 'inspect', '--format', '{{.Id}}', component.image], {
        signal,
      });
      if (found.code === 0 && found.stdout.trim() !== '') out[name] = normaliseId(found.stdout.trim());
    } catch {
      // No engine here (or it did not answer): the image is unknown, which is never a change.
    }
  }
  return any ? out : undefined;
}
