import type { PathProblem } from './diagnostic.js';
import type { ComponentFile, DriverFile } from './file-types.js';
import { describeHosts, hostsMatching } from './placement.js';
import type { ContainerHost } from './types.js';

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
  const problems: PathProblem[] = [];
  if (driverType !== 'container') {
    // Every component of a large file comes here: indexes, no closure (code still cold runs it).
    for (let i = 0; i < containerFields.length; i++) {
      const field = containerFields[i] as (typeof containerFields)[number];
      if (component[field] !== undefined) {
        problems.push({
          path: ['components', name, field],
          message: `is a container driver field; driver "${component.driver}" is of type ${driverType}`,
        });
      }
    }
    return problems;
  }
  const at = (...rest: (string | number)[]) => ['components', name, ...rest];
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
  if (component.replicate?.dataDir !== undefined) {
    problems.push({
      path: at('replicate', 'dataDir'),
      message:
        "is for the process driver; a container component's named volumes are copied from blue to green without it: remove it, or set replicate.command",
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
  if (driver.hosts !== undefined) return [...problems, ...checkHosts(name, driver)];
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

type ContainerDriverFile = Extract<DriverFile, { type: 'container' }>;

/**
 * `hosts` replaces `host`; on each podman host with an engine URL (podman-remote) no runtime may be
 * chosen, its own or the driver's; a docker host reads no containers.conf.
 */
function checkHosts(name: string, driver: ContainerDriverFile): PathProblem[] {
  const problems: PathProblem[] = [];
  if (driver.host !== undefined) {
    problems.push({
      path: ['drivers', name, 'host'],
      message:
        'cannot go beside hosts: give each host its engine URL in hosts.<host>.host, or leave hosts out',
    });
  }
  for (const [hostName, host] of Object.entries(driver.hosts ?? {})) {
    const runtime = host.runtime ?? driver.runtime;
    if (driver.engine === 'podman' && host.host !== undefined && runtime !== undefined) {
      problems.push({
        path: ['drivers', name, 'hosts', hostName, host.runtime === undefined ? 'host' : 'runtime'],
        message: `is a remote podman, where runtime ${runtime}${host.runtime === undefined ? " (the driver's)" : ''} cannot be chosen: the remote service uses its own; set runtime per host, on the local ones only`,
      });
    }
    if (driver.engine === 'docker' && (host.config ?? driver.config) !== undefined) {
      problems.push({
        path: ['drivers', name, 'hosts', hostName, 'config'],
        message:
          "is podman's containers.conf, which docker does not read; leave it out, or use engine: podman",
      });
    }
  }
  return problems;
}

/** A component on a container driver with `hosts` must match one of them by its placement labels. */
export function checkPlacement(
  name: string,
  component: ComponentFile,
  driver: DriverFile | undefined,
): PathProblem[] {
  if (driver?.type !== 'container' || driver.hosts === undefined) return [];
  const wanted = component.placement?.labels ?? {};
  const hosts = Object.fromEntries(
    Object.entries(driver.hosts).map(([n, h]) => [n, { labels: h.labels ?? {} } as ContainerHost]),
  );
  if (hostsMatching(hosts, wanted).length > 0) return [];
  return [
    {
      path: ['components', name, 'placement', 'labels'],
      message: `match no host of driver ${component.driver} (hosts: ${describeHosts(hosts)}); change the labels, or a host's`,
    },
  ];
}
