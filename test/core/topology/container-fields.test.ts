/** The container driver's settings and component fields: the model, defaults, round trip, located errors. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (driver: string, web: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers:
  apps: { type: process }
  ctr:
${driver}
components:
  worker: { driver: apps, version: "1", run: { command: [node, worker.js] } }
  web:
${web}
`;

const fullDriver = `    type: container
    host: ssh://deploy@10.0.0.5
    runtime: runc
    config: ./containers.conf
    network: host
    stopTimeout: 20s`;

const fullWeb = `    driver: ctr
    version: "1.4.0"
    image: registry.example/web:1.4.0
    command: [/app, --serve]
    ports: [{ container: 8080 }, { container: 9090 }]
    env: { MODE: live, TOKEN: { secret: WEB_TOKEN } }
    volumes: [data:/var/lib/web, ./static:/static:ro]
    resources: { cpus: 0.5, memory: 256m }
    user: "1000:1000"
    network: bridge
    pull: always
    stopTimeout: 3s`;

function problems(driver: string, web: string): string[] {
  const result = loadTopology(file(driver, web), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line} ${d.path}: ${d.message}`);
}

describe('container driver fields', () => {
  it('normalise with durations in ms, the default pull, and render back to the same model', () => {
    const result = loadTopology(file(fullDriver, fullWeb), { file: 'topology.yaml' });
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
    const model = result.topology;
    expect(model.drivers.ctr).toEqual({
      config: './containers.conf',
      host: 'ssh://deploy@10.0.0.5',
      network: 'host',
      runtime: 'runc',
      stopTimeout: 20_000,
      type: 'container',
    });
    expect(model.components.web).toMatchObject({
      image: 'registry.example/web:1.4.0',
      command: ['/app', '--serve'],
      ports: [{ container: 8080 }, { container: 9090 }],
      volumes: ['data:/var/lib/web', './static:/static:ro'],
      resources: { cpus: 0.5, memory: '256m' },
      user: '1000:1000',
      network: 'bridge',
      pull: 'always',
      stopTimeout: 3_000,
    });
    // Canonical: keys in sorted order (normalize.ts's invariant), so plan ids do not depend on the file's order.
    const keys = Object.keys(model.components.web as object);
    expect(keys).toEqual([...keys].sort());
    const again = loadTopology(topologyText(model, 'recorded'), { file: 'recorded' });
    expect(again.ok && again.topology).toEqual(model);

    const minimal = loadTopology(
      file(
        '    type: container',
        `    driver: ctr\n    version: "1"\n    image: web@sha256:${'a'.repeat(64)}`,
      ),
      { file: 't' },
    );
    if (!minimal.ok) throw new Error(JSON.stringify(minimal.diagnostics));
    expect(minimal.topology.drivers.ctr).toEqual({ stopTimeout: 10_000, type: 'container' });
    expect(minimal.topology.components.web?.pull).toBe('missing');
    // Components on other drivers gain no field: their models (and plan ids) stay as they were.
    expect(minimal.topology.components.worker).not.toHaveProperty('pull');
  });

  it('refuses, by line and field: no image, a run on a container driver, a fixed host port, container fields elsewhere', () => {
    expect(
      problems('    type: container', '    driver: ctr\n    version: "1"\n    run: { command: [x] }'),
    ).toEqual([
      '10 components.web.image: is required for a component on a container driver',
      '13 components.web.run: is for the process driver; a container runs its image, or `command` given beside it',
    ]);
    expect(
      problems(
        '    type: container',
        '    driver: ctr\n    version: "1"\n    image: web:1\n    replicas: 2\n    ports: [{ container: 80, host: 8081 }]',
      ),
    ).toEqual([
      '15 components.web.ports[0].host: is fixed, but green starts while blue still holds its ports, so every migration after the first would fail (address already in use); leave host out (a free port per replica) and give clients routes.<name>.listen as the stable address',
    ]);
    // An image the engine's CLI would read as a flag (`pull --help`, `image inspect -q`).
    expect(
      problems('    type: container', '    driver: ctr\n    version: "1"\n    image: "--privileged"'),
    ).toEqual([
      '13 components.web.image: starts with "-", which the engine\'s CLI would read as a flag; name the image (registry/name:tag or name@sha256:…)',
    ]);
    // One replica, or the host network, fails the same way: blue and green overlap.
    for (const extra of ['', '\n    network: host']) {
      expect(
        problems(
          '    type: container',
          `    driver: ctr\n    version: "1"\n    image: web:1\n    ports: [{ container: 80 }, { container: 81, host: 8081 }]${extra}`,
        ),
      ).toEqual([
        '14 components.web.ports[1].host: is fixed, but green starts while blue still holds its ports, so every migration after the first would fail (address already in use); leave host out (a free port per replica) and give clients routes.<name>.listen as the stable address',
      ]);
    }
    const onProcess = loadTopology(
      file(
        '    type: container',
        '    driver: apps\n    version: "1"\n    run: { command: [x] }\n    image: web:1',
      ),
      { file: 'topology.yaml' },
    );
    expect(onProcess.ok ? [] : onProcess.diagnostics.map((d) => `${d.line} ${d.path}: ${d.message}`)).toEqual(
      ['14 components.web.image: is a container driver field; driver "apps" is of type process'],
    );
    expect(
      problems(
        '    type: container\n    engine: rkt',
        '    driver: ctr\n    version: "1"\n    image: web:1',
      )[0],
    ).toMatch(/^8 drivers\.ctr\.engine: must be one of: podman, docker$/);
    expect(
      problems(
        '    type: container\n    engine: docker\n    config: ./c.conf',
        '    driver: ctr\n    version: "1"\n    image: web:1',
      ),
    ).toEqual([
      "9 drivers.ctr.config: is podman's containers.conf, which docker does not read; leave it out, or use engine: podman",
    ]);
    expect(
      problems(
        '    type: container\n    engine: podman\n    host: ssh://a@b\n    runtime: runc',
        '    driver: ctr\n    version: "1"\n    image: web:1',
      ),
    ).toEqual([
      "10 drivers.ctr.runtime: cannot be chosen for a remote podman (host): the remote service uses its own runtime; set it in that machine's containers.conf and leave runtime out",
    ]);
  });
});
