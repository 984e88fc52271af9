import type { PathProblem } from './diagnostic.js';
import type { ComponentFile, DriverFile } from './file-types.js';

/** The component fields only the container driver reads. */
const containerFields = [
  'image',
  'command',
  'ports',
  'volumes',
  'resources',
  'user',
  'network',
  'pull',
  'stopTimeout',
] as const;

/**
 * The container fields of one component against its driver's type: on a container driver it needs
 * an `image`, no `run` and no fixed host port; on any other driver
 * the container fields are refused rather than ignored (a `ports` on a process component would
 * otherwise be silently meaningless).
 */
export function checkContainerFields(
  name: string,
  component: ComponentFile,
  driverType: DriverFile['type'],
): PathProblem[] {
  const at = (...rest: (string | number)[]) => ['components', name, ...rest];
  const problems: PathProblem[] = [];
  if (driverType !== 'container') {
    for (const field of containerFields) {
      if (component[field] !== undefined) {
        problems.push({
          path: at(field),
          message: `is a container driver field; driver "${component.driver}" is of type ${driverType}`,
        });
      }
    }
    return problems;
  }
  if (component.image === undefined) {
    problems.push({ path: at('image'), message: 'is required for a component on a container driver' });
  }
  // The image is an argument of `pull`, `image inspect` and `run`: one starting with "-" is a flag there.
  if (component.image?.startsWith('-')) {
    problems.push({
      path: at('image'),
      message:
        'starts with "-", which the engine\'s CLI would read as a flag; name the image (registry/name:tag or name@sha256:…)',
    });
  }
  if (component.run !== undefined) {
    problems.push({
      path: at('run'),
      message: 'is for the process driver; a container runs its image, or `command` given beside it',
    });
  }
  // A green-blue migration starts green while blue still holds its ports, on every network (the
  // host network too): a fixed host port would make every migration after the first fail with
  // "address already in use". The stable address clients use is the route's listen address.
  for (const [i, port] of (component.ports ?? []).entries()) {
    if (port.host === undefined) continue;
    problems.push({
      path: at('ports', i, 'host'),
      message:
        'is fixed, but green starts while blue still holds its ports, so every migration after the first would fail (address already in use); leave host out (a free port per replica) and give clients routes.<name>.listen as the stable address',
    });
  }
  return problems;
}

/**
 * A container driver's settings that cannot go together: podman-remote (`host`) has no
 * `--runtime`, and `config` is podman's containers.conf, which docker does not read.
 */
export function checkContainerDriver(name: string, driver: DriverFile): PathProblem[] {
  if (driver.type !== 'container') return [];
  const problems: PathProblem[] = [];
  if (driver.engine === 'podman' && driver.host !== undefined && driver.runtime !== undefined) {
    problems.push({
      path: ['drivers', name, 'runtime'],
      message:
        "cannot be chosen for a remote podman (host): the remote service uses its own runtime; set it in that machine's containers.conf and leave runtime out",
    });
  }
  if (driver.engine === 'docker' && driver.config !== undefined) {
    problems.push({
      path: ['drivers', name, 'config'],
      message: "is podman's containers.conf, which docker does not read; leave it out, or use engine: podman",
    });
  }
  return problems;
}
